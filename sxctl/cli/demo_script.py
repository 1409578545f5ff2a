"""The demo tour of `sxctl demo`: the whole protocol, live, against the built-in agent in a
throw-away project. A client of the CLI itself, not of the API.

Every step runs a real `sxctl` command in a subprocess, shows it as `$ sxctl …` with its output,
and checks the result (✓/✗) — against the command's output and the agent's own events.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..api.agent import INBOX, TRANSCRIPT


@dataclass
class Step:
    n: int
    command: str
    exit: int | None
    output: str
    checks: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok in self.checks)


class AgentWatch:
    """The reference agent as a child process; its JSON events, collected as they arrive."""

    def __init__(self, project: Path, env: dict[str, str], turn_seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sxctl", "--project", str(project), "agent", "run", "--init", "--json",
             "--turn-seconds", str(turn_seconds), "--poll-ms", "50"],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: list[dict] = []
        self.seen = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def wait(self, predicate: Callable[[dict], bool], timeout: float, count: int = 1) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in list(self.events) if predicate(e)]
            if len(found) >= count:
                return found
            time.sleep(0.02)
        return [e for e in list(self.events) if predicate(e)]

    def wait_idle(self, timeout: float = 20) -> bool:
        """Until every turn that started has ended (the next message then starts a turn), a timer
        that fired included: its turn starts just after `callback_fired`, and a tour step that
        began in between met a busy agent (a flaky check on a loaded machine)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = list(self.events)
            starts = [e for e in events if e["event"] == "turn_start"]
            if (len(starts) == sum(e["event"] == "turn_end" for e in events)
                    and sum(e.get("source") == "callback" for e in starts)
                    >= sum(e["event"] == "callback_fired" for e in events)):
                return True
            time.sleep(0.02)
        return False

    def new_lines(self) -> list[str]:
        """Transcript lines of the events since the last call (shown under each step)."""
        lines = []
        for event in self.events[self.seen:]:
            kind = event["event"]
            if kind == "inbox" and event["action"] in INBOX:
                lines.append(INBOX[event["action"]](event))
            elif kind in TRANSCRIPT and kind not in ("started",):
                lines.append(TRANSCRIPT[kind](event))
        self.seen = len(self.events)
        return lines


class Demo:
    def __init__(self, fast: bool, as_json: bool, show: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None]) -> None:
        self.fast = fast
        self.as_json = as_json
        self.show, self.emit = show, emit  # a transcript line; a JSON Lines event
        # long enough that the interrupt and the queued note of the inbox tour, each a new sxctl
        # process, reach the agent while its turn is still running, even on a loaded machine
        self.turn_seconds = 3.5 if fast else 4.0
        self.steps: list[Step] = []
        self.project = Path(tempfile.mkdtemp(prefix="sxctl-demo-"))
        os.chmod(self.project, 0o700)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SXCTL_", "SX_", "COMIS_")) and k != "SCORPIOX_INBOX"}
        self.env["NO_COLOR"] = "1"
        self.agent: AgentWatch | None = None

    # --- running and showing steps -----------------------------------------------------------------


    @property
    def watching(self) -> AgentWatch:
        """The running agent (the tour starts it before any step that watches it)."""
        assert self.agent is not None
        return self.agent
    def sxctl(self, *args: str, check: Callable[[int, str], list[tuple[str, bool]]] | None = None,
              agent_wait: Callable[[], list[tuple[str, bool]]] | None = None) -> tuple[int, str]:
        shown = "sxctl " + " ".join(_quote(a) for a in args)
        proc = subprocess.run([sys.executable, "-m", "sxctl", "--project", str(self.project), *args],
                              cwd=self.project, env=self.env, capture_output=True, text=True, timeout=120)
        output = (_brief(proc.stdout) + proc.stderr).rstrip("\n")
        checks = check(proc.returncode, proc.stdout) if check else []
        if agent_wait is not None:
            checks += agent_wait()
        self._show(Step(len(self.steps) + 1, shown, proc.returncode, output, checks))
        return proc.returncode, proc.stdout

    def observe(self, what: str, checks: list[tuple[str, bool]]) -> None:
        """A step with no command of its own: watching the agent."""
        self._show(Step(len(self.steps) + 1, what, None, "", checks))

    def _show(self, step: Step) -> None:
        self.steps.append(step)
        agent_lines = self.agent.new_lines() if self.agent else []
        if self.as_json:
            self.emit({"event": "step", "ts_ms": time.time_ns() // 1_000_000, "n": step.n, "command": step.command,
                       "exit": step.exit, "ok": step.ok, "output": step.output, "agent": agent_lines,
                       "checks": [{"check": name, "ok": ok} for name, ok in step.checks]})
            return
        self.show(f"$ {step.command}" if step.exit is not None else f"# {step.command}")
        for line in step.output.splitlines():
            self.show(f"  {line}")
        for line in agent_lines:
            self.show(f"  agent │ {line}")
        for name, ok in step.checks:
            self.show(f"  {'✓' if ok else '✗'} {name}")
        self.show("")

    def section(self, title: str) -> None:
        if not self.as_json:
            self.show(f"== {title} ==")

    # --- the tour -----------------------------------------------------------------------------------

    def run(self) -> tuple[int, int]:
        try:
            self.agent = AgentWatch(self.project, self.env, self.turn_seconds)
            started = self.watching.wait(lambda e: e["event"] == "started", 20)
            if not started:
                self.observe("start the reference agent", [("the agent started", False)])
                return self.finish()
            self.session = started[0]["session"]
            self.sessions()
            self.inbox()
            self.callbacks()
            self.cron()
            self.stop()
        except Exception as error:  # noqa: BLE001 - a demo step that crashed is a failed check
            self.observe(f"demo stopped early: {error.__class__.__name__}: {error}",
                         [("the demo ran to the end", False)])
        finally:
            if self.agent and self.watching.proc.poll() is None:
                self.watching.proc.kill()
                self.watching.proc.wait()
        return self.finish()

    def sessions(self) -> None:
        self.section("Sessions")
        self.sxctl("session", "which", check=lambda code, out: [
            ("the agent's session is picked", code == 0 and out.strip() == self.session)])
        self.sxctl("session", "list", check=lambda code, out: [
            ("it is live", code == 0 and any(line.split()[:2] == [self.session, "live"] for line in out.splitlines()))])
        self.env["SXCTL_SESSION"] = self.session  # the rest of the tour pins it, as a script would
        if not self.as_json:
            self.show(f"# the rest of the tour pins the session: export SXCTL_SESSION={self.session}\n")

    def inbox(self) -> None:
        self.section("Inbox")
        self.sxctl("inbox", "send", "hello", "--wait", "10", check=lambda code, out: [
            ("the message is consumed", code == 0 and out.rstrip().endswith(": consumed"))])
        self.watching.wait_idle()
        self.sxctl("inbox", "send", "a long task", "--no-wait", agent_wait=lambda: [
            ("the agent is busy with it", bool(self.watching.wait(
                lambda e: e["event"] == "turn_start" and e["text"] == "a long task", 10)))])
        # both sent at once, checked after: each send is a process start, and on a loaded machine two
        # of them, one waited for in between, can outlast the turn they are meant to meet
        self.sxctl("inbox", "send", "--mode", "interrupt", "look at this first", "--no-wait")
        self.sxctl("inbox", "send", "~and then this", "--no-wait", agent_wait=lambda: [
            ("[Interrupt] while busy", bool(self.watching.wait(
                lambda e: e["event"] == "inbox" and e["action"] == "interrupt", 10))),
            ("[Queued 1] while busy", bool(self.watching.wait(
                lambda e: e["event"] == "inbox" and e["action"] == "queued" and e["count"] == 1, 10))),
            ("[Sending queued message(s)] when the turn ends", bool(self.watching.wait(
                lambda e: e["event"] == "queue_flush", 15)))])
        self.watching.wait_idle()
        first: dict = {}

        def first_key(code: int, out: str) -> list[tuple[str, bool]]:
            first.update(json.loads(out) if code == 0 else {})
            return [("written once", code == 0 and first.get("duplicate") is False)]

        def second_key(code: int, out: str) -> list[tuple[str, bool]]:
            doc = json.loads(out) if code == 0 else {}
            return [("the same stem comes back, duplicate: true",
                     doc.get("stem") == first.get("stem") and doc.get("duplicate") is True)]

        self.sxctl("inbox", "send", "deploy 42 finished", "--key", "deploy-42", "--no-wait", "--json", check=first_key)
        self.sxctl("inbox", "send", "deploy 42 finished", "--key", "deploy-42", "--no-wait", "--json",
                   check=second_key)
        idle = time.strftime("%Y_%m_%d") + "_idle_demo"
        (self.project / ".scorpiox" / "sessions" / idle).mkdir(mode=0o700)
        sent: dict = {}

        def idle_send(code: int, out: str) -> list[tuple[str, bool]]:
            sent.update(json.loads(out) if code == 0 else {})
            return [("written to a session nobody reads", code == 0 and sent.get("state") == "pending")]

        self.sxctl("--session", idle, "inbox", "send", "nobody will read this", "--json", check=idle_send)
        self.sxctl("--session", idle, "inbox", "retract", sent.get("stem", "-"), "--json", check=lambda code, out: [
            ("withdrawn: state retracted", code == 0 and json.loads(out).get("state") == "retracted")])
        self.lifetimes(idle)
        consumed = self.watching.wait(lambda e: e["event"] == "turn_start" and e["text"] == "hello", 1)
        stem = consumed[0]["ref"] if consumed else "-"
        self.sxctl("inbox", "retract", stem, check=lambda code, out: [
            ("retracting a consumed message exits 7", code == 7)])

    def lifetimes(self, idle: str) -> None:
        """A message that goes stale is withdrawn; one not read in time is reported."""
        sent: dict = {}

        def remember(what: str, key: str, label: str) -> Callable[[int, str], list[tuple[str, bool]]]:
            def check(code: int, out: str) -> list[tuple[str, bool]]:
                sent[what] = json.loads(out) if code == 0 else {}
                return [(f"written with its {label}", sent[what].get(key) is not None)]
            return check

        self.sxctl("--session", idle, "inbox", "send", "standup notes", "--read-within", "0.3s", "--no-wait", "--json",
                   check=remember("late", "read_by_ms", "read deadline"))
        self.sxctl("--session", idle, "inbox", "send", "the build is red: look", "--expires", "1.5s", "--no-wait",
                   "--json", check=remember("stale", "expires_ms", "expiry"))
        self.sxctl("--session", idle, "inbox", "wait", sent["stale"].get("stem", "-"), "--timeout", "10",
                   check=lambda code, out: [("unread at its expiry: withdrawn, exit 12", code == 12)])

        self.sxctl("doctor", "--strict", "-q", check=lambda code, out: [
            ("the missed deadline and the expiry fail doctor --strict (exit 9)",
             code == 9 and "not read within their --read-within" in out and "expired unread" in out)])
        self.sxctl("--session", idle, "inbox", "list", "--retracted", check=lambda code, out: [
            ("listed as expired", "expired" in out), ("and the late one as overdue", "overdue" in out)])
        self.sxctl("--session", idle, "inbox", "retract", sent["late"].get("stem", "-"), check=lambda code, out: [
            ("withdrawn by hand", code == 0)])

    def callbacks(self) -> None:
        self.section("Callbacks")
        self.watching.wait_idle()
        self.sxctl("callbacks", "set", "timer ping", "--every", "2", "--repeat", "2", check=lambda code, out: [
            ("the tool's own string", out.startswith("Callback scheduled: fires every 2s, repeats 2 times."))])
        self.sxctl("callbacks", "list", check=lambda code, out: [
            ("the documented list format", out.startswith("Active callbacks (1/8):\n  [0] \"timer ping\" - fires in "))
        ], agent_wait=lambda: [])
        fired = self.watching.wait(lambda e: e["event"] == "callback_fired", 12, count=2)
        self.observe("the timer fires twice, then retires", [
            ("[Callback] Timer fired, twice", len(fired) >= 2),
            ("retired after the last fire", bool(fired) and fired[-1].get("retired") is True)])
        self.watching.wait_idle()
        self.sxctl("inbox", "send", "a long turn", "--no-wait", agent_wait=lambda: [
            ("busy", bool(self.watching.wait(
                lambda e: e["event"] == "turn_start" and e["text"] == "a long turn", 10)))])
        self.sxctl("callbacks", "set", "due mid-turn", "--every", "2", "--repeat", "1", "--first-in", "0",
                   agent_wait=lambda: [
                       ("[Callback] Deferred 5s — agent busy", bool(self.watching.wait(
                           lambda e: e["event"] == "callback_deferred", 10))),
                       ("re-based when the turn ends", bool(self.watching.wait(
                           lambda e: e["event"] == "callbacks_rebased", 10)))])
        self.watching.wait(lambda e: e["event"] == "callback_fired", 10, count=3)  # it fires after the re-base
        self.sxctl("callbacks", "set", "clean up /tmp", "--every", "1h", "--repeat", "3", "-q")
        self.sxctl("callbacks", "pause", check=lambda code, out: [("paused", out.startswith("Callbacks paused."))])
        self.sxctl("callbacks", "next", "-n", "3", check=lambda code, out: [
            ("the preview says PAUSED", "PAUSED" in out)])
        self.sxctl("callbacks", "resume", check=lambda code, out: [("resumed", out.startswith("Callbacks resumed."))])
        self.sxctl("callbacks", "cancel-all", check=lambda code, out: [
            ("cancelled", code == 0 and out.startswith("Cancelled "))])

    def cron(self) -> None:
        self.section("Cron")
        self.watching.wait_idle()
        self.sxctl("cron", "add", "ping", "--in", "1", "--payload", "heartbeat-event", "--text", "cron ping",
                   check=lambda code, out: [("added", code == 0)])
        self.sxctl("cron", "next", check=lambda code, out: [("ping is next", "ping" in out)])
        time.sleep(1.2)
        self.sxctl("cron", "tick", check=lambda code, out: [("dispatched", code == 0 and "dispatched" in out)],
                   agent_wait=lambda: [("the agent consumes it", bool(self.watching.wait(
                       lambda e: e["event"] == "turn_start" and e["text"] == "cron ping", 10)))])
        self.sxctl("cron", "runs", "ping", check=lambda code, out: [("the run is recorded", "dispatched" in out)])
        self.sxctl("cron", "add", "crash", "--in", "1", "--payload", "heartbeat-event", "--text", "lost in a crash",
                   "-q")
        time.sleep(1.2)
        self.sxctl("cron", "tick", "--fault-inject", "after-start", check=lambda code, out: [
            ("the pass dies mid-way (test hook)", code == 99)])
        self.sxctl("cron", "tick", "--json", check=lambda code, out: [
            ("the next pass reports ownerLostAfterStart: 1",
             code == 0 and json.loads(out)["reconciled"]["ownerLostAfterStart"] == 1)])

        def unknown(code: int, out: str) -> list[tuple[str, bool]]:
            runs = json.loads(out).get("runs", []) if code == 0 else []
            return [("the run is unknown, never replayed", bool(runs) and runs[0]["status"] == "unknown"),
                    ("with its inbox evidence", bool(runs) and "evidence" in runs[0])]

        self.sxctl("cron", "runs", "crash", "--evidence", "--json", check=unknown)

    def stop(self) -> None:
        self.section("Stop")
        self.watching.proc.send_signal(signal.SIGTERM)
        stopped = self.watching.wait(lambda e: e["event"] == "stopped", 20)
        self.observe("SIGTERM to the agent", [("stopped arrives", bool(stopped))])
        self.watching.proc.wait(timeout=30)

    def finish(self) -> tuple[int, int]:
        """(checks passed, checks failed)."""
        passed = sum(1 for step in self.steps for _, ok in step.checks if ok)
        failed = sum(1 for step in self.steps for _, ok in step.checks if not ok)
        return passed, failed


BRIEF_KEYS = ("stem", "state", "consumed", "duplicate", "reconciled", "status", "evidence")


def _brief(stdout: str) -> str:
    """A JSON document shown with the keys the step is about (the full document is long)."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return stdout
    if not isinstance(doc, dict):
        return stdout
    if doc.get("runs"):
        doc = {**doc, **{k: doc["runs"][0][k] for k in ("status", "evidence") if k in doc["runs"][0]}}
    shown = {k: doc[k] for k in BRIEF_KEYS if k in doc}
    return json.dumps(shown or doc, ensure_ascii=False) + " …\n"


def _quote(arg: str) -> str:
    return shlex.quote(arg)

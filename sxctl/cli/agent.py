"""`sxctl agent run`: the built-in reference agent, rendered as a transcript or JSON Lines."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import click

from ..errors import NotFoundError
from .output import Group, emit_json, say, settings

TRANSCRIPT = {
    "started": lambda e: f"[Agent] session {e['session']} ({e['session_dir']}), pid {e['pid']}",
    "turn_start": lambda e: f"[turn {e['turn']}] ({e['source']} {e['ref']}, {e['mode']}) {e['text']}"
                            + (f" [image: {e['image']}]" if e.get("image") else ""),
    "turn_end": lambda e: f"[turn {e['turn']}] done in {e['duration_ms'] / 1000:.1f}s"
                          + (f" (exit {e['exit_code']})" if e.get("exit_code") is not None else ""),
    "interrupt_delivered": lambda e: f"[Interrupt delivered] {e['text']}",
    "queue_flush": lambda e: "[Sending queued message(s)]",
    "callback_fired": lambda e: "[Callback] Timer fired",
    "callback_deferred": lambda e: "[Callback] Deferred 5s — agent busy",
    "callbacks_rebased": lambda e: f"[Callbacks] re-based slot(s) {', '.join(map(str, e['slots']))}",
    "callbacks_adopted": lambda e: f"[Callbacks] adopted rev {e['rev']}",
    "stopping": lambda e: f"[Agent] stopping ({e['signal']})",
    "stopped": lambda e: f"[Agent] stopped after {e['turns']} turn(s); {e['dropped']} note(s) dropped",
}
INBOX = {
    "interrupt": lambda e: f"[Interrupt] {e['text']}",
    "queued": lambda e: f"[Queued {e['count']}] {e['text']}",
    "invalid": lambda e: f"[Inbox] skipped invalid {e['stem']}: {e['reason']}",
}


def renderer(as_json: bool):
    """A thread-safe event printer (turns run on a worker thread): JSON Lines or the transcript."""
    lock = threading.Lock()

    def render(event: dict) -> None:
        with lock:
            if as_json:
                emit_json(event)
                return
            kind = event["event"]
            if kind == "inbox":
                line = INBOX.get(event["action"])
                if line:
                    say(line(event))
            elif kind == "warning":
                say(f"sxctl: warning: {event['message']}", err=True)
            elif kind == "dropped":
                say(f"[Dropped] {event['text']}", err=True)
            elif kind in TRANSCRIPT:
                say(TRANSCRIPT[kind](event))
            sys.stdout.flush()

    return render


@click.group("agent", cls=Group)
def agent() -> None:
    """A small built-in agent that consumes the inbox and fires timers, for demos, tests and CI.

    \b
    Example:
      sxctl agent run --init --exec 'llm -m gpt-4o-mini'
    """


@agent.command("run")
@click.option("--init", is_flag=True, help="Create ./.scorpiox/ if no project is found.")
@click.option("--exec", "exec_cmd", metavar="CMD", help="Run CMD for each turn (turn text on stdin).")
@click.option("--turn-seconds", type=click.FloatRange(0), default=1.0, show_default=True,
              help="How long a default turn keeps the agent busy.")
@click.option("--poll-ms", type=click.IntRange(10), default=200, show_default=True)
@click.option("--idle-exit", "idle_exit", type=click.FloatRange(0), metavar="SECONDS",
              help="Stop after this long idle with nothing pending or due.")
@click.option("--max-turns", type=click.IntRange(1), help="Stop after N turns.")
@click.option("--model", default="sxctl-reference", show_default=True)
@click.option("--force", is_flag=True, help="Adopt a session whose stats.json looks live.")
def run(init, exec_cmd, turn_seconds, poll_ms, idle_exit, max_turns, model, force) -> None:
    """Run the reference agent in a session: inbox turns, interrupts, queue, timers, stats.json.

    \b
    Examples:
      sxctl agent run --init --json
      sxctl --session 2026_09_21_quiet_euler agent run --exec 'cat >> turns.log' --idle-exit 30
    """
    from ..agent.loop import AgentOptions, ReferenceAgent
    from ..project import find_project

    s = settings()
    try:
        project = find_project(s.project, session_given=bool(s.session))
    except NotFoundError:
        if not init:
            raise
        project = Path(os.path.realpath(s.project or os.getcwd()))
    options = AgentOptions(project=project, session_id=s.session or os.environ.get("SXCTL_SESSION") or None,
                           exec_cmd=exec_cmd, turn_seconds=turn_seconds, poll_ms=poll_ms, idle_exit_s=idle_exit,
                           max_turns=max_turns, model=model, force=force)
    reference = ReferenceAgent(options, renderer(s.json), clock=s.clock)

    def on_signal(signum, frame) -> None:
        if reference.stopping.is_set() and signum == signal.SIGINT:
            os._exit(130)
        reference.request_stop(signal.Signals(signum).name)

    # before `started` is announced: a stop asked for right after it must be a clean one
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    reference.start()
    reference.run(capture_output=s.json)



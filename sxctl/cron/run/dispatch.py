"""Dispatching one claimed occurrence (spec runner.md §5): an inbox message for heartbeat events
and agent turns, `SXCTL_DELIVER_CMD` for deliveries, wake gates run with node (failing open).

Every function returns the terminal *outcome object*; nothing here writes the store or ledger.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...errors import ErrorCode, ExitStatus, SxctlError, UsageError
from ...inbox.message import MAX_MESSAGE_BYTES, InboxMessage
from ...inbox.request import SendRequest
from ...inbox.sending import send
from ...project import Session, check_session_id, resolve_target_session
from ...report import Reporter
from ..store.targets import INBOX_CHANNEL, holds_project, linked_through, run_target_project
from .lifetime_sweep import run_lifetime

WAKE_GATE_OUTPUT_CAP = 1024 * 1024
WAKE_GATE_CONTEXT_CHARS = 4000


def pre_dispatch_failure(stage: str, error_kind: str) -> dict[str, Any]:
    return {"kind": "pre_dispatch_failure", "stage": stage, "errorKind": error_kind}


#: what a target project refused as it is (not found; a symbolic link or a file that is not
#: what it should be): the run's precondition failed, nothing inside sxctl did
_TARGET_REFUSED = (ExitStatus.NOT_FOUND, ExitStatus.INVALID_DATA)


class DispatchFailure(Exception):
    """Dispatch could not start or failed before anything was delivered."""

    def __init__(self, stage: str, error_kind: str, message: str) -> None:
        super().__init__(message)
        self.outcome = pre_dispatch_failure(stage, error_kind)


@dataclass
class Occurrence:
    """What dispatch needs to know about the claimed run."""

    job: dict[str, Any]
    execution_id: str
    scheduled_for_ms: int
    trigger: str
    note: str | None = None  # a last line for the message (what a catch-up run stands for)
    policy: dict[str, Any] = field(default_factory=dict)  # the job's policy entry (its messages' lifetime)


# --- targets -------------------------------------------------------------------------------------

def resolve_target(job: dict[str, Any], default_project: Path, default_to: str,
                   clock: Clock, report: Reporter, *, workspace: Path) -> Session:
    """The session that receives the message, resolved now (`live` = freshest live session) in
    the job's target project (`run_target_project`: its own target resolved against `workspace`,
    else `default_project` with `default_to`)."""
    target = job.get("deliveryTarget")
    if target is None:
        conversation = default_to
    else:
        endpoint = target["destinationEndpoint"]
        if endpoint["channelType"] != INBOX_CHANNEL:
            raise DispatchFailure("executor_not_bound", "precondition",
                                  f"channel {endpoint['channelType']!r} is not a SCORPIOX inbox")
        conversation = endpoint["conversationId"]
    project = run_target_project(job, default_project, workspace=workspace)
    link = None if target is None else linked_through(
        target["destinationEndpoint"]["channelInstanceId"], project, workspace)
    if link is not None:
        raise DispatchFailure("executor_precondition", "precondition",
                              f"the target {project} goes through the symbolic link {link}: a target stored "
                              "relative to the workspace must be a folder below it (`sxctl doctor` names the fix)")
    if not holds_project(project):
        where = "" if target is None else f" (stored as {target['destinationEndpoint']['channelInstanceId']!r}, " \
            f"resolved against the workspace {workspace}; `sxctl doctor` names the fix)"
        raise DispatchFailure("executor_precondition", "precondition", f"{project} has no .scorpiox/ folder{where}")
    try:
        if conversation != "live":
            check_session_id(conversation)
        session = resolve_target_session(project, conversation, clock=clock)
    except SxctlError as error:
        if not isinstance(error, UsageError) and error.exit_code not in _TARGET_REFUSED:
            raise
        raise DispatchFailure("executor_precondition", "precondition", error.message) from None
    if session.state != "live":
        report.warn(f"{job['name']}: session {session.id} is {session.state}; the message will wait there")
    return session


# --- inbox messages --------------------------------------------------------------------------------

def send_to_inbox(session: Session, occurrence: Occurrence, text: str, mode: str, clock: Clock,
                  report: Reporter, wake_gate: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the message (key = execution id) and return the `inbox_dispatch` outcome."""
    if occurrence.note:
        text = f"{text}\n\n{occurrence.note}"
    try:
        request = SendRequest(text, mode=mode, key=occurrence.execution_id, no_wait=True, lifetime=run_lifetime(
            occurrence.policy, occurrence.job["id"], occurrence.execution_id, clock.now_ms()))
    except UsageError:
        raise DispatchFailure("executor_invalid_input", "validation", "the message is too large") from None
    try:
        result = send(session, request, clock=clock, report=report)
    except OSError as error:
        kind = "resource" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "internal"
        raise DispatchFailure("dispatch_rejected", kind, str(error)) from None
    except SxctlError as error:
        if error.code == ErrorCode.INTERRUPTED:  # Ctrl-C or SIGTERM while it wrote: the message is there,
            raise  # so the run is no failure: the pass ends (exit 130, naming it), the next settles it as unknown
        if error.exit_code in _TARGET_REFUSED:  # the target as it is: a symbolic link, a folder gone, …
            raise DispatchFailure("executor_precondition", "precondition", error.message) from None
        raise DispatchFailure("dispatch_rejected", "internal", error.message) from None
    outcome: dict[str, Any] = {"kind": "inbox_dispatch", "sessionId": session.id, "stem": result.stem, "mode": mode}
    if wake_gate is not None:
        outcome["wakeGate"] = wake_gate
    return outcome


def dry_run_failure(job: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """What a dry run says of a run the real pass fails before it starts (`reason`): a delivery
    job with no SXCTL_DELIVER_CMD (a one-shot's only run would fail for good). Empty: none."""
    if job["payload"]["kind"] == "delivery" and not environ.get("SXCTL_DELIVER_CMD"):
        return {"reason": "but fails precondition: SXCTL_DELIVER_CMD is not set here"}
    return {}


def turn_text(message: str, context: str | None) -> str:
    """The agent turn's text plus the wake-gate context, truncated first when over the limit."""
    if not context:
        return message
    text = f"{message}\n\n[wake-gate context]\n{context}"
    while len(InboxMessage(text, "queue").encode()) > MAX_MESSAGE_BYTES and context:
        context = context[len(context) // 8 + 1:]
        text = f"{message}\n\n[wake-gate context]\n{context}" if context else message
    return text


# --- delivery ----------------------------------------------------------------------------------------

def run_delivery(text: str, occurrence: Occurrence, target: dict[str, str], *, environ: Mapping[str, str],
                 timeout_s: float, clock: Clock) -> dict[str, Any]:
    """Deliver through `SXCTL_DELIVER_CMD`; the `delivery` outcome object (runner.md §5)."""
    command = environ.get("SXCTL_DELIVER_CMD")
    if not command:
        raise DispatchFailure("executor_not_bound", "precondition", "SXCTL_DELIVER_CMD is not set")
    job = occurrence.job
    env = dict(environ)
    env.update({
        "SXCTL_JOB_ID": job["id"], "SXCTL_JOB_NAME": job["name"], "SXCTL_EXECUTION_ID": occurrence.execution_id,
        "SXCTL_SCHEDULED_FOR_MS": str(occurrence.scheduled_for_ms), "SXCTL_TRIGGER": occurrence.trigger,
        "SXCTL_TARGET_PROJECT": target.get("project", ""), "SXCTL_TARGET_CONVERSATION": target.get("conversation", ""),
        "SXCTL_TARGET_SESSION": target.get("session", ""),
    })
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    except (OSError, ValueError) as error:  # ValueError: a NUL in a value the store gave (a name, a target)
        raise DispatchFailure("executor_precondition", "precondition", f"cannot run SXCTL_DELIVER_CMD: {error}") \
            from None
    try:
        out, _ = proc.communicate(text.encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _terminate_group(proc)
        return {"status": "unknown", "errorKind": "timeout", "deliveredChunks": 0, "failedChunks": 1,
                "ambiguousChunks": 1, "settledAtMs": clock.now_ms()}
    if proc.returncode != 0:
        return {"status": "rejected", "errorKind": "platform", "deliveredChunks": 0, "failedChunks": 1,
                "settledAtMs": clock.now_ms()}
    accepted: dict[str, Any] = {"status": "accepted", "deliveredChunks": 1, "settledAtMs": clock.now_ms()}
    first = out.decode("utf-8", "replace").split("\n", 1)[0].strip()
    if first and len(first) <= 512:
        accepted["lastMessageId"] = first
    return accepted


def _terminate_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's process group, SIGKILL 5 s later if it is still there."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


# --- wake gates ------------------------------------------------------------------------------------

@dataclass
class WakeGateResult:
    """What one run of a job's wake gate decided: wake or not, comis's `wakeGate` outcome, and the
    context or delivery text its verdict carried."""

    wake: bool
    outcome: dict[str, Any]  # the wakeGate outcome shape
    context: str | None = None
    deliver: str | None = None
    duration_ms: int = 0


def _tail(text: str) -> str:
    return text[-WAKE_GATE_CONTEXT_CHARS:]


def verdict(stdout: str) -> tuple[bool, str | None, str | None]:
    """comis's wake-gate verdict on the last non-empty stdout line: (wake, context, deliver)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return True, None, None
    last = lines[-1].strip()
    try:
        parsed = json.loads(last)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("wake"), bool):
        context = parsed.get("context") if isinstance(parsed.get("context"), str) else None
        deliver = parsed.get("deliver") if isinstance(parsed.get("deliver"), str) else None
        return parsed["wake"], context, deliver
    if last.upper() in ("HEARTBEAT_OK", "NO_REPLY"):
        return False, None, None
    if last == "[SILENT]" or last.startswith("[SILENT] "):
        return False, None, last[len("[SILENT]"):].strip() or None
    return True, _tail(stdout), None


def run_wake_gate(gate: dict[str, Any], occurrence: Occurrence, *, environ: Mapping[str, str],
                  disabled: bool, report: Reporter) -> WakeGateResult:
    """Run the gate with node in a fresh 0700 folder; any failure wakes (fails open)."""
    if disabled:
        return WakeGateResult(True, {"status": "failed_open", "durationMs": 0, "toolCalls": 0, "errorKind": "config"})
    node = shutil.which("node", path=environ.get("PATH"))
    if node is None:
        report.warn(f"{occurrence.job['name']}: node is not installed; the wake gate fails open")
        return WakeGateResult(True, {"status": "failed_open", "durationMs": 0, "toolCalls": 0,
                                 "errorKind": "precondition"})
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sxctl-gate-") as folder:
        os.chmod(folder, 0o700)
        name = "gate.mts" if gate["language"] == "ts" else "gate.mjs"
        (Path(folder) / name).write_text(gate["script"], encoding="utf-8")
        argv = [node, *(["--experimental-strip-types"] if gate["language"] == "ts" else []), name]
        env = {k: v for k, v in environ.items() if k in ("PATH", "HOME")}
        env.update(SXCTL_JOB_NAME=occurrence.job["name"], SXCTL_EXECUTION_ID=occurrence.execution_id)
        failure, stdout = _run_capped(argv, folder, env, gate["timeoutSeconds"], report)
    duration = round((time.monotonic() - started) * 1000)
    if failure is not None:
        outcome = {"status": "failed_open", "durationMs": duration, "toolCalls": 0, "errorKind": failure}
        return WakeGateResult(True, outcome, _tail(stdout) or None, duration_ms=duration)
    wake, context, deliver = verdict(stdout)
    return WakeGateResult(wake, {"status": "woke", "durationMs": duration, "toolCalls": 0}, context, deliver, duration)


def _run_capped(argv: list[str], cwd: str, env: dict[str, str], timeout_s: int,
                report: Reporter) -> tuple[str | None, str]:
    """(failure errorKind or None, stdout) for one gate run: timeout, overflow, non-zero exit."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _terminate_group(proc)
        out, err = proc.communicate()
        return "timeout", out[:WAKE_GATE_OUTPUT_CAP].decode("utf-8", "replace")
    if err:
        report.detail(f"wake gate stderr: {err.decode('utf-8', 'replace').strip()[:2000]}")
    if len(out) > WAKE_GATE_OUTPUT_CAP:
        return "resource", out[:WAKE_GATE_OUTPUT_CAP].decode("utf-8", "replace")
    text = out.decode("utf-8", "replace")
    return ("internal" if proc.returncode != 0 else None), text


# --- one occurrence, by its payload kind -----------------------------------------------------------

@dataclass
class Dispatcher:
    """How a pass dispatches: where a job without a target sends (`project`, `to`), the workspace
    targets are relative to, and the pass's turn mode, delivery timeout and `--no-gates`."""

    project: Path
    to: str
    workspace: Path
    turn_mode: str
    deliver_timeout: float
    no_gates: bool
    environ: Mapping[str, str]
    clock: Clock
    report: Reporter
    #: why a run failed before anything was delivered, by execution id (the run line's reason;
    #: the ledger keeps only the stage and error kind: `failure_reason`)
    reasons: dict[str, str] = field(default_factory=dict)

    def dispatch(self, job: dict[str, Any], occurrence: Occurrence) -> dict[str, Any]:
        """The occurrence's terminal outcome, by the job's payload kind; a failure before anything
        was delivered is its `pre_dispatch_failure` outcome, its reason kept for the run's line."""
        try:
            kind = job["payload"]["kind"]
            if kind == "delivery":
                target = job["deliveryTarget"]["destinationEndpoint"]
                delivery = run_delivery(job["payload"]["text"], occurrence,
                                        {"project": self._target_project(job),
                                         "conversation": target["conversationId"], "session": ""},
                                        environ=self.environ, timeout_s=self.deliver_timeout,
                                        clock=self.clock)
                return {"kind": "delivery_only", "delivery": delivery}
            session = resolve_target(job, self.project, self.to, self.clock, self.report,
                                     workspace=self.workspace)
            if kind == "heartbeat_event":
                mode = "auto" if job["payload"]["wakeMode"] == "now" else "queue"
                return send_to_inbox(session, occurrence, job["payload"]["text"], mode, self.clock, self.report)
            return self._agent_turn(job, occurrence, session)
        except DispatchFailure as failure:
            self.reasons[occurrence.execution_id] = str(failure)
            return failure.outcome

    def _target_project(self, job: dict[str, Any]) -> str:
        """SXCTL_TARGET_PROJECT for a delivery: the job's target resolved against the workspace (an
        absolute path, wherever the workspace is now; for another channel, its instance id)."""
        endpoint = job["deliveryTarget"]["destinationEndpoint"]
        if endpoint["channelType"] != INBOX_CHANNEL:
            return str(endpoint["channelInstanceId"])
        return str(run_target_project(job, self.project, workspace=self.workspace))

    def _agent_turn(self, job: dict[str, Any], occurrence: Occurrence, session) -> dict[str, Any]:
        gate = job.get("wakeGate")
        if gate is None:
            return send_to_inbox(session, occurrence, job["payload"]["message"], self.turn_mode, self.clock,
                                 self.report)
        result = run_wake_gate(gate, occurrence, environ=self.environ, disabled=self.no_gates,
                               report=self.report)
        if result.wake:
            return send_to_inbox(session, occurrence, turn_text(job["payload"]["message"], result.context),
                                 self.turn_mode, self.clock, self.report, wake_gate=result.outcome)
        mode = job.get("continuationMode", "none")
        continuation = ({"mode": "none", "status": "not_requested"} if mode == "none"
                        else {"mode": mode, "status": "skipped", "reason": "execution_not_completed"})
        delivery: dict[str, Any] = {"status": "not_requested"}
        if result.deliver is not None:
            if self.environ.get("SXCTL_DELIVER_CMD"):
                endpoint = (job.get("deliveryTarget") or {}).get("destinationEndpoint", {})
                delivery = run_delivery(result.deliver, occurrence,
                                        {"project": self._target_project(job) if endpoint else "",
                                         "conversation": endpoint.get("conversationId", ""), "session": session.id},
                                        environ=self.environ, timeout_s=self.deliver_timeout,
                                        clock=self.clock)
            else:
                delivery = {"status": "pre_send_failed", "reason": "target_precondition", "errorKind": "precondition"}
        return {"kind": "wake_gate_skip", "rootRunId": f"root-cron-{occurrence.execution_id}",
                "gateDurationMs": result.duration_ms, "gateToolCalls": 0, "delivery": delivery,
                "continuation": continuation}

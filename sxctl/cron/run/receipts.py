"""Receipts: did the agent read what a run dispatched? A `dispatched` run only says the message
was written; the inbox itself says whether it was read (moved to `done/`), is still pending,
was retracted, or is lost (its session folder is gone and it was never read)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import UsageError
from ...inbox.folder import InboxDir, inbox_dirs
from ...inbox.manage import evidence_for_key
from ...inbox.message import check_stem
from ...inbox.places import follow
from ...project import ProjectLayout, SessionInfo, as_session, check_session_id, list_sessions, session_info
from ...timeparse import format_duration_ms, shown_time
from ..store.targets import holds_project, run_target_project


def names_a_message(session_id: str, stem: str) -> bool:
    """Do the session id and stem a ledger row gives name a message below the project's sessions
    (not `..`, not a path)? The names come from a file: they are checked as a user's are."""
    try:
        check_session_id(session_id)
        check_stem(stem)
    except UsageError:
        return False
    return True


def consumption(project: Path, session_id: str, stem: str, clock: Clock = SYSTEM_CLOCK,
                info: SessionInfo | None = None) -> dict[str, Any]:
    """Where the message `stem` of session `session_id` is now, in the words every view uses:
    `read` (with `readAtMs`, when it was moved to done/), `pending` (with `ageMs`), `retracted`,
    or `lost`. `info`: the session as the caller read it already (the spend attribution)."""
    if not names_a_message(session_id, stem):  # a ledger row is a file: it may name `..` or a path
        return {"state": "lost", "reason": "not_a_message_of_this_project"}
    folder = ProjectLayout(project).sessions / session_id
    if not os.path.isdir(folder) or os.path.islink(folder):
        return {"state": "lost", "reason": "session_gone"}
    session = as_session(info if info is not None else session_info(folder, clock), project, "flag")
    name = f"{stem}.json"
    for inbox in inbox_dirs(session):
        state = inbox.state_of(stem)
        try:
            if state == "consumed":
                receipt = {"state": "read", "readAtMs": os.lstat(inbox.done / name).st_ctime_ns // 1_000_000}
            elif state == "pending":
                age = clock.now_ms() - os.lstat(inbox.path / name).st_mtime_ns // 1_000_000
                receipt = {"state": "pending", "ageMs": max(0, age)}
            elif state == "retracted":
                receipt = {"state": "retracted"}
            else:
                continue
        except FileNotFoundError:  # moved on while we looked: it went forward
            return consumption(project, session_id, stem, clock)
        return with_lifetime(inbox, stem, receipt, clock.now_ms())
    # `inbox forward` moved it into another session: its receipt is there
    for inbox in inbox_dirs(session):
        moved, _, moved_stem, state = follow(session, inbox, stem, "missing")
        if state != "missing":
            return {**consumption(project, moved.id, moved_stem, clock), "forwardedTo": {"session": moved.id,
                                                                                        "stem": moved_stem}}
    return {"state": "lost", "reason": "message_gone"}


def with_lifetime(inbox: InboxDir, stem: str, receipt: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The receipt with its message's lifetime (`expired`, `overdue`, `late`), where one is kept."""
    if not os.path.isdir(inbox.lifetimes):
        return receipt
    from ...inbox.lifetimes import receipt_of

    return receipt_of(inbox, stem, receipt, now_ms)


def run_consumption(run: dict[str, Any], job: dict[str, Any] | None, default_project: Path,
                    clock: Clock = SYSTEM_CLOCK, *, workspace: Path) -> dict[str, Any] | None:
    """A run's receipt, or None for a run that dispatched no inbox message. The message is looked
    for in the job's target project (`run_target_project`, resolved against `workspace`)."""
    outcome = run.get("outcome") or {}
    session_id, stem = outcome.get("sessionId"), outcome.get("stem")
    if outcome.get("kind") != "inbox_dispatch" or not isinstance(session_id, str) or not isinstance(stem, str):
        return None
    return consumption(run_target_project(job, default_project, workspace=workspace), session_id, stem, clock)


def describe_consumption(receipt: dict[str, Any] | None) -> str | None:
    """One cell: `read 14:02`, `pending 3m`, `retracted` (`replaced`: by --overlap replace), `lost`."""
    if receipt is None:
        return None
    state = receipt["state"]
    if state == "read":
        return f"read {shown_time(receipt['readAtMs'])}" + (" (late)" if receipt.get("late") else "")
    if state == "pending":
        return f"pending {format_duration_ms(receipt['ageMs'])}" + (" (overdue)" if receipt.get("overdue") else "")
    if receipt.get("replacedBy"):
        return "replaced"  # retracted by the job's next run (--overlap replace)
    return state


# --- what a run dispatched (the fact every run limit counts) ------------------------------------

#: delivery states in which something may have reached the other side
SENT_DELIVERY = ("accepted", "partial", "unknown")
#: message states that say it reached the inbox (read, unread, or taken back after it arrived)
IN_INBOX = ("pending", "consumed", "retracted")


@dataclass(frozen=True)
class Dispatch:
    """What one execution sent out: an inbox message (`session_id`, `stem`), or — both None — a
    delivery or a comis execution that may have reached someone."""

    session_id: str | None = None
    stem: str | None = None


def execution_dispatch(start: dict[str, Any] | None, outcome: dict[str, Any] | None, job: dict[str, Any] | None,
                       default_project: Path, clock: Clock = SYSTEM_CLOCK,
                       sessions: dict[Path, list] | None = None, *, workspace: Path) -> Dispatch | None:
    """Did the execution that `start` opened dispatch anything? None: provably nothing.

    The rule, from durable facts only: no start row, nothing (the runner writes its start row
    before it dispatches); a terminal outcome says what it sent; an `unknown` run (a pass killed
    after its start row; `outcome` None while it is unsettled) of an inbox kind is a dispatch
    exactly when its message reached the inbox — found through its idempotency key (the
    execution id; the key record is written before the message) — and any other `unknown` run
    counts, since nothing can prove it sent nothing. `sessions` caches the session lists of the
    projects searched; `workspace` is the folder of the store the job's target is relative to."""
    if start is None:
        return None
    kind = outcome["kind"] if outcome is not None else "unsettled"
    if kind == "unsettled":
        if start["workKind"] not in ("agent_turn", "heartbeat_event"):
            return Dispatch()
        return message_by_key(run_target_project(job, default_project, workspace=workspace), start["executionId"],
                               clock, sessions)
    assert outcome is not None
    if kind == "inbox_dispatch":
        session_id, stem = outcome.get("sessionId"), outcome.get("stem")
        return Dispatch(session_id if isinstance(session_id, str) else None, stem if isinstance(stem, str) else None)
    if kind in ("delivery_only", "wake_gate_skip"):
        delivery = outcome.get("delivery")
        return Dispatch() if isinstance(delivery, dict) and delivery.get("status") in SENT_DELIVERY else None
    if kind in ("pre_dispatch_failure", "agent_turn_pre_model_skip"):
        return None
    return Dispatch()  # comis's own executions (agent_turn, internal_action, heartbeat_event) ran


def message_by_key(project: Path, key: str, clock: Clock, sessions: dict[Path, list] | None) -> Dispatch | None:
    if not holds_project(project):
        return None
    cache = sessions if sessions is not None else {}
    if project not in cache:
        cache[project] = list_sessions(project, clock)
    evidence = evidence_for_key(project, cache[project], key)
    if evidence["key_record"] and evidence["state"] in IN_INBOX:
        return Dispatch(evidence["session"], evidence["stem"])
    return None

"""Receipts: did the agent read what a run dispatched? A `dispatched` run only says the message
was written; the inbox itself says whether it was read (moved to `done/`), is still pending,
was retracted, or is lost (its session folder is gone and it was never read)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock


def run_target_project(job: dict[str, Any] | None, default_project: Path) -> Path:
    """The project whose sessions a job's messages go to."""
    target = (job or {}).get("deliveryTarget")
    if target is not None and target["destinationEndpoint"]["channelType"] == "scorpiox-inbox":
        return Path(target["destinationEndpoint"]["channelInstanceId"])
    return default_project


def consumption(project: Path, session_id: str, stem: str, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Where the message `stem` of session `session_id` is now, in the words every view uses:
    `read` (with `readAtMs`, when it was moved to done/), `pending` (with `ageMs`), `retracted`,
    or `lost`."""
    from ..inbox import inbox_dirs
    from ..project import as_session, session_info, sessions_root

    folder = sessions_root(project) / session_id
    if not os.path.isdir(folder) or os.path.islink(folder):
        return {"state": "lost", "reason": "session_gone"}
    session = as_session(session_info(folder, clock), project, "flag")
    name = f"{stem}.json"
    for inbox in inbox_dirs(session):
        state = inbox.state_of(stem)
        try:
            if state == "consumed":
                return {"state": "read", "readAtMs": os.lstat(inbox.done / name).st_ctime_ns // 1_000_000}
            if state == "pending":
                age = clock.now_ms() - os.lstat(inbox.path / name).st_mtime_ns // 1_000_000
                return {"state": "pending", "ageMs": max(0, age)}
        except FileNotFoundError:  # moved on while we looked: it went forward
            return consumption(project, session_id, stem, clock)
        if state == "retracted":
            return {"state": "retracted"}
    return {"state": "lost", "reason": "message_gone"}


def run_consumption(run: dict[str, Any], job: dict[str, Any] | None, default_project: Path,
                    clock: Clock = SYSTEM_CLOCK) -> dict[str, Any] | None:
    """A run's receipt, or None for a run that dispatched no inbox message."""
    outcome = run.get("outcome") or {}
    session_id, stem = outcome.get("sessionId"), outcome.get("stem")
    if outcome.get("kind") != "inbox_dispatch" or not isinstance(session_id, str) or not isinstance(stem, str):
        return None
    from ..project import is_valid_session_id

    if not is_valid_session_id(session_id) or "/" in stem or stem.startswith("."):
        return {"state": "lost", "reason": "not_a_message_of_this_project"}
    return consumption(run_target_project(job, default_project), session_id, stem, clock)


def describe_consumption(receipt: dict[str, Any] | None) -> str | None:
    """One cell: `read 14:02`, `pending 3m`, `retracted`, `lost`."""
    from ..timeparse import format_duration_ms, format_ms

    if receipt is None:
        return None
    state = receipt["state"]
    if state == "read":
        return f"read {format_ms(receipt['readAtMs'], '%Y-%m-%d %H:%M:%S', None)}"
    if state == "pending":
        return f"pending {format_duration_ms(receipt['ageMs'])}"
    return state

"""`inbox forward`: every pending message of the sessions no agent runs in, moved into the live
session (or one named) in the order the agent reads them; one message's move is `move`."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from ..callbacks.table import view_table
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, ErrorCode, NotFoundError, SxctlError, UsageError
from ..project import Session, as_session, list_sessions, resolve_target_session
from ..record import Factory, record
from ..report import Reporter
from .folder import InboxDir, inbox_dirs, message_names, primary_inbox
from .keys import key_index
from .lifetimes import move_verdict
from .message import is_plain_stem
from .move import Moved, Recovered, candidates, forward_lock, is_regular, move_message, recover
from .moves import INTENTS

# --- the command: every stranded message into the live session -------------------------------------

def forward_target(project: Path, to: str, clock: Clock) -> Session:
    """`live` = the freshest live session now (exit 3 when none); anything else = that session."""
    try:
        return resolve_target_session(project, to, clock=clock)
    except NotFoundError as error:
        if to != "live":
            raise
        raise NotFoundError(f"{error.message}: nothing to forward to; start the agent, or name a session "
                            "with --to SESSION", code=ErrorCode.SESSION_NOT_FOUND) from None


def pick_sources(project: Path, target: Session, explicit: list[str] | None, clock: Clock,
                 has_something) -> list[Session]:
    """The sessions to move out of: those named (each must exist, must not be the target and must
    not be live), else every session of the project other than the target that is not live and
    for which `has_something(session)` holds."""
    if explicit:
        chosen = []
        for session_id in dict.fromkeys(explicit):
            source = resolve_target_session(project, session_id, clock=clock)
            if source.id == target.id:
                raise UsageError(f"--from {session_id} is the session to forward to")
            if source.state == "live":
                raise ConflictError(f"session {source.id} is live: its agent reads its own inbox and timers; "
                                    "move only out of a session no agent runs in", code=ErrorCode.AGENT_OWNS_SESSION)
            chosen.append(source)
        return chosen
    return [session for info in list_sessions(project, clock)
            if info.id != target.id and info.state != "live"
            and has_something(session := as_session(info, project, "flag"))]


def has_pending(session: Session) -> bool:
    """Pending messages, or a move out of it that was interrupted."""
    return any(message_names(inbox.path) or message_names(inbox.path / INTENTS) for inbox in inbox_dirs(session))


@record
class ForwardPlan:
    """What `inbox forward` did (or, dry, would do)."""

    target: Session
    sources: list[Session]
    moves: list[Moved]
    recovered: list[Recovered]
    dry_run: bool
    timers: dict[str, int] = Factory(dict)  # type: ignore[assignment]


def forward_pending(project: Path, *, sources: list[str] | None = None, to: str = "live", dry_run: bool = False,
            clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> ForwardPlan:
    """Move every pending message of the source sessions into the target, in the order the agent
    reads them (byte order of names, across every source), one message at a time."""
    report = report or Reporter()
    target = forward_target(project, to, clock)
    if target.state != "live":
        report.warn(f"session {target.id} is {target.state}: no agent reads the forwarded messages until one "
                    "runs there")
    chosen = pick_sources(project, target, sources, clock, has_pending)
    plan = ForwardPlan(target, chosen, [], [], dry_run)
    with contextlib.ExitStack() as locks:
        if not dry_run:
            for source in sorted(chosen, key=lambda s: s.id):
                locks.enter_context(forward_lock(source))
        for source in chosen:
            plan.recovered += recover(source, dry_run=dry_run)
        queue = sorted(((os.fsencode(name), source, inbox) for source in chosen for inbox in inbox_dirs(source)
                        for name in message_names(inbox.path)), key=lambda entry: entry[0])
        indexes: dict[Path, dict[str, list[tuple[Path, dict[str, Any]]]]] = {}
        for encoded, source, inbox in queue:
            name = os.fsdecode(encoded)
            stem = name[: -len(".json")]
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                plan.moves.append(Moved(source.id, inbox.copy, stem.encode("utf-8", "surrogateescape").decode(
                    "utf-8", "backslashreplace"), "invalid_name"))
                continue
            if inbox.path not in indexes:  # after the listing: a record is written before its message
                indexes[inbox.path] = key_index(inbox)
            keys = indexes[inbox.path].get(stem, [])
            if dry_run:
                plan.moves.append(_would_move(source, inbox, stem, target, keys, clock.now_ms()))
            else:
                plan.moves.append(move_message(source, inbox, stem, target, clock=clock, keys=keys))
    for source in chosen:
        try:
            table = view_table(source).winner
        except SxctlError:
            continue
        active = len(table.active_slots()) if table is not None else 0
        if active:
            plan.timers[source.id] = active
    return plan


def _would_move(source: Session, inbox: InboxDir, stem: str, target: Session,
                keys: list[tuple[Path, dict[str, Any]]], now_ms: int) -> Moved:
    """What `move_message` would do now, found without writing anything."""
    if not is_plain_stem(stem):
        return Moved(source.id, inbox.copy, stem, "invalid_name")
    kind = is_regular(inbox.pending_file(stem))
    sidecar = inbox.sidecar_of(inbox.path, stem)
    moved = Moved(source.id, inbox.copy, stem, "would_forward", image=sidecar.suffix[1:] if sidecar else None,
                  keys=[str(body.get("key")) for _, body in keys])
    if kind is None:
        moved.outcome = inbox.state_of(stem)
    elif not kind or (sidecar is not None and not is_regular(sidecar)):
        moved.outcome = "not_regular"
    elif (verdict := move_verdict(inbox, stem, now_ms)) is not None:
        moved.outcome = verdict  # expired: the move would withdraw it instead; a record that lies: it stays
    else:
        new_inbox = primary_inbox(target)
        free = next((c for c in candidates(stem, True) if new_inbox.stem_is_free(c)), None)
        if free is None:
            moved.outcome = "name_taken"
        else:
            moved.to_stem, moved.path = free, new_inbox.pending_file(free)
    return moved


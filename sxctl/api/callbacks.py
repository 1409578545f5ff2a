"""Timer use cases: the agent's 8-slot table `callbacks.json` (spec callbacks.md), written through
the revision protocol; every result is the table as written (or read) plus what changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..callbacks import move, verbs
from ..callbacks.move import has_active_timers
from ..callbacks.protocol import WriteOptions
from ..callbacks.table import (
    CAPACITY,
    MISSING_FILE_WARNING,
    active_ids,
    check_slot_id,
    doc_paused,
    doc_rev,
    doc_slots,
    unpublished_edit,
    view_table,
)

# fires_in and list_preview: how the CLI shows a slot (offered here for it)
from ..callbacks.verbs import (  # noqa: F401
    NO_ACTIVE_CALLBACKS,
    cancelled_text,
    fires_in,
    list_preview,
    list_text,
    preview_fires,
    scheduled_text,
    set_paused,
    updated_text,
)
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import UsageError
from ..inbox.forward import forward_target, pick_sources
from ..project import check_session_id, follow_or_refuse
from ..record import record
from ..report import Reporter
from .scope import find_project, find_session, milliseconds, reporter

if TYPE_CHECKING:
    from ..callbacks.protocol import WriteResult
    from ..callbacks.table import TableView
    from ..project import Session


@record
class TimerTable:
    """The table after a timer command, and the command's own keys (`extra`: the slot set, the
    slots cancelled, the fires previewed …) in the order its JSON document shows them."""

    session: Session
    doc: dict[str, Any]
    path: Path
    exists: bool
    text: str
    now_ms: int
    extra: dict[str, Any]

    @property
    def rev(self) -> int:
        return doc_rev(self.doc)

    @property
    def paused(self) -> bool:
        return doc_paused(self.doc)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, **self.session.to_json(), "file": str(self.path), "file_exists": self.exists,
            "rev": self.rev, "paused": self.paused, "capacity": CAPACITY,
            "active_count": len(active_ids(self.doc)) if self.doc else 0, **self.extra, "text": self.text,
        }


def _slot_json(slot: dict[str, Any], now_ms: int) -> dict[str, Any]:
    fire_at = slot.get("fire_at_ms")
    return {**slot, "fires_in_ms": max(0, fire_at - now_ms) if isinstance(fire_at, int) else None}


def _written(session: Session, result: WriteResult, text: str, action: str, **extra: Any) -> TimerTable:
    return TimerTable(session, result.doc, result.path, True, text, result.doc["updated_ms"],
                      {"action": action, "verified": result.verified, **extra})


def _read(session, project, clock: Clock, report: Reporter | None) -> tuple[Session, TableView, dict[str, Any]]:
    """The session and its table as it stands (a missing file is a warning and an empty table)."""
    chosen = find_session(session, project=project, clock=clock, report=report)
    view = view_table(chosen)
    if not view.exists:
        reporter(report).warn(MISSING_FILE_WARNING.format(id=chosen.id))
    return chosen, view, view.winner.doc if view.winner else {}


def _unpublished(chosen: Session, view: TableView, report: Reporter | None) -> dict[str, Any] | None:
    """A change to the live agent's table that it ignores (`table.unpublished_edit`): warned, with
    its fix, and given in the JSON document (`unpublished_edit`, null when there is none)."""
    edit = unpublished_edit(chosen, view)
    if edit is None:
        return None
    reporter(report).warn(f"{edit.message}; fix: {edit.fix.split('   #')[0]}")
    return edit.to_json()


def _options(expect_rev: int | None, verify: float | None, clock: Clock, report: Reporter | None) -> WriteOptions:
    return WriteOptions(expect_rev, verify, clock, reporter(report))


def list_timers(
    *,
    include_inactive: bool = False,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """The active timers (with `include_inactive`, cancelled and retired slots too), as the
    agent's /callbacks lists them; `extra["slots"]` carries each slot with `fires_in_ms`."""
    chosen, view, doc = _read(session, project, clock, report)
    now = clock.now_ms()
    stats_count = ((chosen.stats or {}).get("callbacks") or {}).get("active_count")
    if isinstance(stats_count, int) and view.exists and stats_count != len(active_ids(doc)):
        reporter(report).note(f"stats.json reports {stats_count} active timers, "
                              f"callbacks.json has {len(active_ids(doc))}")
    slots = doc_slots(doc)
    shown = [slots[i] for i in sorted(slots) if include_inactive or i in active_ids(doc)]
    return TimerTable(chosen, doc, view.primary_path, view.exists, list_text(doc, now, include_inactive), now,
                      {"slots": [_slot_json(s, now) for s in shown],
                       "unpublished_edit": _unpublished(chosen, view, report)})


def set_timer(
    message: str,
    every: float,
    *,
    repeat: int = 20,
    slot: int | None = None,
    replace: bool = False,
    first_in: float | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """Arm one of the agent's 8 timers: `message` every `every` seconds, `repeat` times (-1 =
    forever); `extra["slot"]` is the slot written. `verify` seconds of watching a live agent's
    file for a lost update (None: no watch); `expect_rev` refuses (exit 4) any other revision.
    A pinned session the agent left for a newer live one is refused (exit 4
    `session_superseded`); with `follow`, the timer is set in that one instead."""
    if replace and slot is None:
        raise UsageError("--replace needs --slot N")
    chosen = follow_or_refuse(find_session(session, project=project, clock=clock, report=report), "a timer",
                              follow=follow, clock=clock, report=reporter(report))
    _note_repeat_zero(repeat, report)
    result = verbs.set_timer(chosen, message, milliseconds(every), repeat=repeat, slot_id=slot, replace=replace,
                 first_in_ms=None if first_in is None else milliseconds(first_in),
                 options=_options(expect_rev, verify, clock, report))
    written = result.outcome
    return _written(chosen, result, scheduled_text(written), "set",
                    slot=_slot_json(written, result.doc["updated_ms"]))


def _armed_where_it_fires(chosen: Session, clock: Clock, report: Reporter | None) -> Session:
    """An edit, a resume or a publish makes timers fire: in a pinned session the agent left, they
    never would (the slots there are not the live table's: `callbacks move` carries them over)."""
    return follow_or_refuse(chosen, "a timer", follow=False, clock=clock, report=reporter(report),
                            fix=f"`sxctl callbacks move --from {chosen.id}` carries its timers to the live session")


def _note_repeat_zero(repeat: int | None, report: Reporter | None) -> None:
    """`--repeat 0` is one fire, as the agent's tool stores it: say so before the tool's line
    ("repeats 1 times") surprises."""
    if repeat == 0:
        reporter(report).note("--repeat 0 means one fire (stored as repeat_count 1, as the agent's tool does)")


def edit_timer(
    slot: int,
    *,
    message: str | None = None,
    every: float | None = None,
    repeat: int | None = None,
    first_in: float | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """Change an active timer; a message- or repeat-only edit keeps its next fire time.
    TooLateError (exit 7) if it fired its last time or was cancelled while this wrote; exit 4
    `session_superseded` in a pinned session the agent left for a newer live one."""
    chosen = _armed_where_it_fires(find_session(session, project=project, clock=clock, report=report), clock, report)
    _note_repeat_zero(repeat, report)
    result = verbs.edit_timer(chosen, slot, message=message, delay_ms=None if every is None else milliseconds(every),
                  repeat=repeat, first_in_ms=None if first_in is None else milliseconds(first_in),
                  options=_options(expect_rev, verify, clock, report))
    before, after = result.outcome
    now = result.doc["updated_ms"]
    return _written(chosen, result, updated_text(slot, after, now), "edit", slot=_slot_json(after, now), before=before)


def cancel_timers(
    slot: int | None = None,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """Cancel timer `slot`, or every active timer (None); cancelled slots stay in the file,
    inactive. With nothing active, nothing is written. `extra["cancelled"]` lists the ids."""
    chosen = find_session(session, project=project, clock=clock, report=report)
    if slot is None:
        view = view_table(chosen)
        if not (view.winner and view.winner.active_slots()):
            return TimerTable(chosen, view.winner.doc if view.winner else {}, view.primary_path, view.exists,
                              NO_ACTIVE_CALLBACKS, clock.now_ms(), {"action": "cancel-all", "cancelled": []})
    result = verbs.cancel_timers(chosen, slot, options=_options(expect_rev, verify, clock, report))
    return _written(chosen, result, cancelled_text(result.outcome, single=slot is not None),
                    "cancel" if slot is not None else "cancel-all", cancelled=[i for i, _ in result.outcome])


def pause_timers(
    paused: bool = True,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """Pause every timer (the agent forgets this when it restarts), or with `paused=False`
    resume them, re-basing overdue ones to now + their period (`extra["rebased"]`; exit 4
    `session_superseded` in a pinned session the agent left for a newer live one)."""
    chosen = find_session(session, project=project, clock=clock, report=report)
    if not paused:
        chosen = _armed_where_it_fires(chosen, clock, report)
    result = set_paused(chosen, paused, options=_options(expect_rev, verify, clock, report))
    return _written(chosen, result, "Callbacks paused." if paused else "Callbacks resumed.",
                    "pause" if paused else "resume", rebased=result.outcome)


def publish_timers(
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """Write the table back as it is now, with the next rev, so that the running agent adopts a
    change made to the file without one (a hand edit: `list_timers` warns of it,
    `extra["unpublished_edit"]`). Exit 2, nothing written, when an active slot holds a value the
    agent's tool would refuse; exit 4 `session_superseded` in a pinned session the agent left for
    a newer live one (no agent would adopt it)."""
    chosen = _armed_where_it_fires(find_session(session, project=project, clock=clock, report=report), clock, report)
    result = verbs.publish_table(chosen, options=_options(expect_rev, verify, clock, report))
    return _written(chosen, result, f"Published callbacks.json as rev {result.rev}.", "publish")


def preview_timers(
    *,
    limit: int = 10,
    slot: int | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerTable:
    """The next `limit` fires (of `slot` only, if given), assuming an idle agent and instant
    turns; nothing is written. `extra["fires"]` lists them."""
    if slot is not None:
        check_slot_id(slot)
    chosen, view, doc = _read(session, project, clock, report)
    now = clock.now_ms()
    fires = preview_fires(doc, now, limit, slot)
    text = NO_ACTIVE_CALLBACKS if not fires else f"Next {len(fires)} fire(s), if the agent is idle:"
    return TimerTable(chosen, doc, view.primary_path, view.exists, text, now,
                      {"fires": fires, "unpublished_edit": _unpublished(chosen, view, report)})


@record
class TimerMove:
    """`callbacks move`: the timers moved (or, dry, that would be) into the target session's
    table, and that table afterwards."""

    project: Path
    plan: Any  # sxctl.callbacks.TimerMovePlan
    now_ms: int

    @property
    def target(self) -> Session:
        return self.plan.target

    @property
    def doc(self) -> dict[str, Any]:
        return self.plan.written.doc if self.plan.written is not None else self.plan.target_doc

    @property
    def text(self) -> str:
        moved = sum(1 for row in self.plan.moved if row.action == "moved")
        there = len(self.plan.moved) - moved
        if not self.plan.moved:
            return "No active callbacks to move."
        verb = "Would move" if self.plan.dry_run else "Moved"
        return (f"{verb} {moved} callback{'s' if moved != 1 else ''} into session {self.target.id}"
                + (f"; {there} already there" if there else "") + ".")

    def to_json(self) -> dict[str, Any]:
        written = self.plan.written
        return {
            "ok": True, "project": str(self.project), **self.target.to_json(), "state": self.target.state,
            "dry_run": self.plan.dry_run, "sources": [s.id for s in self.plan.sources],
            "moved": [row.to_json() for row in self.plan.moved], "rev": doc_rev(self.doc),
            "paused": doc_paused(self.doc), "capacity": CAPACITY, "active_count": len(active_ids(self.doc)),
            "verified": written.verified if written is not None else None, "text": self.text,
        }


def move_timers(
    *,
    sources: list[str] | tuple[str, ...] | None = None,
    to: str = "live",
    dry_run: bool = False,
    verify: float | None = 1.0,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> TimerMove:
    """Move the active timers of `sources` — by default every session that is not live — into
    the live session's table (`to`, or a session id): added there first, then cancelled at the
    source, each table under the revision protocol. Exit 4 `slots_full`, with nothing written,
    when they do not all fit in its 8 slots. With `dry_run`, only say what would move."""
    if to != "live":
        check_session_id(to)
    root = find_project(project)
    target = forward_target(root, to, clock)
    if target.state != "live":
        reporter(report).warn(f"session {target.id} is {target.state}: no agent fires the moved timers until one "
                              "runs there")
    chosen = pick_sources(root, target, list(sources) if sources else None, clock, has_active_timers)
    plan = move.move_timers(target, chosen, dry_run=dry_run, options=_options(None, verify, clock, report))
    return TimerMove(root, plan, clock.now_ms())


def active_slot_ids(*, session: str | None = None, project: str | os.PathLike | None = None) -> list[int]:
    """The ids of the slots `callbacks list` shows as active (a legacy slot without `active` counts
    while it has fires left), for shell completion; notes and warnings are dropped."""
    return active_ids(_read(session, project, SYSTEM_CLOCK, Reporter())[2])

"""Moving active timers out of sessions no agent runs in (`callbacks move`), each table written
through the revision protocol: the target's first, then the source's.

A timer is added to the target as a copy of its slot (its message, period, fires left and next
fire time; unknown keys kept) marked `moved_from: {session, slot, rev}`, and only then
deactivated in the source (marked `moved_to`). A run killed between the two writes leaves the
timer active in both tables; the next run finds the mark in the target and only deactivates the
source. A target that already has an active timer with the same message and period (an agent
that carried its timers over itself) gets no second copy.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import faults
from ..errors import ConflictError, ErrorCode, SxctlError
from ..project import Session
from ..record import Factory, record
from ..report import Reporter
from .protocol import WriteOptions, WriteResult, write_table
from .table import CAPACITY, doc_slots, is_active, is_free, new_table_doc, put_slot, view_table


@record
class MovedTimer:
    """One timer `callbacks move` moved (or found already there): its slot before and after."""

    source: str
    slot: int
    to_slot: int | None
    action: str  # moved | already_there (| would_move)
    timer: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "slot": self.slot, "to_slot": self.to_slot, "action": self.action,
                "message": self.timer.get("message"), "delay_ms": self.timer.get("delay_ms"),
                "repeat_count": self.timer.get("repeat_count"), "fire_at_ms": self.timer.get("fire_at_ms")}


@record
class TimerMovePlan:
    """What `callbacks move` does: the timers taken from `sources` into `target`, and what was written."""

    target: Session
    sources: list[Session]
    moved: list[MovedTimer]
    dry_run: bool
    written: WriteResult | None = None
    target_doc: dict[str, Any] = Factory(dict)  # type: ignore[assignment]


class _Full(Exception):
    def __init__(self, needed: int) -> None:
        self.needed = needed


def has_active_timers(session: Session) -> bool:
    try:
        table = view_table(session).winner
    except SxctlError:  # an unreadable table is named by the command that reads it, not here
        return False
    return bool(table and table.active_slots())


def _match(doc: dict[str, Any], source_id: str, slot: dict[str, Any], rev: int) -> int | None:
    """The target slot that already holds this timer: one this move wrote before (its mark), or
    an active one with the same message and period that did not come from this source (two
    identical timers of one session are two timers, and both move)."""
    mark = {"session": source_id, "slot": slot["id"], "rev": rev}
    slots = doc_slots(doc)
    for i, other in sorted(slots.items()):
        if other.get("moved_from") == mark:
            return i
    for i, other in sorted(slots.items()):
        sibling = (other.get("moved_from") or {}).get("session") == source_id  # another timer of this source
        if is_active(other) and not sibling and other.get("message") == slot.get("message") \
                and other.get("delay_ms") == slot.get("delay_ms"):
            return i
    return None


def _full(target: Session, needed: int, free: int) -> ConflictError:
    return ConflictError(
        f"Error: all callback slots full (max {CAPACITY}): session {target.id} has {free} free slot(s) and "
        f"moving needs {needed}; cancel timers there, or move fewer with --from",
            code=ErrorCode.SLOTS_FULL, verbatim=True)


def _plan(doc: dict[str, Any], sources: list[tuple[Session, int, list[dict[str, Any]]]]) -> list[MovedTimer]:
    """Where each active source timer lands in `doc` (which is changed as `set` would)."""
    rows: list[MovedTimer] = []
    queue = [(source, rev, slot) for source, rev, slots in sources for slot in slots]
    for n, (source, rev, slot) in enumerate(queue):
        found = _match(doc, source.id, slot, rev)
        if found is not None:
            rows.append(MovedTimer(source.id, slot["id"], found, "already_there", slot))
            continue
        free = [i for i in range(CAPACITY) if is_free(doc_slots(doc).get(i))]
        if not free:
            placed = sum(1 for row in rows if row.action == "moved")
            raise _Full(placed + sum(1 for s, r, t in queue[n:] if _match(doc, s.id, t, r) is None))
        moved = copy.deepcopy(slot)
        moved.update(id=free[0], active=True, moved_from={"session": source.id, "slot": slot["id"], "rev": rev})
        moved.pop("moved_to", None)
        put_slot(doc, moved)
        rows.append(MovedTimer(source.id, slot["id"], free[0], "moved", slot))
    return rows


def move_timers(target: Session, sources: list[Session], *, dry_run: bool = False,
                options: WriteOptions | None = None) -> TimerMovePlan:
    """Move every active timer of `sources` into `target`'s table; exit 4 `slots_full`, with
    nothing written, when they do not all fit."""
    options = options or WriteOptions()
    found: list[tuple[Session, int, list[dict[str, Any]]]] = []
    for source in sources:
        table = view_table(source).winner
        if table is not None and table.active_slots():
            found.append((source, table.rev, [copy.deepcopy(s) for s in table.active_slots()]))
    view = view_table(target)
    doc = copy.deepcopy(view.winner.doc) if view.winner else new_table_doc()
    free_now = sum(1 for i in range(CAPACITY) if is_free(doc_slots(doc).get(i)))
    try:
        rows = _plan(copy.deepcopy(doc), found)
    except _Full as full:
        raise _full(target, full.needed, free_now) from None
    plan = TimerMovePlan(target, [s for s, _, _ in found], rows, dry_run, target_doc=doc)
    if dry_run or not found:
        return plan
    plan.moved = []
    for source, rev, slots in found:
        plan.moved += _move_one(target, source, rev, slots, options, plan)
    return plan


def _move_one(target: Session, source: Session, rev: int, slots: list[dict[str, Any]], options: WriteOptions,
              plan: TimerMovePlan) -> list[MovedTimer]:
    rows: list[MovedTimer] = []

    def apply(doc: dict[str, Any], now: int, attempt: int) -> list[MovedTimer]:
        free = sum(1 for i in range(CAPACITY) if is_free(doc_slots(doc).get(i)))
        try:
            return _plan(doc, [(source, rev, slots)])
        except _Full as full:
            raise _full(target, full.needed, free) from None

    def survives(doc: dict[str, Any], placed: list[MovedTimer]) -> bool:
        slots_now = doc_slots(doc)
        return all((slots_now.get(row.to_slot) or {}).get("message") == row.timer.get("message") for row in placed
                   if row.to_slot is not None)

    if all(_match(plan.target_doc, source.id, slot, rev) is not None for slot in slots):
        rows = _plan(copy.deepcopy(plan.target_doc), [(source, rev, slots)])  # a re-run: only the source is left
    else:
        plan.written = write_table(target, apply, survives, options)
        plan.target_doc = copy.deepcopy(plan.written.doc)
        rows = plan.written.outcome
    faults.hit("after-move")
    where = {row.slot: row.to_slot for row in rows}

    def retire(doc: dict[str, Any], now: int, attempt: int) -> list[int]:
        done = []
        for i, slot in doc_slots(doc).items():
            original = next((s for s in slots if s["id"] == i), None)
            if original is None or not is_active(slot) or slot.get("message") != original.get("message"):
                continue  # fired its last time, cancelled or replaced meanwhile: nothing to retire
            slot["active"] = False
            slot["moved_to"] = {"session": target.id, "slot": where.get(i)}
            done.append(i)
        return done

    def retired(doc: dict[str, Any], ids: list[int]) -> bool:
        return all(not is_active(doc_slots(doc).get(i) or {"active": False}) for i in ids)

    # the source is not live: no watch, and no stale-session warning for a folder we mean to empty
    write_table(source, retire, retired, WriteOptions(verify_s=None, clock=options.clock, report=Reporter()))
    return rows


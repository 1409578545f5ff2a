"""The reference agent's timers (spec reference-agent.md §4): the session's `callbacks.json` as the
agent holds it — adopted when the file changes, fired when idle, deferred while busy, re-based
after a turn — every write under the revision protocol other writers use."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..callbacks.protocol import WriteOptions, WriteResult, write_table
from ..callbacks.table import (
    FILE_NAME,
    CallbackTable,
    doc_paused,
    doc_rev,
    doc_slots,
    encode_table,
    is_active,
    new_table_doc,
    read_table,
)
from ..clock import Clock
from ..errors import ConflictError, InvalidDataError
from ..fsio import file_stamp, link_create
from ..project import Session
from ..report import Reporter
from .parts import Announce

DEFER_NOTE_S = 5.0


class _Stale(Exception):
    """The table moved under a write and the change no longer applies to it."""


class Timers:
    """The agent's copy of the timer table, kept in step with the file by its stamp and rev."""

    def __init__(self, session: Session, clock: Clock, emit: Announce) -> None:
        self.session, self.dir, self.clock, self.emit = session, session.dir, clock, emit
        self.doc: dict[str, Any] = new_table_doc()
        self.stamp: tuple | None = None
        self.broken = False
        self.deferred_at: dict[int, float] = {}

    def load(self) -> None:
        """At start-up: create the table if absent, adopt it, and lift a pause (a pause does not
        survive a restart)."""
        path = self.dir / FILE_NAME
        if not path.exists():
            now = self.clock.now_ms()
            doc = {"rev": 1, "updated_ms": now, "paused": False, "slots": []}
            try:
                link_create(path, encode_table(doc), mtime_ms=now)
            except FileExistsError:
                pass
        table = read_table(self.dir)  # an unparseable table is exit 5 and never overwritten
        assert table is not None  # created just above; a table is never removed
        self._adopt(table, announce=False)
        if table.paused:

            def unpause(doc: dict[str, Any], now: int) -> None:
                doc["paused"] = False

            self._write(unpause, lambda doc: True)
            self.emit("callbacks_adopted", rev=doc_rev(self.doc))

    def _adopt(self, table: CallbackTable, announce: bool = True) -> None:
        self.doc = table.doc
        self.stamp = file_stamp(self.dir / FILE_NAME)
        if announce:
            self.emit("callbacks_adopted", rev=table.rev)

    def adopt(self) -> None:
        """Re-read the table when its file changed; a broken file keeps the last good table."""
        stamp = file_stamp(self.dir / FILE_NAME)
        if stamp == self.stamp and not self.broken:
            return
        try:
            table = read_table(self.dir)
        except InvalidDataError as error:
            if not self.broken:
                self.emit("warning", message=f"[Callbacks] {error.message}; keeping the last good table")
            self.broken = True
            self.stamp = stamp
            return
        self.broken = False
        if table is None:
            return
        if table.rev != doc_rev(self.doc):
            self._adopt(table)
        else:
            self.stamp = stamp

    def _write(self, change: Callable[[dict[str, Any], int], Any],
               still_applies: Callable[[dict[str, Any]], bool]) -> WriteResult | None:
        """Write under the revision protocol; if the file moved, re-apply only when still valid."""

        def apply(doc: dict[str, Any], now: int, attempt: int) -> Any:
            if attempt and not still_applies(doc):
                raise _Stale
            return change(doc, now)

        try:
            result = write_table(self.session, apply, lambda doc, outcome: True,
                                 WriteOptions(verify_s=None, clock=self.clock, report=Reporter(), mirror=False))
        except (_Stale, ConflictError):
            self.adopt()
            return None
        self.doc = result.doc
        self.stamp = file_stamp(self.dir / FILE_NAME)
        return result

    def active_slots(self) -> list[dict[str, Any]]:
        return [s for s in doc_slots(self.doc).values() if is_active(s)]

    def due_by(self, when_ms: float) -> bool:
        """Whether an active slot fires by `when_ms`."""
        return any(is_active(s) and s["fire_at_ms"] <= when_ms for s in doc_slots(self.doc).values())

    def due_slot(self, now_ms: int) -> int | None:
        """The due active slot with the smallest fire time, then the lowest id."""
        slots = doc_slots(self.doc)
        due = [(s["fire_at_ms"], i) for i, s in slots.items() if is_active(s) and s["fire_at_ms"] <= now_ms]
        return min(due)[1] if due else None

    def fire(self) -> tuple[int, dict[str, Any]] | None:
        """Fire the earliest due slot (the caller is idle): (slot id, the slot after firing), for
        the caller to start its turn; None when nothing fired."""
        if self.broken or doc_paused(self.doc):
            return None
        now = self.clock.now_ms()
        slot_id = self.due_slot(now)
        if slot_id is None:
            return None
        self.adopt()  # just before firing: re-read, and re-decide if rev moved
        slot_id = self.due_slot(now)
        if slot_id is None or doc_paused(self.doc):
            return None
        expected = doc_slots(self.doc)[slot_id]["fire_at_ms"]

        def still_applies(doc: dict[str, Any]) -> bool:
            slot = doc_slots(doc).get(slot_id)
            if not slot:
                return False
            return is_active(slot) and slot.get("fire_at_ms") == expected

        def fire(doc: dict[str, Any], fire_time: int) -> dict[str, Any]:
            slot = doc_slots(doc)[slot_id]
            if slot["repeat_count"] == -1:
                slot["fire_at_ms"] = fire_time + slot["delay_ms"]
            else:
                slot["repeat_count"] -= 1
                if slot["repeat_count"] <= 0:
                    slot["repeat_count"] = 0
                    slot["active"] = False
                else:
                    slot["fire_at_ms"] = fire_time + slot["delay_ms"]
            return dict(slot)

        result = self._write(fire, still_applies)
        if result is None:
            return None
        slot = result.outcome
        self.emit("callback_fired", slot=slot_id, repeat_count=slot["repeat_count"], retired=not slot["active"])
        return slot_id, slot

    def note_deferrals(self) -> None:
        """While busy: each due slot is announced at most once per 5 s; the hold is in memory."""
        if doc_paused(self.doc):
            return
        now = self.clock.now_ms()
        for i, slot in doc_slots(self.doc).items():
            if is_active(slot) and slot["fire_at_ms"] <= now:
                last = self.deferred_at.get(i)
                if last is None or time.monotonic() - last >= DEFER_NOTE_S:
                    self.deferred_at[i] = time.monotonic()
                    self.emit("callback_deferred", slot=i)

    def rebase(self, t_end: int) -> None:
        """After a turn: every slot that fell due during it fires one delay after its end."""
        due = [i for i, slot in doc_slots(self.doc).items() if is_active(slot) and slot["fire_at_ms"] <= t_end]
        if not due or self.broken:
            return

        def rebase(doc: dict[str, Any], now: int) -> list[int]:
            moved = []
            for i, slot in doc_slots(doc).items():
                if is_active(slot) and slot["fire_at_ms"] <= t_end:
                    slot["fire_at_ms"] = t_end + slot["delay_ms"]
                    moved.append(i)
            return moved

        result = self._write(rebase, lambda doc: True)
        if result is not None and result.outcome:
            self.emit("callbacks_rebased", slots=result.outcome)
        self.deferred_at.clear()

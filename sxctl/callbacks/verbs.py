"""The verbs (set, edit, cancel, pause/resume), the fire preview (callbacks.md §7) and the tool's
strings (callbacks.md §8)."""

from __future__ import annotations

import copy
import math
from typing import Any

from ..errors import ConflictError, ErrorCode, TooLateError, UsageError
from ..project import Session
from .protocol import WriteOptions, WriteResult, write_table
from .table import (
    CAPACITY,
    active_ids,
    check_delay_ms,
    check_first_in_ms,
    check_message,
    check_repeat,
    check_slot_id,
    doc_paused,
    doc_slots,
    is_active,
    is_free,
    not_active_error,
    put_slot,
    tool_error,
)

# --- the verbs -----------------------------------------------------------------------------------

def set_timer(
    session: Session,
    message: str,
    delay_ms: int,
    *,
    repeat: int = 20,
    slot_id: int | None = None,
    replace: bool = False,
    first_in_ms: int | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Arm a new timer in the lowest free slot (or `slot_id`); outcome = the slot object."""
    check_message(message)
    check_delay_ms(delay_ms)
    repeat = check_repeat(repeat)
    if slot_id is not None:
        check_slot_id(slot_id)
    if first_in_ms is not None:
        check_first_in_ms(first_in_ms)

    def apply(doc: dict[str, Any], now: int, attempt: int) -> dict[str, Any]:
        slots = doc_slots(doc)
        if slot_id is None:
            chosen = next((i for i in range(CAPACITY) if is_free(slots.get(i))), None)
            if chosen is None:
                raise tool_error(ConflictError, "Error: all callback slots full (max 8)", ErrorCode.SLOTS_FULL)
        else:
            chosen = slot_id
            if not is_free(slots.get(chosen)) and not replace:
                raise ConflictError(f"slot {chosen} is active; use --replace", code=ErrorCode.SLOT_ACTIVE)
        slot = {
            "id": chosen, "active": True, "message": message, "delay_ms": delay_ms,
            "repeat_count": repeat, "fire_at_ms": now + (delay_ms if first_in_ms is None else first_in_ms),
        }
        put_slot(doc, slot)
        return slot

    def survives(doc: dict[str, Any], slot: dict[str, Any]) -> bool:
        found = doc_slots(doc).get(slot["id"])
        return found is not None and found.get("message") == message and found.get("delay_ms") == delay_ms

    return write_table(session, apply, survives, options)


def edit_timer(
    session: Session,
    slot_id: int,
    *,
    message: str | None = None,
    delay_ms: int | None = None,
    repeat: int | None = None,
    first_in_ms: int | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Change an active slot, keeping its unknown fields; outcome = (before, after)."""
    check_slot_id(slot_id)
    if message is not None:
        check_message(message)
    if delay_ms is not None:
        check_delay_ms(delay_ms)
    if repeat is not None:
        repeat = check_repeat(repeat)
    if first_in_ms is not None:
        check_first_in_ms(first_in_ms)
    if message is None and delay_ms is None and repeat is None and first_in_ms is None:
        raise UsageError("nothing to change: give --message, --every, --repeat or --first-in")

    def apply(doc: dict[str, Any], now: int, attempt: int) -> tuple[dict[str, Any], dict[str, Any]]:
        slot = doc_slots(doc).get(slot_id)
        if slot is None or not is_active(slot):
            if attempt == 0:
                raise not_active_error(slot_id)
            raise TooLateError(f"callback slot {slot_id} fired its last time or was cancelled meanwhile")
        before = copy.deepcopy(slot)
        if message is not None:
            slot["message"] = message
        if delay_ms is not None:
            slot["delay_ms"] = delay_ms
        if repeat is not None:
            slot["repeat_count"] = repeat
        if first_in_ms is not None:
            slot["fire_at_ms"] = now + first_in_ms
        elif delay_ms is not None:
            slot["fire_at_ms"] = now + delay_ms
        return before, copy.deepcopy(slot)

    def survives(doc: dict[str, Any], outcome: tuple[dict[str, Any], dict[str, Any]]) -> bool:
        after = outcome[1]
        found = doc_slots(doc).get(slot_id) or {}
        same = all(found.get(k) == after[k] for k in ("message", "delay_ms") if k in after)
        if repeat is not None and repeat != -1:
            same = same and isinstance(found.get("repeat_count"), int) and found["repeat_count"] <= repeat
        return same

    return write_table(session, apply, survives, options)


def cancel_timers(
    session: Session,
    slot_id: int | None,
    *,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Deactivate one slot (`slot_id`) or every active slot (None); outcome = [(id, message)]."""
    if slot_id is not None:
        check_slot_id(slot_id)

    def apply(doc: dict[str, Any], now: int, attempt: int) -> list[tuple[int, str]]:
        slots = doc_slots(doc)
        if slot_id is not None and not is_active(slots.get(slot_id) or {"active": False}):
            raise not_active_error(slot_id)
        ids = [slot_id] if slot_id is not None else active_ids(doc)
        for i in ids:
            slots[i]["active"] = False
        return [(i, slots[i].get("message", "")) for i in ids]

    def survives(doc: dict[str, Any], cancelled: list[tuple[int, str]]) -> bool:
        slots = doc_slots(doc)
        return all(not is_active(slots.get(i) or {"active": False}) for i, _ in cancelled)

    return write_table(session, apply, survives, options)


def set_paused(
    session: Session,
    paused: bool,
    *,
    options: WriteOptions | None = None,
) -> WriteResult:
    """Pause, or resume re-basing overdue slots to now + delay; outcome = re-based ids."""

    def apply(doc: dict[str, Any], now: int, attempt: int) -> list[int]:
        doc["paused"] = paused
        rebased = []
        if not paused:
            for i, slot in sorted(doc_slots(doc).items()):
                if is_active(slot) and slot["fire_at_ms"] <= now:
                    slot["fire_at_ms"] = now + slot["delay_ms"]
                    rebased.append(i)
        return rebased

    def survives(doc: dict[str, Any], rebased: list[int]) -> bool:
        return doc_paused(doc) == paused

    return write_table(session, apply, survives, options)


def publish_table(session: Session, *, options: WriteOptions | None = None) -> WriteResult:
    """Write the table back as it is, with the next rev and `updated_ms`, so that the running
    agent adopts a change made without them (`table.unpublished_edit`); outcome = each slot's
    message and period, as published. An active slot the agent's tool would refuse is exit 2,
    naming the slot: a hand edit is never published with values the tool never writes."""

    def apply(doc: dict[str, Any], now: int, attempt: int) -> dict[int, tuple[Any, Any]]:
        for i in active_ids(doc):
            slot = doc_slots(doc)[i]
            repeat = slot["repeat_count"]
            try:
                check_message(slot["message"])
                check_delay_ms(slot["delay_ms"])
                if repeat != -1 and not 1 <= repeat <= 1000:  # an active slot has a fire left
                    raise UsageError(f"repeat_count must be -1 or between 1 and 1000 (got {repeat})")
            except UsageError as error:
                raise UsageError(f"nothing published: slot {i} of {session.dir / 'callbacks.json'}: "
                                 f"{error.message.removeprefix('Error: ')}") from None
        return {i: (slot.get("message"), slot.get("delay_ms")) for i, slot in doc_slots(doc).items()}

    def survives(doc: dict[str, Any], published: dict[int, tuple[Any, Any]]) -> bool:
        """The agent's writes after it adopted the table keep what a person edits (its fires
        re-arm and count down); a copy it wrote from the table before does not."""
        slots = doc_slots(doc)
        return all((slots.get(i) or {}).get("message") == message and (slots.get(i) or {}).get("delay_ms") == delay
                   for i, (message, delay) in published.items())

    return write_table(session, apply, survives, options)


# --- the preview (callbacks.md §7) ---------------------------------------------------------------

def preview_fires(doc: dict[str, Any], now_ms: int, limit: int, slot_id: int | None = None) -> list[dict[str, Any]]:
    """The next `limit` fires assuming an idle agent and instant turns."""
    rows: list[dict[str, Any]] = []
    for i, slot in sorted(doc_slots(doc).items()):
        if not is_active(slot) or (slot_id is not None and i != slot_id):
            continue
        repeat, delay = slot["repeat_count"], slot["delay_ms"]
        count = limit if repeat == -1 else min(limit, repeat)
        first = max(slot["fire_at_ms"], now_ms)
        for n in range(count):
            rows.append({
                "slot": i, "at_ms": first + n * delay, "fire_no": n + 1,
                "remaining_after": -1 if repeat == -1 else repeat - n - 1,
                "overdue": n == 0 and slot["fire_at_ms"] < now_ms, "idle_only": True,
            })
    rows.sort(key=lambda row: (row["at_ms"], row["slot"]))
    return rows[:limit]


# --- the tool's strings (callbacks.md §8) --------------------------------------------------------

def list_preview(message: str) -> str:
    """Fit 70 characters, dropping a cut word, then `...` (reproduces the documented rows)."""
    if len(message) <= 70:
        return message
    kept = message[:70]
    if message[70] != " " and " " in kept:
        kept = kept[: kept.rindex(" ")]
    return kept.rstrip(" ") + "..."


def cancel_preview(message: str) -> str:
    return message if len(message) <= 55 else message[:55] + "..."


def fires_in(fire_at_ms: int, now_ms: int) -> str:
    """`{M}m{SS}s`, rounded up to whole seconds, never below 0m00s."""
    seconds = max(0, math.ceil((fire_at_ms - now_ms) / 1000))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def scheduled_text(slot: dict[str, Any]) -> str:
    repeat = slot["repeat_count"]
    times = "infinitely" if repeat == -1 else f"{repeat} times"
    return f"Callback scheduled: fires every {slot['delay_ms'] // 1000}s, repeats {times}."


def list_text(doc: dict[str, Any], now_ms: int, include_inactive: bool = False) -> str:
    slots = doc_slots(doc)
    active = [slots[i] for i in active_ids(doc)]
    if not active and not include_inactive:
        lines = ["No active callbacks."]
    else:
        lines = [f"Active callbacks ({len(active)}/{CAPACITY}):"]
        for i, slot in sorted(slots.items()):
            if is_active(slot):
                left = "infinite" if slot["repeat_count"] == -1 else f"{slot['repeat_count']} left"
                lines.append(
                    f'  [{i}] "{list_preview(slot["message"])}" - fires in '
                    f"{fires_in(slot['fire_at_ms'], now_ms)} ({left})"
                )
            elif include_inactive:
                text = slot["message"] if isinstance(slot.get("message"), str) else ""
                lines.append(f'  [{i}] "{list_preview(text)}" - inactive')
    if doc_paused(doc):
        lines.append("Paused.")
    return "\n".join(lines)


def cancelled_text(cancelled: list[tuple[int, str]], single: bool) -> str:
    if single:
        slot_id, message = cancelled[0]
        return f'Cancelled callback slot {slot_id}: "{cancel_preview(message)}"'
    if not cancelled:
        return "No active callbacks."
    return f"Cancelled {len(cancelled)} callback{'s' if len(cancelled) != 1 else ''}."


#: what `/callbacks cancel`, `/callbacks list` and the fire preview say when no slot is active
NO_ACTIVE_CALLBACKS = "No active callbacks."


def updated_text(slot_id: int, slot: dict[str, Any], now_ms: int) -> str:
    """The agent tool's line after an edit: period, next fire and the fires left."""
    left = "infinite" if slot["repeat_count"] == -1 else f"{slot['repeat_count']} left"
    return (f"Updated callback slot {slot_id}: fires every {slot['delay_ms'] // 1000}s, next in "
            f"{fires_in(slot['fire_at_ms'], now_ms)} ({left}).")

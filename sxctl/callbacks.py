"""The session timer table `callbacks.json` (spec callbacks.md): reading rules, the tool's
validation strings, slot allocation, the revision protocol and the fire preview.

Reading is lenient where the spec allows and strict (exit 5, file untouched) where a write
could otherwise destroy data it does not understand. Every write goes through `write_table`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import faults, jsondata
from .clock import SYSTEM_CLOCK, Clock
from .errors import ConflictError, InvalidDataError, NotFoundError, SxctlError, TooLateError, UsageError
from .fsio import atomic_write, read_data_file
from .locks import writer_lock
from .project import Session, check_rotation_after_write, warn_if_not_live
from .report import Reporter

CAPACITY = 8
_FILE_CAP = 4 * 1024 * 1024
FILE_NAME = "callbacks.json"
LOCK_NAME = ".sxctl-callbacks.lock"
LOCK_WAIT_S = 5.0
ATTEMPTS = 5
STALE_TEMP_MS = 3_600_000
MISSING_FILE_WARNING = (
    "no callbacks.json in session {id}; agents older than file-backed timers keep timers in memory "
    "and will ignore this file"
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class CallbackTable:
    """A parsed `callbacks.json`; `doc` keeps every key, known or not, in file order."""

    path: Path
    doc: dict[str, Any]
    raw: bytes

    @property
    def rev(self) -> int:
        return self.doc.get("rev", 0)

    @property
    def paused(self) -> bool:
        return bool(self.doc.get("paused", False))

    def active_slots(self) -> list[dict[str, Any]]:
        slots = doc_slots(self.doc)
        return [slots[i] for i in active_ids(self.doc)]


def is_active(slot: dict[str, Any]) -> bool:
    """A slot without `active` counts as active when `repeat_count != 0` (sxctl decision)."""
    if "active" in slot:
        return slot["active"] is True
    return slot.get("repeat_count") != 0


_ACTIVE_TYPES = {"message": str, "delay_ms": int, "repeat_count": int, "fire_at_ms": int}


def parse_table(path: Path, raw: bytes) -> CallbackTable:
    """Apply the reading rules; anything a rewrite could damage is exit 5 naming the file."""

    def invalid(reason: str) -> InvalidDataError:
        return InvalidDataError(str(path), reason)

    try:
        doc = jsondata.loads(raw)
    except jsondata.JSONDataError as exc:
        raise invalid(str(exc)) from None
    if not isinstance(doc, dict):
        raise invalid("the top level is not an object")
    rev = doc.get("rev", 0)
    if not _is_int(rev) or rev < 0:
        raise invalid('"rev" is not a non-negative integer')
    slots = doc.get("slots", [])
    if not isinstance(slots, list):
        raise invalid('"slots" is not an array')
    seen: set[int] = set()
    for index, slot in enumerate(slots):
        if not isinstance(slot, dict) or not _is_int(slot.get("id")):
            raise invalid(f"slots[{index}] is not an object with an integer id")
        slot_id = slot["id"]
        if not 0 <= slot_id < CAPACITY:
            continue
        if slot_id in seen:
            raise invalid(f"slot id {slot_id} appears twice")
        seen.add(slot_id)
        if is_active(slot):
            for key, kind in _ACTIVE_TYPES.items():
                value = slot.get(key)
                if not isinstance(value, kind) or isinstance(value, bool):
                    raise invalid(f'slots[{index}] (id {slot_id}) is active but "{key}" is not a {kind.__name__}')
    return CallbackTable(path, doc, raw)


def _read_raw(path: Path) -> bytes | None:
    raw = read_data_file(path, _FILE_CAP)
    if raw is not None and len(raw) > _FILE_CAP:
        raise InvalidDataError(str(path), f"larger than {_FILE_CAP} bytes")
    return raw


def read_table(session_dir: Path) -> CallbackTable | None:
    """One folder's table, or None when `callbacks.json` does not exist."""
    path = session_dir / FILE_NAME
    raw = _read_raw(path)
    return None if raw is None else parse_table(path, raw)


def encode_table(doc: dict[str, Any]) -> bytes:
    """Indented by 2, UTF-8 without ASCII escaping, trailing newline (callbacks.md §1)."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


# --- both copies of a worktree session -----------------------------------------------------------

@dataclass
class TableView:
    """What the agent's table looks like now, across the worktree copy and its mirror."""

    primary_path: Path
    mirror_path: Path | None
    primary: CallbackTable | None
    mirror: CallbackTable | None

    @property
    def winner(self) -> CallbackTable | None:
        """The higher `rev` wins; on a tie, the worktree copy (sessions.md §7)."""
        if self.primary is None or (self.mirror is not None and self.mirror.rev > self.primary.rev):
            return self.mirror
        return self.primary

    @property
    def other_rev(self) -> int:
        loser = self.mirror if self.winner is self.primary else self.primary
        return loser.rev if loser is not None else 0

    @property
    def rev(self) -> int:
        return self.winner.rev if self.winner is not None else 0

    @property
    def exists(self) -> bool:
        return self.winner is not None


def _table_paths(session: Session) -> tuple[Path, Path | None]:
    copies = session.worktree_copies()
    primary = copies.primary(session.dir) / FILE_NAME
    mirror = copies.mirror_dir / FILE_NAME if copies.role != "none" and copies.mirror_dir else None
    return primary, mirror


def _raw_pair(primary: Path, mirror: Path | None) -> tuple[bytes | None, bytes | None]:
    return _read_raw(primary), (_read_raw(mirror) if mirror is not None else None)


def view_table(session: Session) -> TableView:
    """Read (never write) the session's table, both copies in a worktree."""
    if not session.dir.is_dir():
        raise NotFoundError(f"session folder {session.dir} not found", code="session_not_found")
    primary, mirror = _table_paths(session)
    raw_primary, raw_mirror = _raw_pair(primary, mirror)
    return TableView(
        primary, mirror,
        parse_table(primary, raw_primary) if raw_primary is not None else None,
        parse_table(mirror, raw_mirror) if raw_mirror is not None and mirror is not None else None,
    )


# --- validation with the SetCallback tool's strings (callbacks.md §3) ---------------------------

def tool_error(cls: type[SxctlError], message: str, code: str) -> SxctlError:
    return cls(message, code=code, verbatim=True)


def check_message(message: str | None) -> str:
    if not message:
        raise tool_error(UsageError, "Error: missing message parameter", "invalid_value")
    if "\x00" in message:
        raise tool_error(UsageError, "Error: message must not contain NUL characters", "invalid_value")
    if len(message) > 2048:
        raise tool_error(
            UsageError, f"Error: message must be at most 2048 characters (got {len(message)})", "invalid_value"
        )
    return message


def _seconds_text(ms: int) -> str:
    return f"{ms // 1000}" if ms % 1000 == 0 else f"{ms / 1000:g}"


def check_delay_ms(delay_ms: int) -> int:
    """Whole seconds, 1–3600."""
    if delay_ms % 1000 or not 1000 <= delay_ms <= 3_600_000:
        raise tool_error(
            UsageError, f"Error: delay_seconds must be between 1 and 3600 (got {_seconds_text(delay_ms)})",
            "invalid_value",
        )
    return delay_ms


def check_first_in_ms(first_in_ms: int) -> int:
    """0–3600 s (sxctl's message: the tool has no such parameter)."""
    if not 0 <= first_in_ms <= 3_600_000:
        raise tool_error(
            UsageError, f"Error: first_in must be between 0 and 3600 seconds (got {_seconds_text(first_in_ms)})",
            "invalid_value",
        )
    return first_in_ms


def check_repeat(repeat: int) -> int:
    """-1 (infinite) or 1–1000; 0 is one shot, stored as 1."""
    if repeat == 0:
        return 1
    if repeat != -1 and not 1 <= repeat <= 1000:
        raise tool_error(
            UsageError, f"Error: repeat_count must be -1 or between 1 and 1000 (got {repeat})", "invalid_value"
        )
    return repeat


def check_slot_id(slot_id: int) -> int:
    if not 0 <= slot_id < CAPACITY:
        raise tool_error(UsageError, f"Error: callback_id {slot_id} out of range (max 7)", "invalid_value")
    return slot_id


def not_active_error(slot_id: int) -> SxctlError:
    return tool_error(NotFoundError, f"Error: callback slot {slot_id} is not active", "slot_not_active")


# --- slots in a document -----------------------------------------------------------------------

def doc_slots(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Slot objects of a document by id, for ids 0–7 (other ids are kept on rewrite but never
    used)."""
    return {s["id"]: s for s in doc.get("slots", []) if 0 <= s["id"] < CAPACITY}


def is_free(slot: dict[str, Any] | None) -> bool:
    """Missing, inactive, or with no fires left: `set` may take it (callbacks.md §4)."""
    return slot is None or not is_active(slot) or slot.get("repeat_count") == 0


def active_ids(doc: dict[str, Any]) -> list[int]:
    return sorted(i for i, slot in doc_slots(doc).items() if is_active(slot))


def put_slot(doc: dict[str, Any], slot: dict[str, Any]) -> None:
    """Place a fresh slot object: replace the entry with its id, or insert it in id order."""
    slots = doc.setdefault("slots", [])
    for index, existing in enumerate(slots):
        if existing["id"] == slot["id"]:
            slots[index] = slot
            return
    position = next((i for i, s in enumerate(slots) if s["id"] > slot["id"]), len(slots))
    slots.insert(position, slot)


def new_table_doc() -> dict[str, Any]:
    return {"rev": 0, "updated_ms": 0, "paused": False, "slots": []}


# --- the revision protocol (callbacks.md §5) ------------------------------------------------------

class _Moved(Exception):
    """The file changed between our read and our rename: read again."""


@dataclass
class WriteResult:
    """What a committed write left on disk."""

    doc: dict[str, Any]
    rev: int
    path: Path
    created: bool
    outcome: Any
    verified: bool | None
    mirror_skipped: bool


@dataclass
class WriteOptions:
    """How a write behaves: `--expect-rev`, the lost-update watch (None = none), clock, notes."""

    expect_rev: int | None = None
    verify_s: float | None = 1.0
    clock: Clock = SYSTEM_CLOCK
    report: Reporter = field(default_factory=Reporter)
    mirror: bool = True  # the reference agent writes only its own copy


Apply = Callable[[dict[str, Any], int, int], Any]
Survives = Callable[[dict[str, Any], Any], bool]


def write_table(session: Session, apply: Apply, survives: Survives, options: WriteOptions | None = None) -> WriteResult:
    """Change the table under the revision protocol.

    `apply(doc, now_ms, attempt)` edits a deep copy in place (and may raise the tool's errors);
    `survives(doc, outcome)` tells whether a later revision still carries the change.
    """
    options = options or WriteOptions()
    clock, report, expect_rev = options.clock, options.report, options.expect_rev
    if not session.dir.is_dir():
        raise NotFoundError(f"session folder {session.dir} not found", code="session_not_found")
    primary, mirror = _table_paths(session)
    if not options.mirror:
        mirror = None
    if not primary.parent.is_dir():
        raise NotFoundError(f"session folder {primary.parent} not found", code="session_not_found")
    _remove_stale_temps(primary, clock)
    with writer_lock(primary.parent / LOCK_NAME, LOCK_WAIT_S, "the callbacks table"):
        for attempt in range(ATTEMPTS):
            raw_pair = _raw_pair(primary, mirror)
            view = TableView(
                primary, mirror,
                parse_table(primary, raw_pair[0]) if raw_pair[0] is not None else None,
                parse_table(mirror, raw_pair[1]) if raw_pair[1] is not None and mirror is not None else None,
            )
            if expect_rev is not None and expect_rev != view.rev:
                raise ConflictError(f"expected rev {expect_rev}, found {view.rev}", code="rev_moved")
            doc = copy.deepcopy(view.winner.doc) if view.winner else new_table_doc()
            now = clock.now_ms()
            outcome = apply(doc, now, attempt)
            new_rev = max(view.rev, view.other_rev) + 1
            doc["rev"] = new_rev
            doc["updated_ms"] = now
            data = encode_table(doc)

            def unchanged(expected: tuple[bytes | None, bytes | None] = raw_pair) -> None:
                faults.hit("before-rename")
                if _raw_pair(primary, mirror) != expected:
                    raise _Moved

            try:
                atomic_write(primary, data, keep_mode=True, precommit=unchanged, no_clobber=raw_pair[0] is None)
            except (_Moved, FileExistsError):
                clock.sleep(random.uniform(0.02, 0.2))
                continue
            break
        else:
            raise ConflictError(
                f"callbacks.json kept changing; gave up after {ATTEMPTS} attempts", code="rev_moved", file=primary
            )
        mirror_skipped = _write_mirror(mirror, data, new_rev, report)
    if not view.exists:
        report.warn(MISSING_FILE_WARNING.format(id=session.id))
    warn_if_not_live(session, report)
    check_rotation_after_write(session, clock, report)
    verified = None
    if options.verify_s is not None and session.state == "live":
        verified = _verify(primary, data, outcome, survives, options.verify_s, clock)
    return WriteResult(doc, new_rev, primary, raw_pair[0] is None, outcome, verified, mirror_skipped)


def _write_mirror(mirror: Path | None, data: bytes, new_rev: int, report: Reporter) -> bool:
    """Write the same bytes to the main-checkout mirror unless it already moved past us."""
    if mirror is None:
        return False

    def not_ahead() -> None:
        raw = _read_raw(mirror)
        if raw is not None and parse_table(mirror, raw).rev > new_rev:
            raise _Moved

    try:
        atomic_write(mirror, data, keep_mode=True, precommit=not_ahead)
    except _Moved:
        report.warn(f"the mirror {mirror} has a newer rev than {new_rev}; left it alone")
        return True
    return False


def _verify(primary: Path, written: bytes, outcome: Any, survives: Survives, verify_s: float, clock: Clock) -> bool:
    """Watch the file briefly: any other bytes on disk that lack our change mean the agent wrote
    its copy from an older state (whatever rev it gave it): a lost update (exit 4)."""
    deadline = clock.monotonic() + verify_s
    while True:
        last_look = clock.monotonic() >= deadline
        if not last_look:
            clock.sleep(0.1)
        try:
            raw = _read_raw(primary)
            table = parse_table(primary, raw) if raw is not None else None
        except InvalidDataError:
            table = None
        if table is not None and raw != written and not survives(table.doc, outcome):
            raise ConflictError(
                f"lost update: the agent wrote rev {table.rev} from an older state and your change is gone; "
                "run the command again", code="lost_update", file=primary,
            )
        if last_look:
            return True


def _remove_stale_temps(primary: Path, clock: Clock) -> None:
    """Leftover `callbacks.json.sxctl-*.tmp` older than an hour belong to a crashed writer."""
    cutoff = clock.now_ms() - STALE_TEMP_MS
    try:
        entries = list(os.scandir(primary.parent))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.startswith(f"{FILE_NAME}.sxctl-") and entry.name.endswith(".tmp"):
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime_ns // 1_000_000 < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass


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
                raise tool_error(ConflictError, "Error: all callback slots full (max 8)", "slots_full")
        else:
            chosen = slot_id
            if not is_free(slots.get(chosen)) and not replace:
                raise ConflictError(f"slot {chosen} is active; use --replace", code="slot_active")
        slot = {
            "id": chosen, "active": True, "message": message, "delay_ms": delay_ms,
            "repeat_count": repeat, "fire_at_ms": now + (delay_ms if first_in_ms is None else first_in_ms),
        }
        put_slot(doc, slot)
        return slot

    def survives(doc: dict[str, Any], slot: dict[str, Any]) -> bool:
        found = doc_slots(doc).get(slot["id"])
        return bool(found) and found.get("message") == message and found.get("delay_ms") == delay_ms

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
        return bool(doc.get("paused", False)) == paused

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
                text = slot.get("message") if isinstance(slot.get("message"), str) else ""
                lines.append(f'  [{i}] "{list_preview(text)}" - inactive')
    if doc.get("paused"):
        lines.append("Paused.")
    return "\n".join(lines)


def cancelled_text(cancelled: list[tuple[int, str]], single: bool) -> str:
    if single:
        slot_id, message = cancelled[0]
        return f'Cancelled callback slot {slot_id}: "{cancel_preview(message)}"'
    if not cancelled:
        return "No active callbacks."
    return f"Cancelled {len(cancelled)} callback{'s' if len(cancelled) != 1 else ''}."

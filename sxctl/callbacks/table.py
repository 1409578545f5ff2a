"""The timer table as read: reading rules (lenient where the spec allows, strict where a write
could destroy data it does not understand), both copies of a worktree session, the tool's
validation strings and the slots of a document."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import jsondata
from ..errors import ErrorCode, InvalidDataError, NotFoundError, SxctlError, UsageError
from ..fsio import read_data_file
from ..project import Session
from ..timeparse import shown_time

CAPACITY = 8
_FILE_CAP = 4 * 1024 * 1024
FILE_NAME = "callbacks.json"
LOCK_NAME = ".sxctl-callbacks.lock"
LOCK_WAIT_S = 5.0
ATTEMPTS = 5
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
        return doc_rev(self.doc)

    @property
    def paused(self) -> bool:
        return doc_paused(self.doc)

    def active_slots(self) -> list[dict[str, Any]]:
        slots = doc_slots(self.doc)
        return [slots[i] for i in active_ids(self.doc)]


def doc_rev(doc: dict[str, Any]) -> int:
    """A table's revision; a table never written is at 0."""
    return doc.get("rev", 0)


def doc_paused(doc: dict[str, Any]) -> bool:
    return bool(doc.get("paused", False))


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
    rev = doc_rev(doc)
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
        raise NotFoundError(f"session folder {session.dir} not found", code=ErrorCode.SESSION_NOT_FOUND)
    primary, mirror = _table_paths(session)
    raw_primary, raw_mirror = _raw_pair(primary, mirror)
    return TableView(
        primary, mirror,
        parse_table(primary, raw_primary) if raw_primary is not None else None,
        parse_table(mirror, raw_mirror) if raw_mirror is not None and mirror is not None else None,
    )


# --- an edit the running agent ignores ---------------------------------------------------------------

#: a table written by the revision protocol has the file time of its `updated_ms` (sxctl sets it;
#: an agent's write lands within milliseconds of the time it records): a file changed later than
#: this after it was an edit that recorded no write (callbacks.md §5)
EDIT_SLACK_MS = 2_000


@dataclass(frozen=True)
class UnpublishedEdit:
    """`callbacks.json` changed at `changed_ms`, after its recorded write (`rev`, `updated_ms`),
    by a writer that did not bump `rev` (a hand edit, a restored copy): the live agent adopts a
    table only when `rev` changes, so it ignores the change, and its next write puts its own
    copy back."""

    path: Path
    rev: int
    updated_ms: int
    changed_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.path), "rev": self.rev, "updated_ms": self.updated_ms,
                "changed_ms": self.changed_ms}

    @property
    def message(self) -> str:
        return (f"{self.path} changed at {shown_time(self.changed_ms)}, after its last recorded write (rev "
                f"{self.rev} at {shown_time(self.updated_ms)}), without a new rev: the running agent adopts the "
                "table only when its "
                "rev changes, so it ignores this change (unless it started after it) and its next write of the "
                "table puts its own copy back")

    @property
    def fix(self) -> str:
        return (f"sxctl callbacks publish   # writes the table as it is now as rev {self.rev + 1}, which the agent "
                "adopts")


def unpublished_edit(session: Session, view: TableView) -> UnpublishedEdit | None:
    """The change to a live session's table that its agent ignores (`UnpublishedEdit`), or None:
    the file's modification time is later than the `updated_ms` it records by more than
    EDIT_SLACK_MS. Judged only when the file still holds the bytes that were read."""
    table = view.winner
    if table is None or session.state != "live" or not _is_int(table.doc.get("updated_ms")):
        return None
    try:
        changed = os.stat(table.path).st_mtime_ns // 1_000_000
    except OSError:
        return None
    if changed <= table.doc["updated_ms"] + EDIT_SLACK_MS or _read_raw(table.path) != table.raw:
        return None  # written by the protocol, or replaced since it was read (a writer's mtime then)
    return UnpublishedEdit(table.path, table.rev, table.doc["updated_ms"], changed)


# --- validation with the SetCallback tool's strings (callbacks.md §3) ---------------------------

def tool_error(cls: type[SxctlError], message: str, code: ErrorCode, **extra: Any) -> SxctlError:
    return cls(message, code=code, verbatim=True, **extra)


def check_message(message: str | None) -> str:
    if not message:
        raise tool_error(UsageError, "Error: missing message parameter", ErrorCode.INVALID_VALUE)
    if "\x00" in message:
        raise tool_error(UsageError, "Error: message must not contain NUL characters", ErrorCode.INVALID_VALUE)
    if len(message) > 2048:
        raise tool_error(
            UsageError, f"Error: message must be at most 2048 characters (got {len(message)})", ErrorCode.INVALID_VALUE
        )
    return message


def _seconds_text(ms: int) -> str:
    return f"{ms // 1000}" if ms % 1000 == 0 else f"{ms / 1000:g}"


def check_delay_ms(delay_ms: int) -> int:
    """Whole seconds, 1–3600."""
    if delay_ms % 1000 or not 1000 <= delay_ms <= 3_600_000:
        raise tool_error(
            UsageError, f"Error: delay_seconds must be between 1 and 3600 (got {_seconds_text(delay_ms)})",
            ErrorCode.INVALID_VALUE, hint="--every takes whole seconds from 1s to 1h (e.g. 30s, 2m, 1h)",
        )
    return delay_ms


def check_first_in_ms(first_in_ms: int) -> int:
    """0–3600 s (sxctl's message: the tool has no such parameter)."""
    if not 0 <= first_in_ms <= 3_600_000:
        raise tool_error(
            UsageError, f"Error: first_in must be between 0 and 3600 seconds (got {_seconds_text(first_in_ms)})",
            ErrorCode.INVALID_VALUE, hint="--first-in takes 0s to 1h (e.g. 0, 90s, 5m)",
        )
    return first_in_ms


def check_repeat(repeat: int) -> int:
    """-1 (infinite) or 1–1000; 0 is one shot, stored as 1."""
    if repeat == 0:
        return 1
    if repeat != -1 and not 1 <= repeat <= 1000:
        raise tool_error(
            UsageError, f"Error: repeat_count must be -1 or between 1 and 1000 (got {repeat})", ErrorCode.INVALID_VALUE
        )
    return repeat


def check_slot_id(slot_id: int) -> int:
    if not 0 <= slot_id < CAPACITY:
        raise tool_error(UsageError, f"Error: callback_id {slot_id} out of range (max 7)", ErrorCode.INVALID_VALUE)
    return slot_id


def not_active_error(slot_id: int) -> SxctlError:
    return tool_error(NotFoundError, f"Error: callback slot {slot_id} is not active", ErrorCode.SLOT_NOT_ACTIVE)


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



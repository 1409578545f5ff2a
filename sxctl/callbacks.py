"""The session timer table `callbacks.json`: the lenient reading rules (spec callbacks.md §2).

Reading is lenient where the spec allows and strict (exit 5, file untouched) where a write
could otherwise destroy data it does not understand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidDataError

CAPACITY = 8
_FILE_CAP = 4 * 1024 * 1024


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

    def slots(self) -> dict[int, dict[str, Any]]:
        """Slot objects by id, for ids 0–7 (other ids are kept on rewrite but never used)."""
        return {s["id"]: s for s in self.doc.get("slots", []) if 0 <= s["id"] < CAPACITY}

    def active_slots(self) -> list[dict[str, Any]]:
        return [slot for _, slot in sorted(self.slots().items()) if is_active(slot)]


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
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid(f"not valid JSON ({exc})") from None
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


def read_table(session_dir: Path) -> CallbackTable | None:
    """The session's table, or None when `callbacks.json` does not exist."""
    path = session_dir / "callbacks.json"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_FILE_CAP + 1)
    except FileNotFoundError:
        return None
    if len(raw) > _FILE_CAP:
        raise InvalidDataError(str(path), f"larger than {_FILE_CAP} bytes")
    return parse_table(path, raw)

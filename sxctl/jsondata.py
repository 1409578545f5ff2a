"""The one JSON reader for files a user or an agent controls: standard JSON, nothing more.

Python's `json` accepts `NaN`/`Infinity`, turns `1e400` into infinity, lets a lone surrogate
escape (`"\\ud800"`) through into a string no UTF-8 writer can encode, and raises RecursionError
on deep nesting. Each of those would later crash a write or put non-JSON on stdout; here they are
one `JSONDataError` (a ValueError) whose message says what is wrong, for the caller to report as
invalid data naming the file.

sxctl's own small records (key records, move intents) are written with `compact_json`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class JSONDataError(ValueError):
    """The bytes are not standard JSON, or hold something no writer could write back."""


def _refuse_constant(name: str) -> Any:
    raise JSONDataError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONDataError(f"the number {text[:40]} is out of range")
    return value


def loads(raw: bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """Parse `raw` (UTF-8 JSON) or raise JSONDataError."""
    try:
        obj = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float,
                         object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise JSONDataError("nested too deeply") from None
    except UnicodeDecodeError:
        raise JSONDataError("not valid JSON (not UTF-8 text)") from None
    except JSONDataError:
        raise
    except ValueError as exc:
        raise JSONDataError(f"not valid JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(obj):
        raise JSONDataError("a string holds a lone surrogate escape (not Unicode text)")
    return obj


def _has_lone_surrogate(obj: Any) -> bool:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def compact_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON and one newline: the on-disk form of the store, ledger rows and
    sxctl's own records."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def strict_loads(raw: bytes) -> Any:
    """JSON that refuses duplicate keys (a strict reader must not let the last one win)."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            counts: dict[str, int] = {}
            for key, _ in pairs:
                counts[key] = counts.get(key, 0) + 1
            duplicate = next(key for key, _ in pairs if counts[key] > 1)
            raise ValueError(f"duplicate key {duplicate!r}")
        return result

    return loads(raw, object_pairs_hook=no_duplicates)

"""The records `inbox forward` leaves in a source inbox: the intent of a move that is running or
was interrupted (`.forwarding/<stem>.json`) and the record of a move that happened
(`.forwarded/<stem>.json`), which `inbox show`, key look-ups and `cron runs` follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import jsondata
from ..errors import SxctlError
from ..fsio import read_data_file
from ..project import is_valid_session_id
from .message import is_plain_stem

INTENTS = ".forwarding"
MOVES = ".forwarded"


def read_intent(path: Path) -> dict[str, Any] | None:
    """An intent or move record sxctl wrote, or None when it is not one (never acted on)."""
    try:
        raw = read_data_file(path, 65_536)
    except SxctlError:
        return None
    if raw is None:
        return None
    try:
        body = jsondata.loads(raw)
    except jsondata.JSONDataError:
        return None
    if not (isinstance(body, dict) and isinstance(body.get("stem"), str) and isinstance(body.get("to_stem"), str)
            and isinstance(body.get("to_session"), str) and is_valid_session_id(body["to_session"])):
        return None
    return body if is_plain_stem(body["to_stem"]) else None


def moved_to(inbox_path: Path, stem: str, *, moving: bool = True) -> tuple[str, str] | None:
    """(session id, stem) a message of the inbox folder `inbox_path` was forwarded to (with
    `moving`, also one it is being forwarded to, or whose move was interrupted), from its record.
    It takes the folder's path, not an `InboxDir`: `folder` reads these records, so this module
    does not import it."""
    for folder in (MOVES, INTENTS) if moving else (MOVES,):
        body = read_intent(inbox_path / folder / f"{stem}.json")
        if body is not None and body["stem"] == stem:
            return body["to_session"], body["to_stem"]
    return None

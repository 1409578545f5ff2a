"""Idempotency-key records (spec inbox.md §6): `inbox/.keys/<sha256 of the key>.json` names the
stem a key was sent as. Loaded only by keyed sends and the commands that read keys."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from .. import jsondata
from ..errors import InvalidDataError, SxctlError, UsageError
from ..fsio import read_bytes_capped
from .folder import InboxDir
from .message import check_stem


def key_record_path(inbox: InboxDir, key: str) -> Path:
    """Where `inbox` keeps the record of `key`."""
    return inbox.keys / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def read_key_record(path: Path) -> dict[str, Any] | None:
    """The key record at `path` (None when absent); exit 5 when it is not one sxctl can use."""
    try:
        raw = read_bytes_capped(path, 65_536)
    except FileNotFoundError:
        return None
    try:
        body = jsondata.loads(raw)
    except jsondata.JSONDataError as exc:
        raise InvalidDataError(str(path), str(exc)) from None
    if not (
        isinstance(body, dict)
        and isinstance(body.get("stem"), str)
        and isinstance(body.get("content_sha256"), str)
    ):
        raise InvalidDataError(str(path), "not an idempotency-key record")
    try:
        check_stem(body["stem"])
    except UsageError:
        raise InvalidDataError(str(path), f"unsafe stem {body['stem']!r}") from None
    return body


def key_state(inbox: InboxDir, body: dict[str, Any]) -> str:
    """Where the message of a key record is: its file's state, or, once `inbox prune` removed
    the file, the state the record kept (a consumed key stays consumed until `prune --keys`)."""
    state = inbox.state_of(body["stem"])
    if state == "missing" and body.get("pruned") in ("consumed", "retracted"):
        return body["pruned"]
    return state


def key_index(inbox: InboxDir) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Every key record of `inbox` by the stem it names: one listing of `.keys/` and a read each."""
    index: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    try:
        names = sorted(os.listdir(inbox.keys))
    except (FileNotFoundError, NotADirectoryError):
        return index
    for name in names:
        if not name.endswith(".json"):
            continue
        path = inbox.keys / name
        try:
            body = read_key_record(path)
        except SxctlError:
            continue  # not a record sxctl can use: it says nothing about any message
        if body is not None:
            index.setdefault(body["stem"], []).append((path, body))
    return index

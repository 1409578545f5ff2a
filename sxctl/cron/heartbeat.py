"""The scheduler's heartbeat: every pass — one that ran jobs, a quiet one, one that found the lock
busy, one that failed — records when it ran, on which host, with which version and how it ended,
in `<workspace>/.scheduler/sxctl-tick.json`. "No pass has run for 17 minutes" is then a fact
(`sxctl doctor`), not a guess: a broken crontab looks different from "nothing was due"."""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import SxctlError
from ..fsio import atomic_write, read_data_file
from .store import Workspace

FILE_NAME = "sxctl-tick.json"
FILE_CAP = 64 * 1024


def record_pass(ws: Workspace, outcome: str, *, clock: Clock = SYSTEM_CLOCK, detail: str | None = None) -> None:
    """Write the heartbeat (atomic, 0600) where a `.scheduler/` folder exists; a pass never
    creates one just to say it ran. A failure to write it never fails the pass."""
    from .. import __version__

    folder = ws.scheduler
    if not folder.is_dir() or folder.is_symlink():
        return
    doc = {"formatVersion": 1, "lastPassMs": clock.now_ms(), "host": socket.gethostname(), "pid": os.getpid(),
           "sxctlVersion": __version__, "outcome": outcome, "detail": detail}
    try:
        atomic_write(folder / FILE_NAME, (json.dumps(doc) + "\n").encode(),
                     temp=folder / f"{FILE_NAME}.{uuid.uuid4()}.tmp", durable=False)
    except (OSError, SxctlError):
        pass  # advisory: the store and the ledger are what count


def read_heartbeat(ws: Workspace) -> dict[str, Any] | None:
    """The last pass's record, None when no pass has written one, `{"invalid": why}` when unreadable."""
    from ..jsondata import loads

    try:
        raw = read_data_file(ws.scheduler / FILE_NAME, FILE_CAP)
    except SxctlError as error:
        return {"invalid": error.message}
    if raw is None:
        return None
    try:
        doc = loads(raw)
    except ValueError as error:
        return {"invalid": str(error)}
    if not isinstance(doc, dict) or not isinstance(doc.get("lastPassMs"), int):
        return {"invalid": "not a heartbeat record"}
    return doc

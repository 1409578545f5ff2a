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
from ..errors import InvalidDataError, SxctlError
from ..fsio import atomic_write, read_data_file
from ..jsondata import strict_loads
from ..version import __version__
from .schema import EPOCH_MS
from .schema_kit import MAX_SAFE_INT, Const, Enum, Int, Nullable, Obj, SchemaError, Str, opt, req
from .workspace import Workspace

FILE_NAME = "sxctl-tick.json"
FILE_CAP = 64 * 1024
DETAIL_CAP = 4096  # bytes of a failed pass's error kept: the record stays far below FILE_CAP
OUTCOMES = ("ok", "busy", "no_store", "failed")
#: the only record a pass writes; anything else there (a hand-made or damaged file) is not trusted
RECORD = Obj([req("formatVersion", Const(1)), req("lastPassMs", EPOCH_MS), req("host", Str(1, 1024)),
              req("pid", Int(0, MAX_SAFE_INT)), req("sxctlVersion", Str(1, 256)), req("outcome", Enum(OUTCOMES)),
              req("detail", Nullable(Str(0, DETAIL_CAP))),
              # since when every pass found the store lock busy (null once a pass ran): shows a pass
              # that hangs or a lock left behind; absent in older records
              opt("busySinceMs", Nullable(EPOCH_MS)),
              # the workspace the pass ran for (its real path): a heartbeat copied or moved along
              # with the project says nothing about a pass here; absent in older records
              opt("workspace", Str(1, 4096))])


def record_pass(ws: Workspace, outcome: str, *, clock: Clock = SYSTEM_CLOCK,
                detail: str | None = None) -> str | None:
    """Write the heartbeat (atomic, 0600) where a `.scheduler/` folder exists; a pass never
    creates one just to say it ran. A failure to write it never fails the pass: it is returned
    (why), for the pass to warn that `doctor` cannot see it."""
    folder = ws.scheduler
    if not folder.is_dir() or folder.is_symlink():
        return None
    if detail is not None:
        detail = detail.encode("utf-8", "replace")[:DETAIL_CAP].decode("utf-8", "ignore")
    now = clock.now_ms()
    busy_since = None
    if outcome == "busy":
        before = read_heartbeat(ws)
        busy_since = (before.get("busySinceMs") if before is not None and before.get("outcome") == "busy"
                      else None) or now
    doc = {"formatVersion": 1, "lastPassMs": now, "host": socket.gethostname(), "pid": os.getpid(),
           "sxctlVersion": __version__, "outcome": outcome, "detail": detail, "busySinceMs": busy_since,
           "workspace": os.path.realpath(ws.root)}
    try:
        atomic_write(folder / FILE_NAME, (json.dumps(doc) + "\n").encode(),
                     temp=folder / f"{FILE_NAME}.{uuid.uuid4()}.tmp", durable=False)
    except SxctlError as error:  # advisory: the store and the ledger are what count
        return error.message
    except OSError as error:
        return f"{folder / FILE_NAME}: {error.strerror or error}"
    return None


def read_heartbeat(ws: Workspace) -> dict[str, Any] | None:
    """The last pass's record, None when no pass has written one, `{"invalid": why}` when what
    is there cannot be read or is not a record a pass writes (empty, cut short, a folder, a FIFO,
    a field missing or of the wrong type): a verdict is never drawn from it."""
    try:
        raw = read_data_file(ws.scheduler / FILE_NAME, FILE_CAP)
    except InvalidDataError as error:
        return {"invalid": error.reason}
    except SxctlError as error:
        return {"invalid": error.message}
    if raw is None:
        return None
    if len(raw) > FILE_CAP:
        return {"invalid": f"larger than {FILE_CAP} bytes"}
    try:
        doc = strict_loads(raw)  # a key twice (`"outcome": "failed", "outcome": "ok"`) is a record that lies
        RECORD.check(doc, "$")
    except ValueError as error:
        return {"invalid": str(error)}
    except SchemaError as error:
        return {"invalid": f"not a heartbeat record ({error})"}
    return doc


def written_elsewhere(beat: dict[str, Any], ws: Workspace) -> str | None:
    """The workspace a valid heartbeat was written for when it is not `ws` (the file was copied
    or moved along with the project: it says nothing about a pass here), else None."""
    ran_for = beat.get("workspace")
    return ran_for if ran_for is not None and ran_for != os.path.realpath(ws.root) else None

"""The scheduler's heartbeat: every pass — one that ran jobs, a quiet one, one that found the lock
busy, one that failed — records when it ran, on which host, with which version and how it ended,
in `<workspace>/.scheduler/sxctl-tick/<host>.json`, one file per host (cron/policy/hosts.py names the
host; the single `sxctl-tick.json` of an older sxctl is still read). "No pass has run for 17
minutes on build-2" is then a fact (`sxctl doctor`), not a guess: a broken crontab looks different
from "nothing was due"."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...clock import CLOCK_SKEW_MS, SYSTEM_CLOCK, Clock
from ...errors import InvalidDataError, SxctlError
from ...fsio import atomic_write, read_data_file
from ...jsondata import strict_loads
from ...version import __version__
from ..policy.hosts import check_host_name, this_host
from ..store.schema import EPOCH_MS
from ..store.schema_kit import MAX_SAFE_INT, Arr, Check, Const, Enum, Int, Nullable, Obj, SchemaError, Str, opt, req
from ..store.workspace import Workspace
from .pings import MAX_BODY_LEN, MAX_PENDING, MAX_TRIES, MAX_URL_LEN, SUFFIXES, sent_url_rule

FILE_NAME = "sxctl-tick.json"  # the single heartbeat of an older sxctl: read, no longer written
FOLDER = "sxctl-tick"  # one `<host>.json` per host
MAX_HOSTS = 64  # heartbeat files read from FOLDER (the newest): a bound on what doctor reads
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
              opt("workspace", Str(1, 4096)),
              # the pings of this host's passes (cron/run/pings.py): counts of the last pass, its last
              # error (the URL masked) and the pings to send again at the next pass
              opt("pings", Obj([req("sent", Int(0, MAX_SAFE_INT)), req("failed", Int(0, MAX_SAFE_INT)),
                                req("dropped", Int(0, MAX_SAFE_INT)), req("lastError", Nullable(Str(0, 512))),
                                req("pending", Arr(Obj([req("url", Check(Str(1, MAX_URL_LEN + 8), sent_url_rule)),
                                                        req("body", Str(0, MAX_BODY_LEN)),
                                                        req("kind", Enum(tuple(SUFFIXES))),
                                                        req("tries", Int(0, MAX_TRIES)),
                                                        req("firstMs", EPOCH_MS)]), max_items=MAX_PENDING))]))])


def host_file(ws: Workspace, host: str) -> Path:
    """The heartbeat file of `host` (a name `hosts.host_rule` accepts: never a path)."""
    return ws.scheduler / FOLDER / f"{check_host_name(host, 'host')}.json"


def record_pass(ws: Workspace, outcome: str, *, clock: Clock = SYSTEM_CLOCK, detail: str | None = None,
                host: str | None = None, extra: dict[str, Any] | None = None) -> str | None:
    """Write this host's heartbeat (atomic, 0600; `host`: default this_host) where a
    `.scheduler/` folder exists; a pass never creates one just to say it ran. A failure to write
    it never fails the pass: it is returned (why), for the pass to warn that `doctor` cannot see
    it. `extra`: more of RECORD's optional fields (the pings)."""
    folder = ws.scheduler
    if not folder.is_dir() or folder.is_symlink():
        return None
    host = host or this_host(os.environ)
    if detail is not None:
        detail = detail.encode("utf-8", "replace")[:DETAIL_CAP].decode("utf-8", "ignore")
    now = clock.now_ms()
    busy_since = None
    if outcome == "busy":
        before = read_heartbeats(ws).get(host)
        busy_since = (before.get("busySinceMs") if before is not None and before.get("outcome") == "busy"
                      else None) or now
    doc = {"formatVersion": 1, "lastPassMs": now, "host": host, "pid": os.getpid(),
           "sxctlVersion": __version__, "outcome": outcome, "detail": detail, "busySinceMs": busy_since,
           "workspace": os.path.realpath(ws.root), **(extra or {})}
    path = host_file(ws, host)
    try:
        if path.parent.is_symlink():
            raise InvalidDataError(str(path.parent), "refusing to use it: it is a symbolic link")
        path.parent.mkdir(mode=0o700, exist_ok=True)
        atomic_write(path, (json.dumps(doc) + "\n").encode(), temp=path.parent / f".{path.name}.{uuid.uuid4()}.tmp",
                     durable=False)
    except SxctlError as error:  # advisory: the store and the ledger are what count
        return error.message
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    return None


def heartbeat_paths(ws: Workspace) -> list[Path]:
    """The heartbeat files there are: the older single file, then the MAX_HOSTS host files
    written last (by name): hosts come and go (a Kubernetes pod is a new host each pass), and the
    hosts that pass now are the ones that count."""
    paths = [ws.scheduler / FILE_NAME]
    folder = ws.scheduler / FOLDER
    if folder.is_dir() and not folder.is_symlink():
        found = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    try:
                        found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
                    except OSError:
                        continue
        newest = sorted(found, reverse=True)[:MAX_HOSTS]
        paths += [folder / name for name in sorted(name for _, name in newest)]
    return paths


def pending_pings(ws: Workspace, host: str, urls: Callable[[], set[str]]) -> list[dict[str, Any]]:
    """The pings the last pass on `host` could not send, to send again: only from this host's
    own heartbeat written for this workspace (a copied or restored one would tell the original's
    monitor), and only to a URL this workspace still pings (`urls()`: the jobs' and the pass's
    `--ping-url`, asked only when pings wait; a hand-written heartbeat must not make the pass
    POST anywhere)."""
    beat = read_record(host_file(ws, host))
    if beat is None or "invalid" in beat or beat["host"] != host or written_elsewhere(beat, ws) is not None:
        return []
    waiting = beat.get("pings", {}).get("pending", [])
    if not waiting:
        return []
    from .pings import SUFFIXES, ping_url  # only a pass with pings left over needs them

    wanted = {ping_url(url, kind) for url in urls() for kind in SUFFIXES}
    return [item for item in waiting if item["url"] in wanted]


def read_heartbeats(ws: Workspace) -> dict[str, dict[str, Any]]:
    """Every host's last pass, by host (`read_record` each): a host file's record must name its
    own host; the older single file counts for the host it names unless that host's own file is
    newer. A record that cannot be trusted is kept under its file's path, `{"invalid": why,
    "path": path}`."""
    found: dict[str, dict[str, Any]] = {}
    for path in heartbeat_paths(ws):
        doc = read_record(path)
        if doc is None:
            continue
        if "invalid" not in doc and path.name != FILE_NAME and doc["host"] != path.name[:-len(".json")]:
            doc = {"invalid": f"it names host {doc['host']!r}, not {path.name[:-len('.json')]!r}"}
        if "invalid" in doc:
            found[str(path)] = {**doc, "path": str(path)}
            continue
        before = found.get(doc["host"])
        if before is None or before["lastPassMs"] <= doc["lastPassMs"]:
            found[doc["host"]] = {**doc, "path": str(path)}
    return found


def trusted_passes(ws: Workspace, now: int) -> dict[str, dict[str, Any]]:
    """The heartbeats a verdict may be drawn from, by host: schema-valid, written for this
    workspace, not ahead of this clock."""
    return {host: beat for host, beat in read_heartbeats(ws).items() if "invalid" not in beat
            and written_elsewhere(beat, ws) is None and beat["lastPassMs"] - now <= CLOCK_SKEW_MS}


def newest_pass_ms(ws: Workspace, now: int) -> int | None:
    """When a pass last went through here on any host (a trusted heartbeat of a pass that ran:
    not one that found the lock busy or failed), None when none did."""
    return max((beat["lastPassMs"] for beat in trusted_passes(ws, now).values() if beat["outcome"] == "ok"),
               default=None)


def read_heartbeat(ws: Workspace) -> dict[str, Any] | None:
    """The last pass's record on any host (the newest record that can be trusted), None when
    no pass has written one, `{"invalid": why}` when no record there can be trusted."""
    beats = list(read_heartbeats(ws).values())
    trusted = [beat for beat in beats if "invalid" not in beat]
    here = [beat for beat in trusted if written_elsewhere(beat, ws) is None]  # a copied one says nothing here
    if trusted:
        return max(here or trusted, key=lambda beat: beat["lastPassMs"])
    return beats[0] if beats else None


def read_record(path: Path) -> dict[str, Any] | None:
    """One heartbeat file's record, None when there is none, `{"invalid": why}` when what is
    there cannot be read or is not a record a pass writes (empty, cut short, a folder, a FIFO,
    a field missing or of the wrong type): a verdict is never drawn from it."""
    try:
        raw = read_data_file(path, FILE_CAP)
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

"""Locked, strictly validated reads and writes of `<workspace>/.scheduler/cron-jobs.json`
(spec cron-store.md), and the refusal to touch a workspace a live comis daemon owns. An edit
that also changes sxctl's policy file goes through cron/store/transaction.py."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import faults
from ...clock import SYSTEM_CLOCK, Clock
from ...collector import collector_paused
from ...errors import ConflictError, ErrorCode, InvalidDataError, NotFoundError, SxctlError, UsageError
from ...fsio import PendingFile, atomic_write, ensure_private_dir, fsync_dir, link_create, read_data_file
from ...jsondata import compact_json, strict_loads
from ...locks import MkdirLock, pid_alive
from ...report import Reporter
from ...timeparse import format_ms
from .schema import canonical_store, job_named_at, validate_store
from .schema_kit import SchemaError, with_job
from .workspace import Workspace

STORE_CAP = 32 * 1024 * 1024
TERMINAL_RETENTION_MS = 7 * 86_400_000
LOCK_WAIT_S = 10.0


# --- reading -------------------------------------------------------------------------------------

def parse_store(path: Path, raw: bytes) -> dict[str, Any]:
    """Strict load: exit 5 naming the file, the JSON path and the failed rule."""
    if len(raw) > STORE_CAP:
        raise InvalidDataError(str(path), "Cron store exceeds its byte ceiling")
    try:
        with collector_paused():
            store = strict_loads(raw)
    except ValueError as exc:
        raise InvalidDataError(str(path), f"Cron store contains invalid JSON ({exc})") from None
    if isinstance(store, list):
        raise InvalidDataError(str(path), "legacy comis store (array format); not supported")
    try:
        validate_store(store)
    except SchemaError as exc:
        job = job_named_at(store, exc.path)
        raise InvalidDataError(
            str(path), with_job(f"Cron store does not match the strict format at {exc.path}: {exc.rule}", job),
            json_path=exc.path, rule=exc.rule, job=job,
        ) from None
    return store


def read_store_bytes(ws: Workspace) -> bytes | None:
    return read_data_file(ws.store, STORE_CAP)


def read_store(ws: Workspace) -> dict[str, Any] | None:
    """The validated store, or None when there is none yet (reads never lock)."""
    raw = read_store_bytes(ws)
    if raw is None:
        if os.path.exists(ws.store.with_name("cron-jobs.json.bak")) or os.path.exists(ws.scheduler / "execution.jsonl"):
            raise InvalidDataError(str(ws.store), "legacy comis store (array format); not supported")
        return None
    return parse_store(ws.store, raw)


def job_named_by(ws: Workspace, json_path: str) -> str | None:
    """`schema.job_named_at` in the workspace's store as it is now (None when there is none or it
    cannot be read): the job a JSON path of sxctl's policy file is about."""
    try:
        return job_named_at(read_store(ws), json_path)
    except SxctlError:
        return None


def new_store() -> dict[str, Any]:
    return {"formatVersion": 1, "agentSchedulerSeed": str(uuid.uuid4()), "jobs": [], "activeClaims": []}


def find_job(store: dict[str, Any], name: str) -> dict[str, Any]:
    if not name:  # an unset variable in a script: "Cron job not found: " read as a broken message
        raise UsageError("the job name is empty: give the name of a job (`sxctl cron list` shows them)")
    for job in store["jobs"]:
        if job["name"] == name:
            return job
    import difflib  # only a mistyped name pays for it

    close = difflib.get_close_matches(name, [job["name"] for job in store["jobs"]], n=3, cutoff=0.6)
    missing = NotFoundError(f"Cron job not found: {name}", code=ErrorCode.JOB_NOT_FOUND)
    if close:
        missing.extra["hint"] = f"did you mean {' or '.join(close)}? (`sxctl cron list` shows them)"
    raise missing


def default_agent_id(store: dict[str, Any] | None, explicit: str | None, environ: Mapping[str, str]) -> str:
    """`--agent`, `SXCTL_AGENT`, the single agentId all jobs share, then `default`."""
    if explicit:
        return explicit
    if environ.get("SXCTL_AGENT"):
        return environ["SXCTL_AGENT"]
    agents = {job["agentId"] for job in (store or {}).get("jobs", [])}
    return agents.pop() if len(agents) == 1 else "default"


# --- daemon ownership ----------------------------------------------------------------------------

@dataclass
class DaemonLock:
    """comis's daemon lock of a workspace: whose it is and whether that process still runs."""

    lock_file: Path
    pid: int | None
    alive: bool
    owns_workspace: bool

    def to_json(self) -> dict[str, Any]:
        return {"lock_file": str(self.lock_file), "pid": self.pid, "alive": self.alive,
                "owns_workspace": self.owns_workspace}


def daemon_lock_files(environ: Mapping[str, str]) -> list[Path]:
    files = []
    if environ.get("COMIS_HOME"):
        files.append(Path(environ["COMIS_HOME"]) / ".daemon.lock")
    home = environ.get("HOME") or os.path.expanduser("~")
    files.append(Path(home) / ".comis" / ".daemon.lock")
    return list(dict.fromkeys(files))


def _daemon_alive(pid: int | None) -> bool:
    if pid is None:
        return True  # unreadable content counts as alive
    if pid <= 0 or not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").lower()
    except OSError:
        return True
    return b"node" in cmdline or b"comis" in cmdline  # otherwise the pid was reused


def daemon_locks(ws: Workspace, environ: Mapping[str, str]) -> list[DaemonLock]:
    found = []
    real_ws = os.path.realpath(ws.root)
    for lock_file in daemon_lock_files(environ):
        try:
            raw = read_data_file(lock_file, 64)
        except SxctlError:  # unreadable, a FIFO, …: a daemon we cannot identify
            raw = b""
        except OSError:  # a HOME that is a file, …
            raw = None
        if raw is None:
            continue
        text = raw.decode("ascii", "replace").strip()
        pid = int(text) if text.isdigit() else None
        alive = _daemon_alive(pid)
        home = os.path.realpath(lock_file.parent)
        owns = alive and (real_ws == home or real_ws.startswith(home + os.sep))
        found.append(DaemonLock(lock_file, pid, alive, owns))
    return found


def _tilde(path: Path, environ: Mapping[str, str]) -> str:
    home = environ.get("HOME")
    text = str(path)
    return "~" + text[len(home):] if home and text.startswith(home + os.sep) else text


def check_ownership(ws: Workspace, store: dict[str, Any] | None, environ: Mapping[str, str], force: bool,
                    report: Reporter) -> None:
    """tick refuses a workspace that belongs to comis (runner.md §1)."""
    refuse_if_daemon_owns(ws, environ, report, force=force)
    if store is not None and any(job["source"] == "built_in" for job in store["jobs"]):
        if not force:
            raise ConflictError("the store holds comis built-in jobs; it belongs to a comis daemon",
                                code=ErrorCode.BUILT_IN_PRESENT, file=ws.store)
        report.warn("--force: the store holds comis built-in jobs; they are never claimed")
    refuse_if_reset_pending(ws)


def refuse_if_daemon_owns(ws: Workspace, environ: Mapping[str, str], report: Reporter, force: bool = False) -> None:
    """Mutations of a workspace a live comis daemon owns would be lost or break its ticks."""
    for lock in daemon_locks(ws, environ):
        if lock.owns_workspace and not force:
            raise ConflictError(
                f"a comis daemon (pid {lock.pid if lock.pid is not None else '?'}, {_tilde(lock.lock_file, environ)}) "
                "owns this workspace. It caches the store in memory and would not see this change, and its next "
                "claim could abort its scheduler ticks. Stop the daemon, or use comis's own cron tool.",
                code=ErrorCode.DAEMON_OWNS_WORKSPACE, file=lock.lock_file,
            )
        if lock.owns_workspace:
            report.warn(f"--force: a live comis daemon (pid {lock.pid}) owns this workspace; running anyway")
        elif lock.alive:
            report.warn(f"a comis daemon is running (pid {lock.pid}, {lock.lock_file}) but does not own {ws.root}")


def refuse_if_handed_off(ws: Workspace) -> None:
    """After `cron handoff` a comis daemon keeps the ledger: a pass of sxctl's would start a new
    one with `inbox_dispatch` rows, which the daemon rejects."""
    if os.path.lexists(ws.handed_off):
        raise ConflictError(
            f"this workspace was handed off to a comis daemon (`sxctl cron handoff` left {ws.handed_off}): a pass "
            "of sxctl's would write a ledger the daemon rejects, so nothing was run; remove the `cron tick` entry "
            "(`sxctl cron export --target crontab --uninstall`), or, to run sxctl's passes here again, stop the "
            f"daemon and remove {ws.handed_off}",
            code=ErrorCode.DAEMON_OWNS_WORKSPACE, file=ws.handed_off,
        )


def refuse_if_reset_pending(ws: Workspace) -> None:
    if os.path.lexists(ws.reset_intent):
        raise ConflictError(
            f"a comis guarded reset is in progress ({ws.reset_intent}); try again when it has finished",
            code=ErrorCode.RESET_INTENT, file=ws.reset_intent,
        )


# --- init and writing ----------------------------------------------------------------------------

def _touch_sentinel(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def init_workspace(ws: Workspace) -> list[str]:
    """Create whatever is missing of `.scheduler/`, sentinels, store and ledger; never overwrite."""
    if not ws.root.is_dir():
        raise NotFoundError(f"workspace {ws.root} is not a folder", code=ErrorCode.FILE_NOT_FOUND, file=ws.root)
    ws.refuse_symlinks()
    created = []
    if not ws.scheduler.is_dir():
        ensure_private_dir(ws.scheduler)
        created.append(str(ws.scheduler))
    for sentinel in (ws.store_sentinel, ws.ledger_sentinel):
        if _touch_sentinel(sentinel):
            created.append(str(sentinel))
    for path, data in ((ws.store, compact_json(new_store())), (ws.ledger, b"")):
        try:
            link_create(path, data, temp=path.with_name(f"{path.name}.{uuid.uuid4()}.tmp"))
            created.append(str(path))
        except FileExistsError:
            pass
    return created


def store_lock(ws: Workspace, boot_id: str, wait_s: float = LOCK_WAIT_S) -> MkdirLock:
    return MkdirLock(ws.store_sentinel, boot_id=boot_id, wait_s=wait_s, what="the cron store")


def write_store(ws: Workspace, store: dict[str, Any], lock: MkdirLock,
                touched: Collection[str] | None = None, cache: dict[str, Any] | None = None) -> bytes:
    """Validate, encode compactly in schema order, and replace the store atomically (0600).
    `touched`: the only jobs changed since the store was read, validated and made canonical (a
    scheduler pass over 10,000 jobs then checks the jobs it ran, not all of them, at each write);
    `cache` (the pass's own) keeps the jobs' bytes, ids and names from one write to the next."""
    try:
        validate_store(store, touched, cache)
    except SchemaError as exc:  # the store was valid when read: the value given is out of bounds
        job = job_named_at(store, exc.path)
        raise UsageError(with_job(f"invalid value for {exc.path}: {exc.rule}", job), json_path=exc.path, rule=exc.rule,
                         job=job) from None
    canonical = canonical_store(store, touched)
    data = compact_json(canonical) if touched is None or cache is None else _encode_reusing(
        canonical, touched, cache)
    if len(data) > STORE_CAP:
        raise ConflictError("Cron store byte capacity reached", code=ErrorCode.CAPACITY, file=ws.store)
    def before_rename() -> None:
        faults.hit("before-rename")
        lock.check_held()

    with PendingFile(ws.store, ws.store.with_name(f"{ws.store.name}.{uuid.uuid4()}.tmp")) as pending:
        pending.write_all(data)
        pending.commit(before_rename)
    return data


def _encode_reusing(canonical: dict[str, Any], touched: Collection[str], cache: dict[str, Any]) -> bytes:
    """`compact_json(canonical)`, byte for byte, with each untouched job encoded once per pass
    (`cache` keeps the jobs' order and bytes as last written, from one write to the next)."""
    jobs = canonical["jobs"]
    order = [job["id"] for job in jobs]
    if cache.get("order") != order:
        cache.update(order=order, parts=[compact_json(job)[:-1] for job in jobs])
    parts = cache["parts"]
    for index, job in enumerate(jobs):
        if job["id"] in touched:
            parts[index] = compact_json(job)[:-1]
    head = compact_json({"formatVersion": canonical["formatVersion"],
                           "agentSchedulerSeed": canonical["agentSchedulerSeed"]})[:-2]
    claims = compact_json(canonical["activeClaims"])[:-1]
    return b"".join([head, b',"jobs":[', b",".join(parts), b'],"activeClaims":', claims, b"}\n"])


def prune_terminal_one_shots(store: dict[str, Any], now_ms: int) -> list[str]:
    """Drop one-shots 7 days past their terminal that no claim references (as comis does)."""
    claimed = {claim["jobId"] for claim in store["activeClaims"]}
    kept, dropped = [], []
    for job in store["jobs"]:
        life = job["lifecycle"]
        if (life["status"] == "one_shot_terminal" and job["id"] not in claimed
                and now_ms - life["terminalAtMs"] > TERMINAL_RETENTION_MS):
            dropped.append(job["name"])
        else:
            kept.append(job)
    store["jobs"] = kept
    return dropped


def hand_off(ws: Workspace, *, clock: Clock = SYSTEM_CLOCK, lock_wait_s: float = LOCK_WAIT_S,
             before: Callable[[dict[str, Any], MkdirLock], None] | None = None) -> Path | None:
    """Move the ledger aside (`cron-executions.jsonl.sxctl-<UTC time>`, never deleted) under the
    store and ledger locks, refused while a claim is active; the moved path, or None when there
    was no ledger. It first leaves the mark `ws.handed_off`, which keeps sxctl's passes out
    (`refuse_if_handed_off`). `before(store, lock)` sees a store there is first, under the lock, and may
    refuse or change it (cron/store/handoff.py)."""
    ws.refuse_symlinks()
    with store_lock(ws, f"sxctl-{uuid.uuid4()}", lock_wait_s) as lock:
        store = read_store(ws)
        if store is not None and store["activeClaims"]:
            raise ConflictError(f"{len(store['activeClaims'])} claim(s) are active in {ws.store}; let the pass "
                                "that holds them finish (or `sxctl cron tick` settle them), then hand off",
                                code=ErrorCode.ACTIVE_CLAIM, file=ws.store)
        if store is not None and before is not None:
            before(store, lock)
        with MkdirLock(ws.ledger_sentinel, boot_id=f"sxctl-{uuid.uuid4()}", wait_s=lock_wait_s,
                       what="the cron ledger"):
            # the mark first: killed before the rename, the hand-off is re-run, and no pass of
            # sxctl's writes a ledger in between
            atomic_write(ws.handed_off, compact_json({"handed_off_ms": clock.now_ms()}))
            if not os.path.lexists(ws.ledger):
                return None
            stamp = format_ms(clock.now_ms(), "%Y%m%dT%H%M%SZ")
            aside = ws.ledger.with_name(f"{ws.ledger.name}.sxctl-{stamp}")
            n = 1
            while os.path.lexists(aside):
                n += 1
                aside = ws.ledger.with_name(f"{ws.ledger.name}.sxctl-{stamp}-{n}")
            os.rename(ws.ledger, aside)
            fsync_dir(ws.scheduler)
            return aside

"""The throw-away copy `cron simulate` rehearses in (cron/run/rehearsal.py): the workspace's
scheduler files and the sessions its passes read, copied at the same places relative to the
workspace; never a link followed, nothing outside read or written, and of a session's read
messages only those the ledger names (the passes look no other up: a big history is not copied)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import InvalidDataError, UsageError
from ...locks import check_sentinel, pid_alive
from ...project import ProjectLayout, freshest_live, list_sessions
from ...project.layout import SCORPIOX_DIR
from ...report import Reporter
from ...timeparse import format_ms
from ..spend.file import spend_path
from ..store.file import check_ownership, read_store, refuse_if_handed_off
from ..store.targets import endpoint_of, holds_project, inside, linked_through, resolve_project
from ..store.workspace import Workspace
from .ledger import MAX_MAX_LOG_BYTES, scan_ledger

SESSION_FILE_CAP = 16 * 1024 * 1024  # a message with its image is far smaller; transcripts are not copied
TOP_FILE_CAP = 1024 * 1024  # a session's own files the passes read (stats, timers) are far smaller

SHM = "/dev/shm"
#: the room a memory file system must have for the copy to go there (the copy is far smaller)
SHM_ROOM = 1 << 30


def scratch_parent() -> str:
    """Where the throw-away copy goes: the folder TMPDIR names when it is set; else /dev/shm, a
    file system in memory, when it is there with room (each pass rewrites the files it changes:
    on a disk, renames and lock folders cost most of a rehearsal); else the system's temp folder."""
    if os.environ.get("TMPDIR"):
        return os.environ["TMPDIR"]
    try:
        found = os.statvfs(SHM)
    except OSError:
        return tempfile.gettempdir()
    if found.f_bavail * found.f_frsize >= SHM_ROOM and os.access(SHM, os.W_OK | os.X_OK):
        return SHM
    return tempfile.gettempdir()


def refuse_what_a_pass_refuses(ws: Workspace, environ: Mapping[str, str]) -> None:
    """The user's workspace as a real pass first checks it: a linked `.scheduler/` or file in it,
    a lock sentinel that is no regular file (a FIFO), a comis daemon that owns it, its built-in
    jobs, a pending reset or a hand-off stop every pass, so they stop the rehearsal (its copy has
    none of them, and would have predicted runs)."""
    ws.refuse_symlinks()
    for sentinel in (ws.store_sentinel, ws.ledger_sentinel):
        check_sentinel(sentinel)
    check_ownership(ws, read_store(ws), environ, False, Reporter())
    refuse_if_handed_off(ws)


@contextmanager
def copy_folder(ws: Workspace, project: Path) -> Iterator[str]:
    """The private temporary folder of the copy (`scratch_parent`), named with this process's id:
    never inside the workspace or the project (a TMPDIR there is refused: the copy would be made
    in what it copies, where a live agent reads); copies of rehearsals that died (SIGKILL: no
    clean-up ran) are removed first."""
    parent = scratch_parent()
    real = Path(os.path.realpath(parent))
    for folder in (ws.root, project):
        if inside(real, Path(os.path.realpath(folder))):
            raise UsageError(f"TMPDIR {parent} is inside {folder}: the rehearsal's copy would be made in what it "
                             "copies; point TMPDIR to a folder outside it")
    _remove_dead_copies(real)
    with tempfile.TemporaryDirectory(prefix=f"{COPY_PREFIX}{os.getpid()}-", dir=real) as temp:
        yield temp


COPY_PREFIX = "sxctl-simulate-"


def _remove_dead_copies(parent: Path) -> None:
    """The copies in `parent` of this user's rehearsals whose process is gone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        found = re.fullmatch(rf"{COPY_PREFIX}(\d+)-\w+", entry.name)
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
            if found and mine and not pid_alive(int(found.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def copy_workspace(ws: Workspace, project: Path, temp: Path, from_ms: int,
          copies: dict[str, str]) -> tuple[Workspace, Path, list[Path]]:
    """The workspace's scheduler files and the sessions of `project` and of every project in the
    workspace a job targets (`_targets`), copied below `temp` at the same places relative to the
    workspace (each copied folder -> the user's own, in `copies`); the session of each that the
    simulated agent runs in."""
    root = Path(os.path.realpath(ws.root))
    real_project = Path(os.path.realpath(project))
    sim_ws = Workspace(temp / "project" if real_project == root else temp / "workspace")
    sim_project = sim_ws.root / real_project.relative_to(root) if inside(real_project, root) else temp / "project"
    copies.update({str(sim_project): str(project), str(sim_ws.root): str(ws.root)})
    sim_ws.scheduler.mkdir(parents=True)
    for path in (ws.store, ws.policy, ws.ledger, spend_path(ws.scheduler)):  # + the tokens already attributed
        if os.path.islink(path):  # refused as the pass refuses them, never silently left out
            raise InvalidDataError(str(path), "refusing to use it: it is a symbolic link")
        if os.path.lexists(path) and not path.is_file():
            raise InvalidDataError(str(path), "not a regular file")
        if path.is_file():
            shutil.copy2(path, sim_ws.scheduler / path.name)
    oldest = _oldest_run_s(sim_ws)
    homes = [_home(project, sim_project, from_ms, temp, copies, oldest)]
    for target, sim_target in _targets(sim_ws, ws.root, temp, {str(real_project)}, copies):
        homes.append(_home(target, sim_target, from_ms, temp, copies, oldest))
    return sim_ws, sim_project, [home for home in homes if home is not None]


def _targets(sim_ws: Workspace, workspace: Path, temp: Path, seen: set[str],
             copies: dict[str, str]) -> list[tuple[Path | None, Path]]:
    """The projects in `workspace` (itself or below it) that the store's jobs target, stored
    relative to it, each once with its place in the copy: a folder holding a real `.scorpiox/`,
    reached through no symbolic link, has its sessions copied. A link on the way, or a linked
    `.scorpiox`, is never followed: the copy holds a link at its place to a folder of the copy with
    a simulated agent (None: nothing copied), so the pass meets it, and refuses it, as for real.
    An absolute target is not copied (the rehearsal says it is not rehearsed)."""
    found: list[tuple[Path | None, Path]] = []
    for job in (read_store(sim_ws) or {"jobs": []})["jobs"]:
        endpoint = endpoint_of(job)
        if endpoint is None or os.path.isabs(endpoint["channelInstanceId"]):
            continue
        resolved = resolve_project(endpoint["channelInstanceId"], workspace)
        if not inside(resolved, workspace) or str(resolved) in seen:  # a hand-written `..`: not rehearsed
            continue
        seen.add(str(resolved))
        link = linked_through(endpoint["channelInstanceId"], resolved, workspace)
        if link is None and os.path.islink(resolved / SCORPIOX_DIR):
            link = resolved / SCORPIOX_DIR
        if link is not None:
            copied = sim_ws.root / link.relative_to(workspace)
            if not os.path.lexists(copied):
                behind = temp / "linked" / str(len(copies))
                behind.mkdir(parents=True)
                copied.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(behind, copied)
                copies[str(behind)] = str(link)
            found.append((None, sim_ws.root / resolved.relative_to(workspace)))
        elif holds_project(resolved):
            found.append((resolved, sim_ws.root / resolved.relative_to(workspace)))
    return found


def _oldest_run_s(sim_ws: Workspace) -> int | None:
    """The second before which no message can belong to a run the passes look up: the oldest
    run the copied ledger or store knows (its start, or its claim), less a day for clocks that
    disagree. A pass looks a message up only for such a run — by the ledger's stem, or by its
    key when the pass that sent it was killed. None when the ledger cannot be read: every read
    message is copied, and the pass names the fault."""
    try:
        ledger = scan_ledger(sim_ws.ledger, max_log_bytes=MAX_MAX_LOG_BYTES)
        claims = (read_store(sim_ws) or {"activeClaims": []})["activeClaims"]
    except InvalidDataError:
        return None
    times = [row["startedAtMs"] if row is group.start else row["terminalAtMs"]
             for group in (ledger.groups.values() if ledger is not None else ())
             for row in (group.start or group.terminal,) if row is not None]
    times += [claim["claimedAtMs"] for claim in claims]
    return (min(times) - DAY_MS) // 1000 if times else 2**62  # no run: no read message is looked up


#: a message's name: `[PP_]<seconds>_<nanoseconds>.json` (sent then); any other name is copied
_SENT = re.compile(r"(?:\d{2}_)?(\d{10,12})_\d{9}\.json")
DAY_MS = 86_400_000


def _home(project: Path | None, sim_project: Path, from_ms: int, temp: Path, copies: dict[str, str],
          oldest: int | None) -> Path | None:
    """`project`'s sessions (None: none) copied into `sim_project` (`_copy_sessions`), none of them
    live; the session the simulated agent runs in — None when `.scorpiox` or its `sessions` is a
    symbolic link: the agent refuses to run there, and the copy holds a link at its place to an
    empty folder of the copy, which the pass meets as it meets the real one."""
    linked = next((path for path in (project / SCORPIOX_DIR, ProjectLayout(project).sessions)
                   if os.path.islink(path)), None) if project is not None else None
    if project is not None and linked is not None:
        behind = temp / "linked" / f"home-{len(copies)}"
        behind.mkdir(parents=True)
        copied = sim_project / linked.relative_to(project)
        copied.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(behind, copied)
        copies[str(behind)] = str(linked)
        return None
    sessions = ProjectLayout(project).sessions if project is not None else None
    target = ProjectLayout(sim_project).sessions
    chosen = None  # the session the agent is live in now, else the newest: the simulated agent runs there
    if sessions is not None and sessions.is_dir() and not sessions.is_symlink():
        assert project is not None
        known = list_sessions(project)
        chosen = freshest_live(known) or (known[0] if known else None)
        _copy_sessions(sessions, target, temp, copies, oldest)
    target.mkdir(parents=True, exist_ok=True)
    for folder in target.iterdir():  # only the simulated agent is ever live
        stats = folder / "stats.json"
        if folder.is_dir() and not folder.is_symlink() and stats.is_file() and not stats.is_symlink():
            stats.unlink()
    infos = list_sessions(sim_project)
    session_dir = (target / chosen.id if chosen is not None and (target / chosen.id).is_dir() else infos[0].dir
                   if infos else target / f"{format_ms(from_ms, '%Y_%m_%d')}_simulated_agent")
    session_dir.mkdir(exist_ok=True)
    return session_dir


def _copy_sessions(source: Path, target: Path, temp: Path, copies: dict[str, str],
                   oldest: int | None, depth: int = 0) -> None:
    """The session folders as the pass reads them: folders and regular files up to
    `SESSION_FILE_CAP` (messages, keys, stats, timers) — of a session's read messages
    (`<session>/inbox/done/`), those sent from `oldest` on (`_oldest_run_s`; None: all), and at a
    session's top level none over `TOP_FILE_CAP` (a transcript: the passes read none, and the
    copy may be in memory); never a FIFO, a socket or a device. A symbolic link is never
    followed: the copy holds a link at its place to an empty folder of the copy, which the pass
    refuses as it refuses the real one (an inbox linked elsewhere fails its runs in the rehearsal
    too), and nothing outside is read or written."""
    target.mkdir(parents=True, exist_ok=True)
    read = source.name == "done" and source.parent.name == "inbox"  # a session's read messages
    cap = TOP_FILE_CAP if depth == 1 else SESSION_FILE_CAP
    for entry in os.scandir(source):
        if read and oldest is not None and (sent := _SENT.fullmatch(entry.name)) and int(sent.group(1)) < oldest:
            continue
        if entry.is_symlink():
            behind = temp / "linked" / f"session-{len(copies)}"
            behind.mkdir(parents=True)
            os.symlink(behind, target / entry.name)
            copies[str(behind)] = entry.path
            continue
        if entry.is_dir(follow_symlinks=False):
            _copy_sessions(Path(entry.path), target / entry.name, temp, copies, oldest, depth + 1)
        elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size <= cap:
            shutil.copy2(entry.path, target / entry.name, follow_symlinks=False)


def real_paths(event: dict[str, Any], copies: dict[str, str]) -> dict[str, Any]:
    """The event, its copies' paths rewritten in place as the project's own (a reason names the
    folder the user knows, never the throw-away copy; in place: the agent's read is added later)."""
    for key, value in event.items():
        if isinstance(value, str):
            for copy, original in sorted(copies.items(), key=lambda pair: -len(pair[0])):
                value = value.replace(copy, original)
            event[key] = value
    return event

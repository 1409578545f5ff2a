"""Where the agent's files live: project root, session selection, liveness, worktree copies,
and the read-only SCORPIOX configuration cascade (spec sessions.md)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .clock import SYSTEM_CLOCK, Clock
from .errors import NotFoundError, UsageError
from .fsio import open_regular
from .record import Factory, record
from .report import Reporter
from .timeparse import format_duration_ms

LIVE_WINDOW_MS = 10_000
_SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_DATE_PREFIX = re.compile(r"(\d{4})_(\d{2})_(\d{2})(?:_|$)")
_STATS_CAP = 4 * 1024 * 1024


# --- ids and project ---------------------------------------------------------------------------

def is_valid_session_id(session_id: str) -> bool:
    return bool(_SESSION_ID.fullmatch(session_id)) and ".." not in session_id and session_id != "."


def check_session_id(session_id: str) -> str:
    """A session id a user gave us: exit 2 unless it is a plain folder name (sessions.md §4)."""
    if not is_valid_session_id(session_id):
        raise UsageError(
            f"invalid session id {session_id!r}: use letters, digits, '_', '.', '-' "
            "(at most 128, no '..')"
        )
    return session_id


def _project_of_session_dir(session_dir: Path) -> Path | None:
    for parent in session_dir.parents:
        if parent.name == ".scorpiox":
            return parent.parent
    return None


def find_project(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
    session_given: bool = False,
) -> Path:
    """The project root (the folder holding `.scorpiox/`), canonical (sessions.md §2)."""
    for given, origin in ((explicit, "--project"), (environ.get("SXCTL_PROJECT") or None, "SXCTL_PROJECT")):
        if given:
            root = Path(os.path.realpath(given))
            if not (root / ".scorpiox").is_dir():
                raise NotFoundError(
                    f"no .scorpiox/ folder in {root} (from {origin})", code="project_not_found"
                )
            return root
    session_dir = environ.get("SX_SESSION_DIR")
    if session_dir and not session_given and not environ.get("SXCTL_SESSION"):
        of_session = _project_of_session_dir(Path(os.path.realpath(session_dir)))
        if of_session is not None and (of_session / ".scorpiox").is_dir():
            return of_session
    if cwd is None:
        try:
            here = os.getcwd()
        except FileNotFoundError:
            raise NotFoundError("the working folder no longer exists; cd to the project or pass --project DIR",
                                code="project_not_found") from None
    else:
        here = os.fspath(cwd)
    start = Path(os.path.realpath(here))
    for folder in (start, *start.parents):
        if (folder / ".scorpiox").is_dir():
            return folder
    raise NotFoundError(
        f"no .scorpiox/ folder found from {start} upward; pass --project DIR",
        code="project_not_found",
    )


def sessions_root(project: Path) -> Path:
    return project / ".scorpiox" / "sessions"


# --- liveness ----------------------------------------------------------------------------------

def read_stats(session_dir: Path) -> dict[str, Any] | None:
    """`stats.json` as an object, or None when missing or unreadable (state `unknown`)."""
    import json

    try:
        fd = open_regular(session_dir / "stats.json")
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(_STATS_CAP)
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    updated = data.get("updated_ms")
    if not isinstance(updated, int) or isinstance(updated, bool):
        return None
    return data


@record
class Liveness:
    state: str  # live | stale | stopped | unknown (sessions.md §5; `stopped`: README "Session states")
    updated_ms: int | None
    age_ms: int | None

    @property
    def skewed(self) -> bool:
        return self.age_ms is not None and self.age_ms < -LIVE_WINDOW_MS

    def describe(self) -> str:
        """`stats 0.8s old`, `stats 3h12m old`, `no stats.json`."""
        if self.age_ms is None:
            return "no readable stats.json"
        if self.skewed:
            return f"stats {format_duration_ms(self.age_ms)} in the future; clock skew?"
        return f"stats {format_duration_ms(self.age_ms)} old"


def stopped_cleanly(stats: dict[str, Any]) -> bool:
    """Whether the agent said, in its last `stats.json`, that it stopped cleanly: the reference
    agent's shutdown write carries `"sxctl": {"stopped": true}` (reference-agent.md §7)."""
    block = stats.get("sxctl")
    return isinstance(block, dict) and block.get("stopped") is True


def liveness_of(stats: dict[str, Any] | None, now_ms: int) -> Liveness:
    """`live` (stats at most 10 s old either way), `stopped` (the agent's last write says it
    stopped cleanly, however recent), `stale` (older: exited, frozen or rotated) or `unknown`."""
    if stats is None:
        return Liveness("unknown", None, None)
    updated = stats["updated_ms"]
    age = now_ms - updated
    if stopped_cleanly(stats):
        return Liveness("stopped", updated, age)
    return Liveness("live" if abs(age) <= LIVE_WINDOW_MS else "stale", updated, age)


# --- sessions ----------------------------------------------------------------------------------

@record
class SessionInfo:
    """One session folder as seen now."""

    id: str
    dir: Path
    stats: dict[str, Any] | None
    liveness: Liveness

    @property
    def state(self) -> str:
        return self.liveness.state


@record
class Session(SessionInfo):
    """The session a command acts on, and how it was chosen."""

    project: Path = Path(".")
    source: str = "flag"
    copies: WorktreeCopies | None = None
    #: what the choice left to say (two live agents: which one is used and why)
    warnings: list[str] = Factory(list)  # type: ignore[assignment]

    def worktree_copies(self) -> WorktreeCopies:
        if self.copies is None:
            self.copies = worktree_copies(self.project, self.id, self.dir, self.stats)
        return self.copies

    def to_json(self) -> dict[str, Any]:
        """The keys every session-scoped JSON document carries (sessions.md §3)."""
        return {"session": self.id, "session_dir": str(self.dir), "session_source": self.source}


def freshest_live(infos: list[SessionInfo]) -> SessionInfo | None:
    """The one rule for "the live session": the live folder whose stats.json is newest."""
    live = live_sessions(infos)
    return live[0] if live else None


def live_sessions(infos: list[SessionInfo]) -> list[SessionInfo]:
    """The live folders, the freshest stats.json first (the first is "the live session")."""
    live = [info for info in infos if info.state == "live"]
    return sorted(live, key=lambda info: info.liveness.updated_ms or 0, reverse=True)  # live has a time


def several_live_warning(infos: list[SessionInfo]) -> str | None:
    """Two or more agents live in one project: which session is used and why, or None. Each
    writes its own folder, so a message goes to one of them; the choice may change between
    commands as their stats.json writes overtake each other."""
    live = live_sessions(infos)
    if len(live) < 2:
        return None
    chosen, others = live[0], live[1:]
    return (f"{len(live)} agents are live in this project: using {chosen.id} (the freshest: "
            f"{chosen.liveness.describe()}); also live: "
            + ", ".join(f"{other.id} ({other.liveness.describe()})" for other in others)
            + "; pin one with --session ID")


def as_session(info: SessionInfo, project: Path, source: str) -> Session:
    """A listed session folder as the session a command acts on."""
    return Session(info.id, info.dir, info.stats, info.liveness, project=project, source=source)


def session_info(session_dir: Path, clock: Clock = SYSTEM_CLOCK) -> SessionInfo:
    stats = read_stats(session_dir)
    return SessionInfo(session_dir.name, session_dir, stats, liveness_of(stats, clock.now_ms()))


def list_sessions(project: Path, clock: Clock = SYSTEM_CLOCK) -> list[SessionInfo]:
    """Every valid session folder (real directories only), newest first (§3 rule 5 order)."""
    root = sessions_root(project)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    infos = [
        session_info(Path(entry.path), clock)
        for entry in entries
        if is_valid_session_id(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    infos.sort(key=_newest_key, reverse=True)
    return infos


def date_prefix(session_id: str) -> str | None:
    """`YYYY_MM_DD` when the id starts with one (the agent's naming), else None."""
    match = _DATE_PREFIX.match(session_id)
    return session_id[:10] if match else None


def _newest_key(info: SessionInfo) -> tuple:
    prefix = date_prefix(info.id)
    try:
        mtime = os.stat(info.dir).st_mtime_ns
    except OSError:
        mtime = 0
    return (prefix is not None, prefix or "", info.liveness.updated_ms or 0, mtime, info.id.encode())


def _explicit_session(
    project: Path, session_id: str, source: str, clock: Clock
) -> Session:
    check_session_id(session_id)
    folder = sessions_root(project) / session_id
    if os.path.islink(folder) or not folder.is_dir():
        raise NotFoundError(
            f"session {session_id} not found in {sessions_root(project)}", code="session_not_found"
        )
    return as_session(session_info(folder, clock), project, source)


def select_session(
    project: Path,
    session_id: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    project_explicit: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Session:
    """The session a command acts on, by the first rule that applies (sessions.md §3)."""
    report = report or Reporter()
    if session_id:
        return _explicit_session(project, session_id, "flag", clock)
    if environ.get("SXCTL_SESSION"):
        return _explicit_session(project, environ["SXCTL_SESSION"], "env:SXCTL_SESSION", clock)
    env_dir = environ.get("SX_SESSION_DIR")
    if env_dir:
        chosen = _session_from_env_dir(project, env_dir, project_explicit, clock, report)
        if chosen is not None:
            return chosen
    infos = list_sessions(project, clock)
    if not infos:
        raise NotFoundError(
            f"no sessions in {sessions_root(project)}", code="session_not_found"
        )
    best = freshest_live(infos)
    if best is not None:
        report.note(f"using session {best.id} (live, {best.liveness.describe()})")
        chosen = as_session(best, project, "live")
        several = several_live_warning(infos)
        if several is not None:
            report.warn(several)
            chosen.warnings.append(several)
        return chosen
    report.note(f"using session {infos[0].id} (newest folder; no live session)")
    return as_session(infos[0], project, "newest")


def _session_from_env_dir(
    project: Path, env_dir: str, project_explicit: bool, clock: Clock, report: Reporter
) -> Session | None:
    folder = Path(os.path.realpath(env_dir))
    implied = _project_of_session_dir(folder)
    if project_explicit and implied != project:
        report.detail(f"SX_SESSION_DIR={env_dir} belongs to another project; ignored")
        return None
    check_session_id(folder.name)
    if folder.parent.name != "sessions" or folder.parent.parent.name != ".scorpiox":
        # only ever a folder of <project>/.scorpiox/sessions/: the variable must not redirect writes
        raise UsageError(f"SX_SESSION_DIR={env_dir} is not a folder of <project>/.scorpiox/sessions/")
    if not folder.is_dir():
        raise NotFoundError(
            f"session folder {folder} (from SX_SESSION_DIR) not found", code="session_not_found"
        )
    info = session_info(folder, clock)
    if info.state != "live":
        others = [
            other.id
            for other in list_sessions(implied or project, clock)
            if other.state == "live" and other.id != info.id
        ]
        if others:
            why = "the agent stopped; another runs there" if info.state == "stopped" \
                else "the agent may have rotated"
            report.warn(
                f"session {info.id} (from SX_SESSION_DIR) is {info.state} "
                f"({info.liveness.describe()}) but {others[0]} is live; {why}"
            )
    return Session(
        info.id, info.dir, info.stats, info.liveness,
        project=implied or project, source="env:SX_SESSION_DIR",
    )


def warn_if_not_live(session: Session, report: Reporter) -> None:
    """Writes to a session nobody seems to read still happen, with a warning (sessions.md §3)."""
    if session.state == "stale":
        report.warn(
            f"session {session.id} is stale ({session.liveness.describe()}); "
            "the agent may have rotated to a new folder"
        )
    elif session.state == "stopped":  # said so by the agent itself: not a rotation
        report.warn(f"session {session.id} is stopped ({session.liveness.describe()}): no agent is running")
    elif session.state == "unknown":
        report.warn(f"session {session.id} has no readable stats.json; no agent may be reading it")


def check_rotation_after_write(session: Session, clock: Clock, report: Reporter) -> None:
    """After writing to a live session, warn when another folder became the freshest live one."""
    if session.state != "live":
        return
    freshest = freshest_live(list_sessions(session.project, clock))
    if freshest is not None and freshest.id != session.id:
        report.warn(
            f"possible rotation during write: {freshest.id} is now the live session, "
            f"not {session.id}"
        )


# --- worktree copies (sessions.md §7) -----------------------------------------------------------

@record
class WorktreeCopies:
    role: str  # worktree | mirror | none
    worktree_dir: Path | None
    mirror_dir: Path | None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "worktree_dir": str(self.worktree_dir) if self.worktree_dir else None,
            "mirror_dir": str(self.mirror_dir) if self.mirror_dir else None,
        }

    def labelled(self, selected: Path) -> list[tuple[str, Path]]:
        """(copy label, folder) pairs, the worktree copy first; `none` outside worktrees."""
        if self.role == "none":
            return [("none", selected)]
        pairs = [("worktree", self.worktree_dir), ("mirror", self.mirror_dir)]
        return [(label, folder) for label, folder in pairs if folder is not None]

    def primary(self, selected: Path) -> Path:
        """The copy the agent runs from: writes go here."""
        return self.worktree_dir if self.role != "none" and self.worktree_dir else selected


def _read_gitdir_file(dot_git: Path) -> Path | None:
    try:
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            gitdir = Path(line[len("gitdir:"):].strip())
            return gitdir if gitdir.is_absolute() else (dot_git.parent / gitdir)
    return None


def main_checkout_of(project: Path) -> Path | None:
    """The main checkout when `project` is a linked git worktree, else None (§7 rules 1–3)."""
    dot_git = project / ".git"
    if dot_git.is_dir() or not dot_git.exists():
        return None
    common: Path | None = None
    gitdir = _read_gitdir_file(dot_git)
    if gitdir is not None:
        try:
            rel = (gitdir / "commondir").read_text(encoding="utf-8").strip()
            common = Path(os.path.realpath(gitdir / rel))
        except OSError:
            common = None
    if common is None:
        common = _git_common_dir(project)
    if common is None or common.name != ".git":
        return None
    return common.parent


def _git_common_dir(project: Path) -> Path | None:
    import shutil  # here, not at the top: `inbox send` never needs it
    import subprocess

    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, "-C", str(project), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(os.path.realpath(out)) if out else None


def _linked_worktrees(main: Path) -> list[Path]:
    """Worktree roots registered in the main checkout (`.git/worktrees/*/gitdir`), read as
    files rather than by running `git worktree list`."""
    admin = main / ".git" / "worktrees"
    roots: list[Path] = []
    try:
        entries = list(os.scandir(admin))
    except OSError:
        return roots
    for entry in entries:
        try:
            target = Path((Path(entry.path) / "gitdir").read_text(encoding="utf-8").strip())
        except OSError:
            continue
        roots.append(target.parent)
    return roots


def worktree_copies(
    project: Path, session_id: str, selected: Path, stats: dict[str, Any] | None
) -> WorktreeCopies:
    """Which copy `selected` is, and where its twin lives."""
    main, linked = _checkout_facts(project)
    if main is not None:
        mirror = main / ".scorpiox" / "sessions" / session_id
        return WorktreeCopies("worktree", selected, mirror if mirror.is_dir() else None)
    candidates: list[Path] = []
    cwd = stats.get("cwd") if stats else None
    if isinstance(cwd, str) and os.path.isabs(cwd) and cwd != str(project):
        start = Path(cwd)
        for folder in (start, *start.parents):
            if (folder / ".scorpiox").is_dir():
                candidates.append(folder)
                break
    candidates.extend(linked)
    for root in candidates:
        if root == project:
            continue
        root = Path(os.path.realpath(root))
        if root == project or _checkout_facts(root)[0] is None:
            continue
        twin = root / ".scorpiox" / "sessions" / session_id
        if twin.is_dir():
            return WorktreeCopies("mirror", twin, selected)
    return WorktreeCopies("none", None, None)


_CHECKOUTS: dict[Path, tuple[float, Path | None, list[Path]]] = {}
_CHECKOUT_TTL_S = 1.0


def _checkout_facts(project: Path) -> tuple[Path | None, list[Path]]:
    """(its main checkout when `project` is a linked worktree, the worktrees linked to it when it
    is a main checkout): the same for every session of a listing, looked up once a second."""
    import time

    cached = _CHECKOUTS.get(project)
    if cached is not None and time.monotonic() - cached[0] < _CHECKOUT_TTL_S:
        return cached[1], cached[2]
    main = main_checkout_of(project)
    linked = _linked_worktrees(project) if main is None and (project / ".git").is_dir() else []
    _CHECKOUTS[project] = (time.monotonic(), main, linked)
    return main, linked


# --- configuration cascade (sessions.md §8) ------------------------------------------------------

BUILT_IN_CONFIG = {"SCORPIOX_INBOX": "1", "TOOL_SETCALLBACK": "1"}
_MAX_KEY = 64
_MAX_VALUE = 512


_ENV_FILES: dict[str, tuple[tuple, dict[str, str], list[str]]] = {}


def parse_env_file(path: Path, report: Reporter | None = None) -> dict[str, str]:
    """`KEY=VALUE` lines; comments, blanks and malformed lines are skipped (noted under -v).
    Parsed files are remembered by (inode, size, mtime), so an API loop re-reads only changes."""
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _ENV_FILES.get(str(path))
    if cached is None or cached[0] != stamp:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        cached = (stamp, *_parse_env_text(path, text))
        _ENV_FILES[str(path)] = cached
    if report is not None:
        for note in cached[2]:
            report.detail(note)
    return cached[1]


def _parse_env_text(path: Path, text: str) -> tuple[dict[str, str], list[str]]:
    values: dict[str, str] = {}
    notes: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or len(key) > _MAX_KEY or len(value) > _MAX_VALUE:
            notes.append(f"{path}:{number}: ignored line (no '=' or key/value too long)")
            continue
        values[key] = value
    return values, notes


@record
class ConfigValue:
    key: str
    value: str | None
    source: str
    chain: list[dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, "key": self.key, "value": self.value, "source": self.source,
            "approximate": True, "chain": self.chain,
        }


def _exe_dir(environ: Mapping[str, str]) -> Path | None:
    return _exe_dir_on(environ.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _exe_dir_on(search_path: str) -> Path | None:
    """The folder of the first `scorpiox`, then `sx`, on PATH (looked up once per PATH)."""
    import shutil

    for name in ("scorpiox", "sx"):
        found = shutil.which(name, path=search_path)
        if found:
            return Path(found).parent
    return None


def resolve_config(
    key: str,
    project: Path,
    *,
    environ: Mapping[str, str] = os.environ,
    home: Path | None = None,
    report: Reporter | None = None,
) -> ConfigValue:
    """The value SCORPIOX CODE would see for `key`, tier by tier (the last tier wins)."""
    home = home if home is not None else Path(environ.get("HOME") or os.path.expanduser("~"))
    exe_dir = _exe_dir(environ)
    file_tiers: list[Path] = []
    if exe_dir is not None:
        file_tiers.append(exe_dir / "scorpiox-env.txt")
    file_tiers += [
        home / ".claude" / "scorpiox-env.txt",
        project / ".claude" / "scorpiox-env.txt",
        project / ".scorpiox" / "scorpiox-env.txt",
    ]
    layers: list[tuple[str, dict[str, str]]] = [("default", dict(BUILT_IN_CONFIG))]
    layers += [(str(path), parse_env_file(path, report)) for path in file_tiers]
    profile = environ.get("ACTIVE_PROFILE")
    for _, values in layers:
        profile = values.get("ACTIVE_PROFILE", profile)
    if "ACTIVE_PROFILE" in environ:
        profile = environ["ACTIVE_PROFILE"]
    if profile and len(profile) <= 64 and not any(c in profile for c in "/\\") and ".." not in profile:
        bases = [project / ".scorpiox" / "scorpiox-env", home / ".claude" / "scorpiox-env"]
        if exe_dir is not None:
            bases.append(exe_dir / "scorpiox-env")
        for base in bases:
            candidate = base / f"{profile}.txt"
            if candidate.is_file():
                layers.append((str(candidate), parse_env_file(candidate, report)))
                break
    layers.append(("env", {key: environ[key]} if key in environ else {}))
    chain = [{"source": source, "value": values[key]} for source, values in layers if key in values]
    if not chain:
        return ConfigValue(key, None, "unset", [])
    return ConfigValue(key, chain[-1]["value"], chain[-1]["source"], chain)


def resolve_target_session(project: Path, conversation: str, *, clock: Clock = SYSTEM_CLOCK) -> Session:
    """A scheduler target resolved at dispatch time: `live` = the freshest live session now,
    anything else = that session id (sessions.md §9: never cache a session across runs)."""
    if conversation != "live":
        return _explicit_session(project, conversation, "flag", clock)
    best = freshest_live(list_sessions(project, clock))
    if best is None:
        raise NotFoundError(f"no live session in {sessions_root(project)}", code="session_not_found")
    return as_session(best, project, "live")

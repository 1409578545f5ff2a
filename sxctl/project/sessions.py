"""The session folders of a project and which one a command acts on (sessions.md §3, §5): each
folder's liveness from its `stats.json`, and the rules that pick "the" session."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, InvalidDataError, NotFoundError, UsageError
from ..fsio import read_bytes_capped
from ..jsondata import strict_loads
from ..record import Factory, record
from ..report import Reporter
from ..timeparse import format_duration_ms
from .layout import ProjectLayout, check_session_id, is_valid_session_id
from .worktrees import WorktreeCopies, worktree_copies

LIVE_WINDOW_MS = 10_000
_DATE_PREFIX = re.compile(r"(\d{4})_(\d{2})_(\d{2})(?:_|$)")
_STATS_CAP = 4 * 1024 * 1024


# --- liveness ----------------------------------------------------------------------------------

def read_stats(session_dir: Path) -> dict[str, Any] | None:
    """`stats.json` as an object, or None when missing or unreadable (state `unknown`)."""
    try:
        # a key twice is a file that lies: which one the agent meant is unknown
        data = strict_loads(read_bytes_capped(session_dir / "stats.json", _STATS_CAP))
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
    """Whether an agent is live in a session, judged from the age of its `stats.json`."""

    state: str  # live | stale | stopped | unknown (sessions.md §5; `stopped`: docs/guides/observe.md)
    updated_ms: int | None
    age_ms: int | None
    #: why a recent heartbeat is not a live agent here (its process is gone, another project's)
    not_here: str | None = None

    @property
    def skewed(self) -> bool:
        return self.age_ms is not None and self.age_ms < -LIVE_WINDOW_MS

    def describe(self) -> str:
        """`stats 0.8s old`, `stats 3h12m old`, `no stats.json`."""
        if self.age_ms is None:
            return "no readable stats.json"
        if self.skewed:
            return f"stats {format_duration_ms(self.age_ms)} in the future; clock skew?"
        if self.not_here is not None:
            return f"stats {format_duration_ms(self.age_ms)} old, but {self.not_here}"
        return f"stats {format_duration_ms(self.age_ms)} old"


def stopped_cleanly(stats: dict[str, Any]) -> bool:
    """Whether the agent said, in its last `stats.json`, that it stopped cleanly: the reference
    agent's shutdown write carries `"sxctl": {"stopped": true}` (reference-agent.md §7)."""
    block = stats.get("sxctl")
    return isinstance(block, dict) and block.get("stopped") is True


def liveness_of(stats: dict[str, Any] | None, now_ms: int, session_dir: Path | None = None) -> Liveness:
    """`live` (stats at most 10 s old either way), `stopped` (the agent's last write says it
    stopped cleanly, however recent), `stale` (older: exited, frozen or rotated; or recent, but
    its agent's process is gone or it works in another project than `session_dir`'s: whose.py)
    or `unknown`."""
    if stats is None:
        return Liveness("unknown", None, None)
    updated = stats["updated_ms"]
    age = now_ms - updated
    if stopped_cleanly(stats):
        return Liveness("stopped", updated, age)
    if abs(age) > LIVE_WINDOW_MS:
        return Liveness("stale", updated, age)
    from .whose import not_an_agent_here  # a recent heartbeat only

    why = not_an_agent_here(stats, session_dir)
    return Liveness("live" if why is None else "stale", updated, age, why)


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
    #: the pinned session `--follow` left for this one (the agent went on here)
    followed_from: str | None = None

    def worktree_copies(self) -> WorktreeCopies:
        if self.copies is None:
            self.copies = worktree_copies(self.project, self.id, self.dir, self.stats)
        return self.copies

    def to_json(self) -> dict[str, Any]:
        """The keys every session-scoped JSON document carries (sessions.md §3)."""
        doc = {"session": self.id, "session_dir": str(self.dir), "session_source": self.source}
        if self.followed_from is not None:
            doc["followed_from"] = self.followed_from
        return doc


#: those keys in a document about a project that has no session folder yet (`status`, `next`)
NO_SESSION: dict[str, Any] = {"session": None, "session_dir": None, "session_source": None}


def freshest_live(infos: list[SessionInfo]) -> SessionInfo | None:
    """The one rule for "the live session": the live folder whose stats.json is newest."""
    live = live_sessions(infos)
    return live[0] if live else None


def newer_live(session_id: str, infos: list[SessionInfo]) -> list[SessionInfo]:
    """The live sessions an agent went on in after `session_id` (a restart, a rotation), the
    freshest first: another date-prefixed id whose date is not older. A rotation happens within
    a day and the id words are random, so the same date counts as newer."""
    own_date = date_prefix(session_id) or ""
    return [info for info in live_sessions(infos)
            if info.id != session_id and (date_prefix(info.id) or "") >= own_date and date_prefix(info.id)]


def last_seen(infos: list[SessionInfo]) -> int | None:
    """When an agent of these sessions was last seen: the newest `stats.json` write (its
    heartbeat, whatever the state now), None when none was ever written."""
    times = [info.liveness.updated_ms for info in infos if info.liveness.updated_ms is not None]
    return max(times) if times else None


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
    return SessionInfo(session_dir.name, session_dir, stats, liveness_of(stats, clock.now_ms(), session_dir))


def list_sessions(project: Path, clock: Clock = SYSTEM_CLOCK, limit: int | None = None) -> list[SessionInfo]:
    """Every valid session folder (real directories only), newest first (sessions.md §3 rule 5 order).

    With `limit`, the `limit` newest, reading only the folders that can be among them: the order
    starts with the date in a folder's name, so only the folders whose date is at least that of
    the `limit`-th newest name are read (those of one day are ordered by their stats.json)."""
    root = ProjectLayout(project).sessions
    try:
        entries = [entry for entry in os.scandir(root)
                   if is_valid_session_id(entry.name) and entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
    except NotADirectoryError:  # a file (or a link to one) where the sessions folder should be
        raise InvalidDataError(root, "not a folder (.scorpiox/sessions holds one folder per session)") from None
    if limit is not None and len(entries) > limit:
        keys = sorted((_name_key(entry.name) for entry in entries), reverse=True)
        entries = [entry for entry in entries if _name_key(entry.name) >= keys[limit - 1]]
    infos = [session_info(Path(entry.path), clock) for entry in entries]
    infos.sort(key=_newest_key, reverse=True)
    return infos[:limit] if limit is not None else infos


def _name_key(session_id: str) -> tuple[bool, str]:
    """The part of the newest-first order that a folder's name decides."""
    prefix = date_prefix(session_id)
    return prefix is not None, prefix or ""


def date_prefix(session_id: str) -> str | None:
    """`YYYY_MM_DD` when the id starts with one (the agent's naming), else None: a month and a
    day that are on a calendar (`9999_99_99_x` would sort first and become "the newest")."""
    match = _DATE_PREFIX.match(session_id)
    if not match or not (1 <= int(match.group(2)) <= 12 and 1 <= int(match.group(3)) <= 31):
        return None
    return session_id[:10]


def _newest_key(info: SessionInfo) -> tuple:
    try:
        mtime = os.stat(info.dir).st_mtime_ns
    except OSError:
        mtime = 0
    return (*_name_key(info.id), info.liveness.updated_ms or 0, mtime, info.id.encode())


def _did_you_mean(project: Path, session_id: str) -> str | None:
    """"did you mean …?" naming the session ids close to a mistyped one, or None."""
    import difflib  # only a mistyped id pays for it

    try:
        names = [entry.name for entry in os.scandir(ProjectLayout(project).sessions)
                 if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    close = difflib.get_close_matches(session_id, names, n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? (`sxctl session list` shows them)" if close else None


def _explicit_session(
    project: Path, session_id: str, source: str, clock: Clock
) -> Session:
    check_session_id(session_id)
    folder = ProjectLayout(project).session(session_id)
    if os.path.islink(folder):  # named as what it is: "not found … did you mean <itself>?" was a riddle
        raise InvalidDataError(folder, "a session folder that is a symbolic link (sxctl never follows one)")
    if not folder.is_dir():
        missing = NotFoundError(
            f"session {session_id} not found in {ProjectLayout(project).sessions}", code=ErrorCode.SESSION_NOT_FOUND
        )
        hint = _did_you_mean(project, session_id)
        if hint:
            missing.extra["hint"] = hint
        raise missing
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
    if session_id is not None:  # `--session ""` (an unset variable in a script) is refused, never "any session"
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
            f"no sessions in {ProjectLayout(project).sessions}", code=ErrorCode.SESSION_NOT_FOUND
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
    layout = ProjectLayout.of_session_dir(folder)
    implied = layout.root if layout is not None else None
    if project_explicit and implied != project:
        report.detail(f"SX_SESSION_DIR={env_dir} belongs to another project; ignored")
        return None
    check_session_id(folder.name)
    if not ProjectLayout.is_session_dir(folder):
        # only ever a folder of <project>/.scorpiox/sessions/: the variable must not redirect writes
        raise UsageError(f"SX_SESSION_DIR={env_dir} is not a folder of <project>/.scorpiox/sessions/")
    if not folder.is_dir():
        raise NotFoundError(
            f"session folder {folder} (from SX_SESSION_DIR) not found", code=ErrorCode.SESSION_NOT_FOUND
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
    if session.liveness.not_here is not None:  # a recent heartbeat, but its agent is gone or elsewhere
        report.warn(f"session {session.id} is stale ({session.liveness.describe()}): no agent reads it")
    elif session.state == "stale":
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
    if session.state != "live" or not report.heard:
        return
    freshest = freshest_live(list_sessions(session.project, clock))
    if freshest is not None and freshest.id != session.id:
        report.warn(
            f"possible rotation during write: {freshest.id} is now the live session, "
            f"not {session.id}"
        )


def resolve_target_session(project: Path, conversation: str, *, clock: Clock = SYSTEM_CLOCK) -> Session:
    """A scheduler target resolved at dispatch time: `live` = the freshest live session now,
    anything else = that session id (sessions.md §9: never cache a session across runs)."""
    if conversation != "live":
        return _explicit_session(project, conversation, "flag", clock)
    best = freshest_live(list_sessions(project, clock))
    if best is None:
        raise NotFoundError(f"no live session in {ProjectLayout(project).sessions}", code=ErrorCode.SESSION_NOT_FOUND)
    return as_session(best, project, "live")

"""A delivery pinned to a session the agent left (issue 40): after a restart the agent works in a
new session folder, and a script that pinned the old one (`--session`, SXCTL_SESSION,
SX_SESSION_DIR) must not be told its message or timer went where an agent reads it."""

from __future__ import annotations

import os

from ..clock import Clock
from ..errors import ConflictError, ErrorCode
from ..report import Reporter
from .sessions import Session, SessionInfo, as_session, list_sessions, newer_live

#: how a command was pinned to a session (sessions.md §3 rules 1-3)
PINNED_SOURCES = ("flag", "env:SXCTL_SESSION", "env:SX_SESSION_DIR")


def follow_or_refuse(session: Session, what: str, *, follow: bool, clock: Clock, report: Reporter,
                     fix: str | None = None) -> Session:
    """The session a delivery (`what`: a message, a timer) pinned to `session` goes to. A pinned
    session whose agent is gone (`stale`, `stopped`), while a newer one is live (`newer_live`),
    is refused (exit 4 `session_superseded`, naming the live session and `fix`, by default
    `--follow`) or, with `follow`, left for the live one, saying so. With no newer live session,
    or a session no agent was ever seen in (`unknown`: no stats.json), it stands (a write to it
    warns, as before). A stats.json that is there but unreadable was written by an agent once: it
    counts as gone (its state `unknown` says nothing an agent reads it now)."""
    if session.source not in PINNED_SOURCES or not agent_gone(session):
        return session
    newer = newer_live(session.id, list_sessions(session.project, clock))
    if not newer:
        return session
    live = newer[0]
    if follow and len(newer) == 1:
        report.note(f"session {session.id} is {session.state} and a newer session, {live.id}, is live: "
                    f"{what} goes there (--follow)")
        chosen = as_session(live, session.project, "follow")
        chosen.followed_from = session.id
        return chosen
    if len(newer) > 1:
        fix = (f"{len(newer)} newer sessions are live ({', '.join(info.id for info in newer)}): "
               "pin one with --session ID")
    elif fix is None:
        fix = f"add --follow to use {live.id} instead, or pin --session {live.id}"
    raise ConflictError(
        f"session {session.id} is {session.state} ({session.liveness.describe()}) and a newer session, {live.id}, "
        f"is live: {what} in {session.id} would never reach the agent; {fix}",
        code=ErrorCode.SESSION_SUPERSEDED, session=session.id, live_session=live.id,
    )


def agent_gone(info: SessionInfo) -> bool:
    """Whether an agent once read this session and no longer does: `stale`, `stopped`, or a
    stats.json that is there but unreadable (`unknown` with the file: an agent wrote it once).
    A folder without stats.json never had an agent seen in it."""
    if info.state in ("stale", "stopped"):
        return True
    return info.state == "unknown" and os.path.lexists(info.dir / "stats.json")


def warn_if_left_behind(chosen: Session, clock: Clock, report: Reporter) -> Session:
    """A pinned session the agent left for a newer live one: every command on it says so (a view
    showed its empty timers and `stopped` agent with no word of the live session)."""
    if chosen.source in PINNED_SOURCES and agent_gone(chosen):
        newer = newer_live(chosen.id, list_sessions(chosen.project, clock))
        if newer:
            warning = (f"session {chosen.id} is {chosen.state} and the agent works in a newer session, "
                       f"{newer[0].id}: this is {chosen.id}; pin --session {newer[0].id} or drop the pin")
            report.warn(warning)
            chosen.warnings.append(warning)
    return chosen

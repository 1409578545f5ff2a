"""Stranded sessions: what a restart or a rotation left where no agent reads it. The one
definition `status`, `doctor`, `next` and `watch` all ask."""

from __future__ import annotations

from typing import Any

from ..callbacks.table import doc_slots, is_active, view_table
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import SxctlError
from ..inbox.folder import deliverable_count, inbox_dirs
from ..project import Session, SessionInfo, as_session, freshest_live, list_sessions
from ..record import record


@record
class Stranded:
    """A session of the project that is not live, holding pending messages or active timers,
    while another session is live: nobody will read them where they are."""

    id: str
    state: str  # stale | stopped | unknown
    pending: int
    timers: int
    live: str  # the live session (the freshest), where they belong now

    def fixes(self) -> list[str]:
        """The commands that move them into the live session (a session id is a plain word,
        sessions.md §4, so it needs no quoting; one that starts with '-' is joined with '=')."""
        source = f"--from={self.id}" if self.id.startswith("-") else f"--from {self.id}"
        return ([f"sxctl inbox forward {source}"] if self.pending else []) \
            + ([f"sxctl callbacks move {source}"] if self.timers else [])

    def describe(self) -> str:
        held = " and ".join(part for part in (
            f"{self.pending} pending message(s)" if self.pending else "",
            f"{self.timers} active timer(s)" if self.timers else "") if part)
        return (f"session {self.id} ({self.state}) holds {held} that no agent will read: "
                f"the agent now runs in {self.live}")

    def to_json(self) -> dict[str, Any]:
        return {"session": self.id, "state": self.state, "pending": self.pending, "timers": self.timers,
                "live": self.live, "fix": self.fixes(), "message": self.describe()}


def stranded_sessions(project, clock: Clock = SYSTEM_CLOCK, infos: list[SessionInfo] | None = None
                      ) -> list[Stranded]:
    """The one definition of "stranded" (status, doctor, next and watch all ask here): every
    session that is not live and holds pending messages or active timers, while another session
    is live. A timer whose message the live session's table also has (active or retired) was
    carried over by a rotation (sessions.md §9) and is not counted. Newest session first."""
    infos = list_sessions(project, clock) if infos is None else infos
    live = freshest_live(infos)
    if live is None:  # no agent anywhere: nothing is read, and no other place to move it to
        return []
    carried = {slot.get("message") for slot in _table_slots(as_session(live, project, "live"))}
    found = []
    for info in infos:
        if info.state == "live":
            continue
        session = as_session(info, project, "flag")
        try:
            pending = sum(deliverable_count(inbox.path) for inbox in inbox_dirs(session))
        except OSError:  # an inbox this user cannot list (doctor's permissions check names it)
            pending = 0
        timers = sum(1 for slot in _table_slots(session) if is_active(slot) and slot["message"] not in carried)
        if pending or timers:
            found.append(Stranded(info.id, info.state, pending, timers, live.id))
    return found


def _table_slots(session: Session) -> list[dict[str, Any]]:
    """The slots of a session's timer table (both copies in a worktree); none when the file is
    missing or unreadable (`status` and `doctor` report an unreadable table on their own)."""
    try:
        view = view_table(session)
    except (SxctlError, OSError):
        return []
    return list(doc_slots(view.winner.doc).values()) if view.winner is not None else []


def stranded_problem(entry: Stranded) -> dict[str, Any]:
    """A stranded session as a `status` problem: what, and the commands that fix it."""
    fixes = " and ".join(f"`{fix}`" for fix in entry.fixes())
    return {"code": "stranded_session", "message": f"{entry.describe()}; fix: {fixes}",
            "session": entry.id, "pending": entry.pending, "timers": entry.timers, "fix": entry.fixes()}

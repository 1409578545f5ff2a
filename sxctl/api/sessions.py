"""Session and configuration use cases: which sessions exist, which one a command would use,
and the configuration value the agent most likely sees (spec sessions.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..callbacks.table import read_table
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, NotFoundError, SxctlError, UsageError
from ..inbox.folder import inbox_dirs, message_names, primary_inbox
from ..inbox.sending import inbox_switch
from ..project import as_session, resolve_config, sessions, several_live_warning
from ..record import Factory, record
from ..report import Reporter
from .scope import find_project, find_session, reporter

if TYPE_CHECKING:
    from ..project import ConfigValue, Session


def _callbacks_summary(folder: Path) -> tuple[int | None, bool, str | None]:
    """(active timers, file exists, reason when the file is invalid)."""
    try:
        found = read_table(folder)
    except SxctlError as error:
        return None, True, error.message
    if found is None:
        return None, False, None
    return len(found.active_slots()), True, None


def session_row(session: Session) -> dict[str, Any]:
    """One session as `session list` shows it: state, age, model, timers, pending messages."""
    active, exists, invalid = _callbacks_summary(session.dir)
    row = {
        "id": session.id, "dir": str(session.dir), "state": session.state,
        "updated_ms": session.liveness.updated_ms, "age_ms": session.liveness.age_ms,
        "model": (session.stats or {}).get("model"), "callbacks_active": active,
        "callbacks_file": exists, "inbox_pending": sum(len(message_names(i.path)) for i in inbox_dirs(session)),
        "copy": session.worktree_copies().role,
    }
    if invalid:
        row["callbacks_invalid"] = invalid
    if session.liveness.not_here is not None:  # a recent heartbeat that is not a live agent here
        row["stale_reason"] = session.liveness.not_here
    return row


@record
class SessionList:
    """`session list`: every session folder of the project, newest first."""

    project: Path
    rows: list[dict[str, Any]]
    #: two agents live in one project: which one commands use, and why
    warnings: list[str] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "project": str(self.project), "sessions": self.rows, "warnings": self.warnings}


def list_sessions(*, project: str | os.PathLike | None = None, session: str | None = None,
                  clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None, limit: int | None = None) -> SessionList:
    """Every session folder with its state (live, stale, stopped, unknown), timers and pending
    messages, newest first; with `limit`, the `limit` newest, reading only the folders that can be
    among them (the date in a folder's name comes first in the order)."""
    if limit is not None and limit < 1:
        raise UsageError(f"limit must be at least 1, not {limit}")
    root = find_project(project, session=session)
    infos = sessions.list_sessions(root, clock, limit)
    several = several_live_warning(infos)
    if several is not None:
        reporter(report).warn(several)
    return SessionList(root, [session_row(as_session(info, root, "newest")) for info in infos],
                       [several] if several is not None else [])


@record
class SessionDetail:
    """`session show`: one session's state, paths, worktree copies, timers and inbox."""

    session: Session
    row: dict[str, Any]
    inbox_dir: Path
    inbox_gate: str

    @property
    def busy(self) -> bool:
        stats = self.session.stats or {}
        return bool((stats.get("bash") or {}).get("running") or (stats.get("bgtasks") or {}).get("running"))

    def to_json(self) -> dict[str, Any]:
        chosen = self.session
        return {
            "ok": True, **chosen.to_json(), "project": str(chosen.project), "state": chosen.state,
            "updated_ms": chosen.liveness.updated_ms, "age_ms": chosen.liveness.age_ms,
            **({"stale_reason": self.row["stale_reason"]} if "stale_reason" in self.row else {}),
            "worktree": chosen.worktree_copies().to_json(), "callbacks_active": self.row["callbacks_active"],
            "callbacks_file": self.row["callbacks_file"], "inbox_pending": self.row["inbox_pending"],
            "inbox_dir": str(self.inbox_dir), "inbox_gate": self.inbox_gate, "busy_hint": self.busy,
            "stats": chosen.stats,
        }


def show_session(
    session: str | Session | None = None,
    *,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> SessionDetail:
    """Session `session` (default: the one a command would use) in detail."""
    chosen = find_session(session, project=project, clock=clock, report=report)
    return SessionDetail(chosen, session_row(chosen), primary_inbox(chosen).path,
                         inbox_switch(chosen, reporter(report)))


@record
class SessionChoice:
    """`session which`: the session a command would use, and why."""

    session: Session

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.session.to_json(), "state": self.session.state,
                "warnings": self.session.warnings}


def which_session(
    session: str | None = None,
    *,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> SessionChoice:
    """The session a command would act on (sessions.md §2-§3)."""
    return SessionChoice(find_session(session, project=project, clock=clock, report=report))


def get_config(key: str, *, project: str | os.PathLike | None = None, session: str | None = None,
               report: Reporter | None = None) -> ConfigValue:
    """The value of `key` through the agent's configuration cascade, and where each tier set it
    (approximate: the agent's own environment is invisible). NotFoundError (exit 3) if unset."""
    if not key:
        raise UsageError("the configuration key is empty: give one, e.g. SCORPIOX_INBOX")
    resolved = resolve_config(key, find_project(project, session=session), report=report)
    for link in resolved.chain:
        reporter(report).detail(f"{key}={link['value']} from {link['source']}")
    if resolved.value is None:  # a lookup that finds nothing: exit 3, as for a stem or a job
        raise NotFoundError(f"{key} is not set in any tier", code=ErrorCode.KEY_NOT_SET)
    return resolved


def session_names(*, project: str | os.PathLike | None = None) -> list[str]:
    """The ids of the project's sessions, for shell completion (no notes, nothing validated beyond
    what `session list` lists)."""
    return [info.id for info in sessions.list_sessions(find_project(project))]

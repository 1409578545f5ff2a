"""The views across every surface: `status` (one screen), `next` (one time-ordered preview),
`watch` (changes as they happen) and `metrics` (the same numbers for Prometheus)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NotFoundError, SxctlError
from ..observe import (
    CONTENT_TYPE,
    Family,
    collect,
    diff,
    exposition,
    merged_next,
    snapshot,
    status,
    stranded_sessions,
    watch_events,
    write_metrics_file,
)
from ..project import NO_SESSION
from ..record import Factory, record
from ..report import Reporter
from ..timeparse import display_zone, displayed_in, zone_label
from .jobs import ledger_ceiling
from .scope import find_session, find_workspace

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace
    from ..observe import Snapshot, Stranded
    from ..observe.timeline import Row
    from ..project import Session


def _scope(session, project, workspace, clock: Clock, report: Reporter | None, *, session_optional: bool = False
           ) -> tuple[Session | None, Workspace]:
    """The session and workspace a view looks at (neither is ever created); with
    `session_optional`, a project without a session folder yet gives None."""
    try:
        chosen: Session | None = find_session(session, project=project, clock=clock, report=report)
    except NotFoundError as error:
        if not session_optional or error.code != "session_not_found" or session:
            raise
        chosen = None
    return chosen, find_workspace(workspace, project=project, session=session)


@record
class StatusView:
    """`status`: liveness, timers, inbox, cron jobs and runs, and the problems found."""

    session: Session | None
    workspace: Workspace
    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.document


def project_status(*, session=None, project=None, workspace=None, clock: Clock = SYSTEM_CLOCK,
                   report: Reporter | None = None) -> StatusView:
    """Everything the agent will do and what looks wrong, in one document; no file in a
    session's inbox/done/ is opened, however long its history."""
    chosen, ws = _scope(session, project, workspace, clock, report, session_optional=True)
    return StatusView(chosen, ws, status(chosen, ws, clock=clock))


@record
class Metrics:
    """`metrics`: the project's state in the Prometheus text exposition format 0.0.4 (`text`,
    served as `CONTENT_TYPE`), the numbers of `status` and of the whole ledger's runs."""

    workspace: Workspace
    families: list[Family]
    text: str
    content_type: str = CONTENT_TYPE

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "content_type": self.content_type,
                "metrics": [family.to_json() for family in self.families]}


def project_metrics(*, session=None, project=None, workspace=None, max_log_bytes: int | None = None,
                    clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> Metrics:
    """The project's state for Prometheus: jobs by state, the last pass's age per host, the
    ledger's runs by status and receipt, pending and stranded messages, overdue jobs, limits hit,
    the agent's liveness; each number by the rule `status` uses (they agree)."""
    chosen, ws = _scope(session, project, workspace, clock, report, session_optional=True)
    ceiling = ledger_ceiling(max_log_bytes)  # the verdict on the ledger and its counts: one ceiling
    families = collect(status(chosen, ws, clock=clock, max_log_bytes=ceiling), ws,
                       chosen.project if chosen is not None else ws.root, clock, ceiling)
    return Metrics(ws, families, exposition(families))


def write_metrics(path, *, session=None, project=None, workspace=None, max_log_bytes: int | None = None,
                  clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> bool:
    """`cron tick --metrics-file`: replace the textfile `path` with `project_metrics`'s text
    (atomically; a symlink, FIFO or device there is refused). Never raises: a failure is a
    warning on `report`, and False."""
    try:
        write_metrics_file(path, project_metrics(session=session, project=project, workspace=workspace,
                                                 max_log_bytes=max_log_bytes, clock=clock).text)
    except (SxctlError, OSError) as error:
        reason = error.message if isinstance(error, SxctlError) else (error.strerror or str(error))
        if report is not None:
            report.warn(f"metrics file {path} not written: {reason}")
        return False
    return True


@record
class Upcoming:
    """`next`: pending messages, timer fires and cron fires, time-ordered, shown in `zone`; and
    what will not happen because it is stranded in a session no agent reads (`stranded`).
    `session` is None in a project with no session folder yet: its cron fires only."""

    session: Session | None
    zone: Any
    now_ms: int
    rows: list[Row]  # by `source`: InboxRow, CallbackRow or CronRow (sxctl.observe.timeline; docs/api.md)
    stranded: list[Stranded] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        where = self.session.to_json() if self.session is not None else NO_SESSION
        return {"ok": True, **where, "now_ms": self.now_ms, "display_tz": zone_label(self.zone),
                "rows": self.rows, "stranded": [entry.to_json() for entry in self.stranded]}


def upcoming(*, count: int = 10, tz: str | None = None, session=None, project=None, workspace=None,
             clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> Upcoming:
    """The next `count` things that will happen; timer fires assume an idle agent. A project
    with no session folder yet has no inbox and no timers: its cron fires are listed (as
    `status` counts them), with a note."""
    chosen, ws = _scope(session, project, workspace, clock, report, session_optional=True)
    zone = display_zone(tz)
    with displayed_in(zone):  # the times in a row's note too
        rows = merged_next(chosen, ws, count, zone, clock=clock)
    if chosen is None:
        if report is not None:
            report.note("no session folder yet: cron fires only (no inbox, no timers until the agent runs here)")
        return Upcoming(None, zone, clock.now_ms(), rows)
    return Upcoming(chosen, zone, clock.now_ms(), rows, stranded_sessions(chosen.project, clock))


@record
class Watch:
    """`watch`: a session and workspace being watched. `events()` yields JSON Lines events;
    `look()` / `changes()` / `status()` / `upcoming()` serve a live view."""

    session: Session
    workspace: Workspace
    clock: Clock

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.session.to_json(), "workspace": str(self.workspace.root)}

    def events(self) -> Iterator[list[dict[str, Any]]]:
        """The events of each look at the files, forever (an empty list when nothing changed,
        so that the caller keeps its own deadline); follows the agent to a new session."""
        return watch_events(self.session, self.workspace, clock=self.clock)

    def look(self, previous: Snapshot | None = None) -> Snapshot:
        return snapshot(self.session, self.workspace, self.clock, previous)

    def changes(self, before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
        return diff(before, after, self.clock.now_ms())

    def status(self) -> dict[str, Any]:
        return status(self.session, self.workspace, clock=self.clock)

    def upcoming(self, count: int) -> list[Row]:
        return merged_next(self.session, self.workspace, count, display_zone(), clock=self.clock)


def watch(*, session=None, project=None, workspace=None, clock: Clock = SYSTEM_CLOCK,
          report: Reporter | None = None) -> Watch:
    """Start watching the session a command would use and its workspace."""
    chosen, ws = _scope(session, project, workspace, clock, report)
    assert chosen is not None
    return Watch(chosen, ws, clock)

"""Where a use case acts: the project, session and workspace found the way the CLI finds them
(explicit arguments, then the SXCTL_* / SX_SESSION_DIR environment, then the working folder),
and what every use case takes besides: a `Clock` (`SYSTEM_CLOCK`), a `Reporter` for its notes,
and the `--fault-inject` test hook."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import faults
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NotFoundError
from ..project import Session, layout, select_session, warn_if_left_behind
from ..report import Reporter

if TYPE_CHECKING:  # every command loads this module; only the cron commands need a workspace
    from ..cron.store.workspace import Workspace


def find_project(project: str | os.PathLike | None = None, *, session: object = None,
                 environ: Mapping[str, str] = os.environ) -> Path:
    """The project root: `project`, then SXCTL_PROJECT / SX_SESSION_DIR, then the working folder."""
    return layout.find_project(str(project) if project is not None else None, environ=environ,
                               session_given=bool(session))


def find_session(
    session: str | Session | None = None,
    *,
    project: str | os.PathLike | None = None,
    environ: Mapping[str, str] = os.environ,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Session:
    """The session a command would act on (sessions.md §2-§3)."""
    if isinstance(session, Session):
        return session
    root = find_project(project, session=session, environ=environ)
    chosen = select_session(root, session, environ=environ, clock=clock, report=report,
                            project_explicit=bool(project or environ.get("SXCTL_PROJECT")))
    return warn_if_left_behind(chosen, clock, reporter(report))


def find_workspace(workspace: str | os.PathLike | Workspace | None = None, *,
                   project: str | os.PathLike | None = None, session: object = None,
                   environ: Mapping[str, str] = os.environ) -> Workspace:
    """`workspace`, then SXCTL_WORKSPACE, then the project root (cron-store.md §1)."""
    from ..cron.store.workspace import Workspace, locate_workspace  # see TYPE_CHECKING above

    if isinstance(workspace, Workspace):
        return workspace
    return locate_workspace(str(workspace) if workspace is not None else None, environ,
                            lambda: find_project(project, session=session, environ=environ))


def target_project(workspace: Workspace, project: str | os.PathLike | None = None, *, session: object = None) -> Path:
    """The project that jobs without an explicit target send to: the project found, else the
    workspace folder itself."""
    try:
        return find_project(project, session=session)
    except NotFoundError:
        return workspace.root


def reporter(report: Reporter | None) -> Reporter:
    return report if report is not None else Reporter()


def milliseconds(seconds: float) -> int:
    """The core counts milliseconds; the API takes seconds, as Python's own time functions do."""
    return round(seconds * 1000)


#: the points of the hidden `--fault-inject POINT` test hook (see `arm_fault`)
FAULT_POINTS = faults.POINTS


def arm_fault(point: str | None) -> None:
    """The test hook behind `--fault-inject POINT`: this process exits 99 at the named point of a
    write (None disarms it)."""
    faults.arm(point)

"""The public Python API: the same operations as the CLI, for your own tooling.

    from sxctl import send_message, wait_for_message, set_timer, add_job, job_runs

Every function finds the project and session the way the CLI does (explicit arguments, then the
SXCTL_* / SX_SESSION_DIR environment, then discovery from the working folder), raises an
`SxctlError` subclass carrying the CLI's exit code on failure, and returns plain objects. The CLI
calls these functions too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .clock import SYSTEM_CLOCK, Clock
from .report import Reporter

__all__ = [
    "add_job", "find_session", "find_workspace", "job_runs", "send_message", "set_timer", "wait_for_message",
]

if TYPE_CHECKING:  # importing these eagerly would slow `import sxctl`
    from .callbacks import WriteResult
    from .cron.jobs import JobSpec
    from .cron.store import Workspace
    from .inbox import SendResult, WaitOutcome
    from .project import Session


def find_session(
    session: str | None = None,
    *,
    project: str | os.PathLike | None = None,
    environ: Mapping[str, str] = os.environ,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Session:
    """The session a command would act on (sessions.md §2-§3)."""
    from .project import find_project, select_session

    root = find_project(str(project) if project is not None else None, environ=environ,
                        session_given=bool(session))
    return select_session(root, session, environ=environ, clock=clock, report=report,
                          project_explicit=bool(project or environ.get("SXCTL_PROJECT")))


def _session(session: str | Session | None, project, clock: Clock, report: Reporter | None) -> Session:
    from .project import Session

    if isinstance(session, Session):
        return session
    return find_session(session, project=project, clock=clock, report=report)


def send_message(
    text: str | None,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    mode: str = "auto",
    image: str | os.PathLike | None = None,
    priority: int | None = None,
    stem: str | None = None,
    key: str | None = None,
    wait: float | None = None,
    soft_wait: bool = True,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> SendResult:
    """Drop a message into the session's inbox; with `wait` (seconds, 0 = forever), block until
    it is consumed (raising WaitTimeoutError, exit 6, if it is still pending then)."""
    from .inbox import SendRequest, check_key, check_stem, load_image, send

    request = SendRequest(
        text=text, mode=mode, image=load_image(Path(image)) if image is not None else None,
        stem=check_stem(stem) if stem is not None else None, priority=priority,
        key=check_key(key) if key is not None else None, wait_s=wait, no_wait=not soft_wait, follow=follow,
    )
    return send(_session(session, project, clock, report), request, clock=clock, report=report)


def wait_for_message(
    stem: str,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    timeout: float = 60,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    on_event=None,
) -> WaitOutcome:
    """Wait until message `stem` leaves the inbox; the outcome's `state` says where it went
    (`consumed`, or `pending` at the deadline, `retracted`, `missing`). Raises nothing for those:
    call `outcome.raise_unless_consumed({})` to get the CLI's exit-code errors."""
    from .inbox import inbox_dirs, wait_for

    chosen = _session(session, project, clock, report)
    dirs = inbox_dirs(chosen)
    inbox = next((d for d in dirs if d.state_of(stem) != "missing"), dirs[0])
    return wait_for(chosen, inbox, stem, timeout, follow=follow, clock=clock, report=report, on_event=on_event)


def set_timer(
    message: str,
    every: float,
    *,
    repeat: int = 20,
    slot: int | None = None,
    replace: bool = False,
    first_in: float | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    expect_rev: int | None = None,
    verify: float | None = 1.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> WriteResult:
    """Arm one of the agent's 8 timers: `message` every `every` seconds, `repeat` times (-1 =
    forever). `result.outcome` is the slot object written."""
    from .callbacks import WriteOptions
    from .callbacks import set_timer as arm

    options = WriteOptions(expect_rev=expect_rev, verify_s=verify, clock=clock, report=report or Reporter())
    return arm(_session(session, project, clock, report), message, round(every * 1000), repeat=repeat, slot_id=slot,
               replace=replace, first_in_ms=None if first_in is None else round(first_in * 1000), options=options)


def find_workspace(workspace: str | os.PathLike | None = None, *, project: str | os.PathLike | None = None,
                   environ: Mapping[str, str] = os.environ) -> Workspace:
    """`workspace`, then SXCTL_WORKSPACE, then the project root (cron-store.md §1)."""
    from .cron.store import find_workspace as locate
    from .project import find_project

    return locate(str(workspace) if workspace is not None else None, environ,
                  lambda: find_project(str(project) if project is not None else None, environ=environ))


def add_job(
    name: str,
    *,
    payload: str | None = None,
    text: str | None = None,
    cron: str | None = None,
    every: str | None = None,
    at: str | None = None,
    in_: str | None = None,
    tz: str | None = None,
    workspace: str | os.PathLike | Workspace | None = None,
    project: str | os.PathLike | None = None,
    agent: str | None = None,
    paused: bool = False,
    max_jobs: int = 100,
    lock_wait: float = 10.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    spec: JobSpec | None = None,
) -> dict[str, Any]:
    """Add a job to the comis store (created if missing): one of `cron`/`every`/`at`/`in_`
    (DURATION or TIME strings, as on the command line) and a payload kind
    (`agent-turn`, `delivery`, `heartbeat-event`). Returns comis's `{jobId, name, schedule}`.
    `spec` (a `sxctl.cron.jobs.JobSpec`) gives every other flag of `cron add`."""
    from .cron.jobs import JobSpec
    from .cron.jobs import add_job as add
    from .cron.schedule import ScheduleInput
    from .cron.store import Workspace, default_agent_id, mutate_store
    from .errors import NotFoundError
    from .project import find_project

    ws = workspace if isinstance(workspace, Workspace) else find_workspace(workspace, project=project)
    spec = spec or JobSpec(schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz), payload=payload,
                           text=text, paused=paused)
    try:
        target_project = str(find_project(str(project) if project is not None else None))
    except NotFoundError:
        target_project = str(ws.root)
    notes: list[str] = []

    def change(store, now):
        return add(store, name, spec, agent_id=default_agent_id(store, agent, os.environ),
                   default_project=target_project, now_ms=now, max_jobs=max_jobs, notes=notes)

    result = mutate_store(ws, change, clock=clock, report=report, create=True, lock_wait_s=lock_wait).outcome
    for note in notes:
        (report or Reporter()).note(note)
    if spec.payload == "delivery" and not os.environ.get("SXCTL_DELIVER_CMD"):
        (report or Reporter()).warn(
            f"{name} is a delivery job and SXCTL_DELIVER_CMD is not set here: `cron tick` fails it "
            "(a one-shot for good) unless the environment of the pass sets it")
    return result


def job_runs(
    name: str | None = None,
    *,
    limit: int = 20,
    workspace: str | os.PathLike | Workspace | None = None,
    project: str | os.PathLike | None = None,
    exact: bool = False,
    max_log_bytes: int = 2_000_000,
) -> list[dict[str, Any]]:
    """The newest `limit` runs of job `name` (all jobs when None), projected as in
    cron-ledger.md §4; only the tail of a large ledger is read."""
    from .cron.ledger import recent_runs
    from .cron.store import Workspace, find_job, read_store

    ws = workspace if isinstance(workspace, Workspace) else find_workspace(workspace, project=project)
    job_id = None
    if name is not None:
        store = read_store(ws) or {"jobs": []}
        job_id = find_job(store, name)["id"]
    return recent_runs(ws.ledger, limit, job_id=job_id, max_log_bytes=max_log_bytes, exact=exact)

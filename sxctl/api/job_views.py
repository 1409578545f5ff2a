"""Cron store use cases that read the jobs: list, show, and preview their next fires (spec
cron-store.md), and the labels a table of jobs shows."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..collector import collector_paused
from ..cron.policy.file import read_policy
from ..cron.policy.keys import workspace_view
from ..cron.run.failures import failed_one_shots_of
from ..cron.store.file import default_agent_id, find_job
from ..cron.timeline.previews import job_previews

# describe_schedule, job_kind_label, schedule_computable, target_label: how a table of jobs labels a job
from ..cron.timeline.schedule import ScheduleInput, describe_schedule, resolve_schedule, schedule_computable  # noqa: F401
from ..cron.timeline.views import (  # noqa: F401
    adhoc_timeline,
    job_kind_label,
    job_row,
    target_label,
    timeline,
)
from ..errors import UsageError
from ..record import Factory, record
from ..timeparse import display_zone, displayed_in, parse_time_in_zone_ms, zone_label
from .jobs import ledger_ceiling, store_or_empty
from .scope import find_workspace, target_project

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace
    from ..cron.timeline.fate import Preview

# --- list / show / next ---------------------------------------------------------------------------

@record
class JobList:
    """`cron list`: every job with its state, next run and target (no payload text)."""

    workspace: Workspace
    agent_id: str
    rows: list[dict[str, Any]]
    zone: Any
    workspace_policy: dict[str, Any] = Factory(dict)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "agentId": self.agent_id,
                "display_tz": zone_label(self.zone), "workspacePolicy": self.workspace_policy, "jobs": self.rows}


def list_jobs(*, tz: str | None = None, workspace=None, project=None, session: str | None = None,
              agent: str | None = None, clock: Clock = SYSTEM_CLOCK) -> JobList:
    """Every job of the store; times are for display in `tz` (`display_zone`: default local). A
    job's next run is the next one the pass will make (`sxctl.cron.timeline.fate`)."""
    ws = find_workspace(workspace, project=project, session=session)
    store = store_or_empty(ws)
    zone = display_zone(tz)
    with collector_paused():  # a Job, a preview and a row of each job: nothing cyclic
        with displayed_in(zone):  # the times in a job's note too
            policy, previews = _counted(ws, store, read_policy(ws), target_project(ws, project, session=session),
                                        clock)
        failed = failed_one_shots_of(ws, store, ledger_ceiling())
        rows = [job_row(job, policy, workspace=ws.root, failure=failed.get(job["id"]),
                        preview=previews.get(job["id"])) for job in store["jobs"]]
    return JobList(ws, default_agent_id(store, agent, os.environ), rows, zone, workspace_view(policy))


@record
class JobDetail:
    """`cron show`: one job in full, with its state and next run (its times shown in `zone`)."""

    row: dict[str, Any]
    zone: Any

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.row, "display_tz": zone_label(self.zone)}


def show_job(name: str, *, workspace=None, project=None, session: str | None = None,
             clock: Clock = SYSTEM_CLOCK) -> JobDetail:
    """Job `name` in full (NotFoundError, exit 3, if there is none)."""
    ws = find_workspace(workspace, project=project, session=session)
    store = store_or_empty(ws)
    job = find_job(store, name)
    counted, previews = _counted(ws, {**store, "jobs": [job]}, read_policy(ws),
                                 target_project(ws, project, session=session), clock)
    failure = failed_one_shots_of(ws, {**store, "jobs": [job]}, ledger_ceiling()).get(job["id"])
    return JobDetail({**job_row(job, counted, workspace=ws.root, full=True, failure=failure,
                                preview=previews.get(job["id"])), "workspacePolicy": workspace_view(counted)},
                     display_zone())



def _counted(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], default_project,
             clock: Clock) -> tuple[dict[str, Any], dict[str, Preview]]:
    """The policy as the views show it — each job's runs as the pass counts them
    (`sxctl.cron.timeline.previews.counted_usages`) — and each scheduled job's next run as the pass will
    decide it (`sxctl.cron.timeline.previews.job_previews`)."""
    found = job_previews(ws, store, policy, default_project, clock, 1, max_log_bytes=ledger_ceiling())
    entries = dict(policy["jobs"])
    for job_id, usage in found.usages.items():
        entries[job_id] = {**entries[job_id], "runs": usage.runs}
    return {**policy, "jobs": entries}, found.previews


@record
class FireList:
    """`cron next`: upcoming fires, time-ordered, in `zone`."""

    zone_name: str
    zone: Any
    now_ms: int
    fires: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "tz": self.zone_name, "display_tz": zone_label(self.zone), "now_ms": self.now_ms,
                "fires": self.fires}


def next_fires(
    name: str | None = None,
    *,
    count: int = 5,
    tz: str | None = None,
    after: str | None = None,
    include_paused: bool = False,
    cron: str | None = None,
    every: str | None = None,
    anchor: str | None = None,
    at: str | None = None,
    fold: str | None = None,
    workspace=None,
    project=None,
    session: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FireList:
    """The next `count` fires of the store's jobs (or job `name`), or of an ad-hoc schedule
    (`cron`/`every`+`anchor`/`at`; no store needed), after `after` (a TIME; default now)."""
    now = clock.now_ms()
    bound = now if after is None else parse_time_in_zone_ms(after, tz, now)
    if bound < 0:
        raise UsageError(f"--from {after!r} is before 1970-01-01T00:00Z, where the times of a schedule start")
    adhoc = ScheduleInput(cron=cron, every=every, at=at, tz=tz, fold=fold, anchor=anchor)
    if adhoc.given:
        if name is not None:
            raise UsageError("give a job NAME or an ad-hoc schedule, not both")
        schedule = resolve_schedule(adhoc, min(now, bound) - 1 if at is None else -1)  # comis's errors first
        zone = display_zone(tz)  # an ad-hoc --cron is read in --tz, else UTC; it is shown in the display zone
        fires = adhoc_timeline(schedule, bound, count, zone, now)
        zone_name = tz or (schedule.get("tz") if cron else None)
    else:
        zone = display_zone(tz)
        ws = find_workspace(workspace, project=project, session=session)
        store = store_or_empty(ws)
        only = find_job(store, name)["id"] if name is not None else None
        policy = read_policy(ws)
        start = None if after is None else bound  # --from: the fires from then on; else overdue ones too
        with displayed_in(zone):  # the times in a fire's note too
            found = job_previews(ws, store, policy, target_project(ws, project, session=session), clock, count,
                                 after=start, max_log_bytes=ledger_ceiling(), merged=True, only=only)
        fires = timeline(store, now, count, zone, name=name, include_paused=include_paused,
                         previews=found.previews, policy=policy, after=start)
        zone_name = tz
    return FireList(zone_name or str(zone), zone, now, fires)


def job_names(*, workspace=None, project=None, session: str | None = None) -> list[str]:
    """The names of the store's jobs, for shell completion (the workspace found as every cron
    command finds it)."""
    jobs = store_or_empty(find_workspace(workspace, project=project, session=session))["jobs"]
    return [job["name"] for job in jobs if isinstance(job, dict) and isinstance(job.get("name"), str)]

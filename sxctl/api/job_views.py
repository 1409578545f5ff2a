"""Cron store use cases that read the jobs: list, show, and preview their next fires (spec
cron-store.md), and the labels a table of jobs shows."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.admission import hold_state
from ..cron.ledger import scan_ledger
from ..cron.limits import job_history, limit_usage
from ..cron.policy import read_policy
from ..cron.run_failures import failed_one_shots_of

# describe_schedule, job_kind_label, schedule_computable, target_label: how a table of jobs labels a job
from ..cron.schedule import ScheduleInput, describe_schedule, resolve_schedule  # noqa: F401
from ..cron.store import default_agent_id, find_job
from ..cron.views import (  # noqa: F401
    adhoc_timeline,
    job_kind_label,
    job_row,
    kept_zones,
    schedule_computable,
    target_label,
    timeline,
)
from ..errors import InvalidDataError, UsageError
from ..record import record
from ..timeparse import parse_time_in_zone_ms
from .jobs import display_zone, ledger_ceiling, store_or_empty
from .scope import find_workspace, target_project

if TYPE_CHECKING:
    from ..cron.workspace import Workspace

# --- list / show / next ---------------------------------------------------------------------------

@record
class JobList:
    """`cron list`: every job with its state, next run and target (no payload text)."""

    workspace: Workspace
    agent_id: str
    rows: list[dict[str, Any]]
    zone: Any

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "agentId": self.agent_id, "jobs": self.rows}


def list_jobs(*, tz: str | None = None, workspace=None, project=None, session: str | None = None,
              agent: str | None = None) -> JobList:
    """Every job of the store; times are for display in `tz` (default: local)."""
    ws = find_workspace(workspace, project=project, session=session)
    store = store_or_empty(ws)
    zone = display_zone(tz)
    policy = _counted(ws, store, read_policy(ws), target_project(ws, project, session=session))
    failed = _failed_one_shots(ws, store)
    return JobList(ws, default_agent_id(store, agent, os.environ),
                   [job_row(job, policy, workspace=ws.root, failure=failed.get(job["id"])) for job in store["jobs"]],
                   zone)


@record
class JobDetail:
    """`cron show`: one job in full, with its state and next run."""

    row: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.row}


def show_job(name: str, *, workspace=None, project=None, session: str | None = None) -> JobDetail:
    """Job `name` in full (NotFoundError, exit 3, if there is none)."""
    ws = find_workspace(workspace, project=project, session=session)
    store = store_or_empty(ws)
    job = find_job(store, name)
    counted = _counted(ws, {**store, "jobs": [job]}, read_policy(ws), target_project(ws, project, session=session))
    failure = _failed_one_shots(ws, {**store, "jobs": [job]}).get(job["id"])
    return JobDetail(job_row(job, counted, workspace=ws.root, full=True, failure=failure))


def _failed_one_shots(ws: Workspace, store: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Finished one-shots whose run did not succeed (`sxctl.cron.views.failed_one_shots`); the
    ledger is read only when there is a finished one-shot, and an invalid one (`cron validate`
    names it) leaves them `done`."""
    return failed_one_shots_of(ws, store, ledger_ceiling())


def _counted(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], default_project,
             clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """The policy as the views show it: each job's runs as the pass counts them
    (`sxctl.cron.limits.limit_usage`) — a claim left by a killed pass that dispatched counts
    before the next pass settles it, and a job with --max-runs or --max-runs-per-day shows what
    the ledger proves when the policy file says less. An invalid ledger (`cron validate` names
    it; the pass refuses it) leaves the counts of the policy file."""
    claimed = {claim["jobId"] for claim in store["activeClaims"]}
    jobs = [job for job in store["jobs"] if (entry := policy["jobs"].get(job["id"]))
            and (job["id"] in claimed or entry.get("maxRuns") or entry.get("maxRunsPerDay"))]
    if not jobs:
        return policy
    try:
        ledger = scan_ledger(ws.ledger, max_log_bytes=ledger_ceiling())
    except InvalidDataError:
        return policy
    history = job_history(ledger, {job["id"] for job in jobs}) if ledger is not None else None
    entries = dict(policy["jobs"])
    for job in jobs:
        usage = limit_usage(job, entries[job["id"]], claims=store["activeClaims"], ledger=ledger,
                            project=default_project, clock=clock, workspace=ws.root, unread=False, history=history)
        entries[job["id"]] = {**entries[job["id"]], "runs": usage.runs}
    return {**policy, "jobs": entries}


@record
class FireList:
    """`cron next`: upcoming fires, time-ordered, in `zone`."""

    zone_name: str
    zone: Any
    now_ms: int
    fires: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "tz": self.zone_name, "now_ms": self.now_ms, "fires": self.fires}


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
    bound = now if after is None else parse_time_in_zone_ms(after, tz)
    if bound < 0:
        raise UsageError(f"--from {after!r} is before 1970-01-01T00:00Z, where the times of a schedule start")
    adhoc = ScheduleInput(cron=cron, every=every, at=at, tz=tz, fold=fold, anchor=anchor)
    if adhoc.given:
        if name is not None:
            raise UsageError("give a job NAME or an ad-hoc schedule, not both")
        schedule = resolve_schedule(adhoc, min(now, bound) - 1 if at is None else -1)
        zone = display_zone(tz if cron is None or tz else "UTC")
        fires = adhoc_timeline(schedule, bound, count, zone, now)
        zone_name = tz or (schedule.get("tz") if cron else None)
    else:
        zone = display_zone(tz)
        ws = find_workspace(workspace, project=project, session=session)
        store = store_or_empty(ws)
        if name is not None:
            find_job(store, name)
        zones = None if tz is not None else kept_zones(store, read_policy(ws))  # a job's own --tz
        fires = timeline(store, bound, count, zone, name=name, include_paused=include_paused, zones=zones)
        _mark_held(ws, store, fires, target_project(ws, project, session=session), clock)
        zone_name = tz
    return FireList(zone_name or str(zone), zone, now, fires)


def _mark_held(ws: Workspace, store: dict[str, Any], fires: list[dict[str, Any]], default_project,
               clock: Clock) -> None:
    """Each fire of a store job says whether the pass holds it for want of a live agent
    (`waiting`: the pass's own rule, `sxctl.cron.admission.hold_state`, with the pass's default
    `--to live`), so `cron next` never promises a run the pass will not make."""
    for fire in fires:
        fire["waiting"] = None
    overdue = [fire for fire in fires if fire["overdue"]]
    if not overdue:
        return
    policy = read_policy(ws)
    jobs = {job["id"]: job for job in store["jobs"]}
    now = clock.now_ms()
    for fire in overdue:
        job = jobs[fire["jobId"]]
        fire["waiting"] = hold_state(job, policy["jobs"].get(job["id"], {}), now, project=default_project, to="live",
                                     clock=clock, workspace=ws.root)




def job_names(*, workspace=None, project=None, session: str | None = None) -> list[str]:
    """The names of the store's jobs, for shell completion (the workspace found as every cron
    command finds it)."""
    jobs = store_or_empty(find_workspace(workspace, project=project, session=session))["jobs"]
    return [job["name"] for job in jobs if isinstance(job, dict) and isinstance(job.get("name"), str)]

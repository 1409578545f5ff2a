"""Cron store use cases: add, change, list and preview the comis store's jobs; read their runs,
validate the store and ledger, wake the agent (spec cron-store.md, cron-ledger.md)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import UsageError
from ..record import Factory, record
from ..report import Reporter
from .scope import find_workspace, reporter, target_project

if TYPE_CHECKING:
    from ..cron.jobs import JobSpec
    from ..cron.policy import PolicyOptions
    from ..cron.views import Problem
    from ..cron.workspace import Workspace

def ledger_ceiling(max_log_bytes: int | None = None, environ: Mapping[str, str] = os.environ) -> int:
    """The ledger's byte ceiling: `max_log_bytes`, then SXCTL_MAX_LOG_BYTES, then 2,000,000."""
    from ..cron.ledger import DEFAULT_MAX_LOG_BYTES, MAX_MAX_LOG_BYTES

    value = max_log_bytes
    if value is None:
        env = environ.get("SXCTL_MAX_LOG_BYTES")
        if env:
            if not env.isdigit():
                raise UsageError(f"invalid SXCTL_MAX_LOG_BYTES {env!r}: a number of bytes")
            value = int(env)
    value = DEFAULT_MAX_LOG_BYTES if value is None else value
    if not 1 <= value <= MAX_MAX_LOG_BYTES:
        raise UsageError(f"--max-log-bytes must be between 1 and {MAX_MAX_LOG_BYTES}")
    return value


def display_zone(tz: str | None):
    """The zone times are shown in: `tz`, else the machine's local zone (a real zone, DST and all)."""
    from ..timeparse import load_zone, local_zone

    return local_zone() if tz is None else load_zone(tz)


def _store(ws: Workspace) -> dict[str, Any]:
    from ..cron.store import read_store

    store = read_store(ws)
    return store if store is not None else {"jobs": [], "activeClaims": []}


# --- init / add / update / pause / remove ------------------------------------------------------

@record
class WorkspaceInit:
    """`cron init`: what was created (nothing that existed is overwritten)."""

    workspace: Workspace
    created: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "created": self.created}


def init_workspace(workspace=None, *, project=None, session=None, environ: Mapping[str, str] = os.environ,
                   report: Reporter | None = None) -> WorkspaceInit:
    """Create .scheduler/ (0700), the lock sentinels, an empty store and an empty ledger."""
    from ..cron.store import init_workspace as create
    from ..cron.store import refuse_if_daemon_owns, refuse_if_reset_pending

    ws = find_workspace(workspace, project=project, session=session)
    refuse_if_daemon_owns(ws, environ, reporter(report))
    refuse_if_reset_pending(ws)
    return WorkspaceInit(ws, create(ws))


@record
class JobChange:
    """`cron add/update/pause/resume/remove`: comis's result object for the change."""

    workspace: Workspace
    outcome: dict[str, Any]
    notes: list[str] = Factory(list)  # type: ignore[assignment]
    show_notes: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.outcome, **({"notes": self.notes} if self.show_notes and self.notes else {})}


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
    workspace=None,
    project=None,
    session: str | None = None,
    agent: str | None = None,
    paused: bool = False,
    max_jobs: int = 100,
    lock_wait: float = 10.0,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    spec: JobSpec | None = None,
    policy: PolicyOptions | None = None,
) -> JobChange:
    """Add a job to the comis store (created if missing): one of `cron`/`every`/`at`/`in_`
    (DURATION or TIME strings, as on the command line) and a payload kind (`agent-turn`,
    `delivery`, `heartbeat-event`); `outcome` is comis's `{jobId, name, schedule}`.
    `spec` (a `sxctl.cron.jobs.JobSpec`) gives every other flag of `cron add`; `policy` (a
    `sxctl.cron.policy.PolicyOptions`) sxctl's own settings: hold, catch-up, limits, lifetime."""
    from ..cron.jobs import JobSpec
    from ..cron.jobs import add_job as add
    from ..cron.schedule import ScheduleInput
    from ..cron.store import default_agent_id
    from ..cron.transaction import job_change, mutate_store

    ws = find_workspace(workspace, project=project, session=session)
    spec = spec or JobSpec(schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz), payload=payload,
                           text=text, paused=paused)
    if policy is not None:
        spec = dataclasses.replace(spec, policy=policy)
    default_project = str(target_project(ws, project, session=session))
    notes: list[str] = []
    warnings: list[str] = []

    def change(store, now):
        return add(store, name, spec, agent_id=default_agent_id(store, agent, os.environ),
                   default_project=default_project, now_ms=now, workspace=ws.root, max_jobs=max_jobs, notes=notes,
                   warnings=warnings)

    result = mutate_store(ws, change, clock=clock, report=report, create=True, lock_wait_s=lock_wait,
                          policy_change=job_change(name, spec)).outcome
    for note in notes:
        reporter(report).note(note)
    for warning in warnings:
        reporter(report).warn(f"{name}: {warning}")
    if spec.payload == "delivery" and not os.environ.get("SXCTL_DELIVER_CMD"):
        reporter(report).warn(
            f"{name} is a delivery job and SXCTL_DELIVER_CMD is not set here: `cron tick` fails it "
            "(a one-shot for good) unless the environment of the pass sets it")
    return JobChange(ws, result, notes)


def update_job(name: str, spec: JobSpec | None = None, *, text: str | None = None, cron: str | None = None,
               every: str | None = None, at: str | None = None, in_: str | None = None, tz: str | None = None,
               policy: PolicyOptions | None = None, workspace=None, project=None, session: str | None = None,
               lock_wait: float = 10.0, clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Change job `name`: a new schedule (`cron`/`every`/`at`/`in_`, `tz`) replaces the schedule,
    `text` the message; `spec` (a `JobSpec`) gives every other flag of `cron update`.
    `outcome` is `{jobName, updated}`, `notes` what was kept or implied."""
    from ..cron.jobs import JobSpec
    from ..cron.jobs import update_job as update
    from ..cron.schedule import ScheduleInput
    from ..cron.transaction import job_change, mutate_store

    ws = find_workspace(workspace, project=project, session=session)
    spec = spec or JobSpec(schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz), text=text)
    if policy is not None:
        spec = dataclasses.replace(spec, policy=policy)
    default_project = str(target_project(ws, project, session=session))
    notes: list[str] = []
    warnings: list[str] = []
    result = mutate_store(
        ws, lambda store, now: update(store, name, spec, default_project=default_project, now_ms=now,
                                      report=reporter(report), workspace=ws.root, notes=notes, warnings=warnings),
        clock=clock, report=report, lock_wait_s=lock_wait,
        policy_change=job_change(name, spec, resumed=spec.resumed, notes=notes),
    ).outcome
    for note in notes:
        reporter(report).note(note)
    for warning in warnings:
        reporter(report).warn(f"{result['jobName']}: {warning}")
    return JobChange(ws, result, notes, show_notes=True)


def pause_job(name: str, paused: bool = True, *, workspace=None, project=None, session: str | None = None,
              lock_wait: float = 10.0, clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Pause job `name` (its next run time and error counter are kept), or resume it
    (`paused=False`; a passed run time is due at the next pass, under the job's policy)."""
    from ..cron.jobs import set_job_paused
    from ..cron.transaction import job_change, mutate_store

    ws = find_workspace(workspace, project=project, session=session)
    from ..cron.jobs import JobSpec

    result = mutate_store(ws, lambda store, now: set_job_paused(store, name, paused),
                          clock=clock, report=report, lock_wait_s=lock_wait,
                          policy_change=None if paused else job_change(name, JobSpec(), resumed=True)).outcome
    return JobChange(ws, result)


def remove_job(name: str, *, workspace=None, project=None, session: str | None = None, lock_wait: float = 10.0,
               clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Remove job `name` from the store (its runs stay in the ledger)."""
    from ..cron.jobs import remove_job as remove
    from ..cron.transaction import mutate_store

    ws = find_workspace(workspace, project=project, session=session)
    result = mutate_store(ws, lambda store, now: remove(store, name),
                          clock=clock, report=report, lock_wait_s=lock_wait).outcome
    return JobChange(ws, result)


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
    from ..cron.policy import read_policy
    from ..cron.store import default_agent_id
    from ..cron.views import job_row

    ws = find_workspace(workspace, project=project, session=session)
    store = _store(ws)
    zone = display_zone(tz)
    policy = _counted(ws, store, read_policy(ws), target_project(ws, project, session=session))
    return JobList(ws, default_agent_id(store, agent, os.environ),
                   [job_row(job, policy, workspace=ws.root) for job in store["jobs"]], zone)


@record
class JobDetail:
    """`cron show`: one job in full, with its state and next run."""

    row: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.row}


def show_job(name: str, *, workspace=None, project=None, session: str | None = None) -> JobDetail:
    """Job `name` in full (NotFoundError, exit 3, if there is none)."""
    from ..cron.policy import read_policy
    from ..cron.store import find_job
    from ..cron.views import job_row

    ws = find_workspace(workspace, project=project, session=session)
    store = _store(ws)
    job = find_job(store, name)
    counted = _counted(ws, {**store, "jobs": [job]}, read_policy(ws), target_project(ws, project, session=session))
    return JobDetail(job_row(job, counted, workspace=ws.root, full=True))


def _counted(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], default_project,
             clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """The policy as the views show it: each job's runs as the pass counts them
    (`sxctl.cron.limits.limit_usage`) — a claim left by a killed pass that dispatched counts
    before the next pass settles it, and a job with --max-runs or --max-runs-per-day shows what
    the ledger proves when the policy file says less. An invalid ledger (`cron validate` names
    it; the pass refuses it) leaves the counts of the policy file."""
    from ..cron.ledger import scan_ledger
    from ..cron.limits import job_history, limit_usage
    from ..errors import InvalidDataError

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
    from ..cron.schedule import ScheduleInput, resolve_schedule
    from ..cron.views import adhoc_timeline, timeline
    from ..timeparse import parse_time_in_zone_ms

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
        from ..cron.store import find_job

        zone = display_zone(tz)
        ws = find_workspace(workspace, project=project, session=session)
        store = _store(ws)
        if name is not None:
            find_job(store, name)
        fires = timeline(store, bound, count, zone, name=name, include_paused=include_paused)
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
    from ..cron.admission import hold_state
    from ..cron.policy import read_policy

    policy = read_policy(ws)
    jobs = {job["id"]: job for job in store["jobs"]}
    now = clock.now_ms()
    for fire in overdue:
        job = jobs[fire["jobId"]]
        fire["waiting"] = hold_state(job, policy["jobs"].get(job["id"], {}), now, project=default_project, to="live",
                                     clock=clock, workspace=ws.root)


# --- status / runs / validate / wake ---------------------------------------------------------------

@record
class CronStatus:
    """`cron status`: offline evidence about the workspace (cron-store.md §8)."""

    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.document


def cron_status(*, max_log_bytes: int | None = None, workspace=None, project=None, session: str | None = None,
                environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK) -> CronStatus:
    """Files and digests, locks, daemon ownership, claims and problems, read without locking."""
    from ..cron.views import workspace_status

    ws = find_workspace(workspace, project=project, session=session)
    return CronStatus(workspace_status(ws, environ, clock.now_ms(), ledger_ceiling(max_log_bytes, environ)))


@record
class RunList:
    """`cron runs`: executions newest first, projected as in cron-ledger.md §4, each with its
    receipt (`consumption`: did the agent read what it dispatched?); with a job name, the
    occurrences its policy skipped too."""

    name: str | None
    job_id: str | None
    limit: int
    exact: bool
    runs: list[dict[str, Any]]
    job_names: dict[str, str]
    skipped: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "jobName": self.name, "jobId": self.job_id, "limit": self.limit, "exact": self.exact,
                "runs": self.runs, "skipped": self.skipped}


def job_runs(
    name: str | None = None,
    *,
    limit: int = 20,
    exact: bool = False,
    evidence: bool = False,
    max_log_bytes: int | None = None,
    workspace=None,
    project=None,
    session: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> RunList:
    """The newest `limit` runs of job `name` (all jobs when None); only the tail of a large
    ledger is read (`exact` scans it all). Every inbox-dispatch run carries its `consumption`
    (`read`, `pending`, `retracted`, `lost`). With `evidence`, each `unknown` inbox-dispatch run
    says where its message is now (found through its idempotency key)."""
    from ..cron.ledger import recent_runs
    from ..cron.policy import read_policy
    from ..cron.receipts import run_consumption
    from ..cron.store import find_job

    ws = find_workspace(workspace, project=project, session=session)
    store = _store(ws)
    job = find_job(store, name) if name is not None else None
    found = recent_runs(ws.ledger, limit, job_id=job["id"] if job else None,
                        max_log_bytes=ledger_ceiling(max_log_bytes), exact=exact)
    jobs = {j["id"]: j for j in store["jobs"]}
    default_project = target_project(ws, project, session=session)
    for run in found:
        receipt = run_consumption(run, jobs.get(run["jobId"]), default_project, clock, workspace=ws.root)
        if receipt is not None:
            run["consumption"] = receipt
    if evidence:
        _add_evidence(found, jobs, default_project, ws, clock)
    names = {j["id"]: j["name"] for j in store["jobs"]} if name is None else {}
    skipped = read_policy(ws)["jobs"].get(job["id"], {}).get("skips", {}).get("recent", []) if job else []
    return RunList(name, job["id"] if job else None, limit, exact, found, names, list(reversed(skipped)))


def _add_evidence(found: list[dict[str, Any]], jobs: dict[str, dict[str, Any]], default_project, ws: Workspace,
                  clock: Clock) -> None:
    """Where each `unknown` run's message is now, looked for by its key in the project the run
    sent to (`run_target_project`)."""
    from ..cron.ledger import run_evidence
    from ..cron.targets import holds_project, run_target_project
    from ..inbox.manage import evidence_for_key
    from ..project import list_sessions

    sessions: dict[Any, list] = {}
    for run in found:
        if not run_evidence(run):
            continue
        root = run_target_project(jobs.get(run["jobId"]), default_project, workspace=ws.root)
        if not holds_project(root):
            continue
        if root not in sessions:
            sessions[root] = list_sessions(root, clock)
        run["evidence"] = evidence_for_key(root, sessions[root], run["executionId"])


@record
class Validation:
    """`cron validate`: every problem of the store, sxctl's policy file and the ledger, and the
    cross-checks of the store and the ledger."""

    workspace: Workspace
    problems: list[Problem]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "problems": []}

    def raise_if_invalid(self) -> None:
        """InvalidDataError (exit 5) naming the first problem, carrying them all."""
        from ..errors import InvalidDataError

        if self.problems:
            first = self.problems[0]
            raise InvalidDataError(first.file, f"{len(self.problems)} problem(s); first: {first.message}",
                                   details={"problems": [p.to_json() for p in self.problems]})


def validate_workspace(*, max_log_bytes: int | None = None, workspace=None, project=None,
                       session: str | None = None, clock: Clock = SYSTEM_CLOCK) -> Validation:
    """Check the store, the policy file and the ledger completely; `raise_if_invalid()` turns
    problems into exit 5 (a file the system refuses to read is exit 8)."""
    from ..cron.views import validate_workspace as validate

    ws = find_workspace(workspace, project=project, session=session)
    return Validation(ws, validate(ws, clock.now_ms(), ledger_ceiling(max_log_bytes)))


@record
class Wake:
    """`cron wake`: the scheduler-wake message dropped into the target session."""

    stem: str
    session_id: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "status": "accepted", "disposition": "new_occurrence", "correlationId": self.stem,
                "lane": "agent", "retainedReason": None, "stem": self.stem, "session": self.session_id}


def wake_agent(text: str = "Scheduler wake: check pending scheduled work.", *, target: str = "agent",
               to: str = "live", workspace=None, project=None, session: str | None = None,
               environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK,
               report: Reporter | None = None) -> Wake:
    """Wake the agent now: a scheduler-wake message (mode auto) into `to` (a session id or
    `live`). Refused next to a comis daemon that owns the workspace."""
    from ..cron.store import refuse_if_daemon_owns, refuse_if_reset_pending
    from ..inbox.sending import SendRequest, send
    from ..project import resolve_target_session

    if target == "monitoring":
        raise UsageError("--target monitoring has no file protocol; only the agent can be woken", code="unsupported")
    ws = find_workspace(workspace, project=project, session=session)
    refuse_if_daemon_owns(ws, environ, reporter(report))
    refuse_if_reset_pending(ws)
    chosen = resolve_target_session(target_project(ws, project, session=session), to, clock=clock)
    result = send(chosen, SendRequest(text, mode="auto", no_wait=True), clock=clock, report=report)
    return Wake(result.stem, chosen.id)


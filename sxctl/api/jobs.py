"""Cron store use cases that change the store: init, add, update, pause, remove (spec
cron-store.md), and what the other cron parts share (the ledger ceiling).
Listing and previewing jobs is `api.job_views`; status, runs, validation and wake `api.cron_checks`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import PolicyOptions, apply_options, read_policy
from ..cron.policy.job import job_of
from ..cron.run.ledger import DEFAULT_MAX_LOG_BYTES, MAX_MAX_LOG_BYTES
from ..cron.spend.rules import GuardOptions
from ..cron.store import authoring as jobs
from ..cron.store import file as store
from ..cron.store.authoring import JobSpec, Target, WakeGate
from ..cron.store.transaction import job_change, mutate_store
from ..cron.timeline.schedule import ScheduleInput
from ..errors import UsageError
from ..record import Factory, record
from ..report import Reporter
from .scope import find_workspace, reporter, target_project

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace


def ledger_ceiling(max_log_bytes: int | None = None, environ: Mapping[str, str] = os.environ) -> int:
    """The ledger's byte ceiling: `max_log_bytes`, then SXCTL_MAX_LOG_BYTES, then 2,000,000."""
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


def store_or_empty(ws: Workspace) -> dict[str, Any]:
    """The store's document, or an empty one when there is no store yet."""
    doc = store.read_store(ws)
    return doc if doc is not None else {"jobs": [], "activeClaims": []}


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
    ws = find_workspace(workspace, project=project, session=session)
    store.refuse_if_daemon_owns(ws, environ, reporter(report))
    store.refuse_if_reset_pending(ws)
    return WorkspaceInit(ws, store.init_workspace(ws))


@record
class JobChange:
    """`cron add/update/pause/resume/remove`: comis's result object for the change."""

    workspace: Workspace
    outcome: dict[str, Any]
    notes: list[str] = Factory(list)  # type: ignore[assignment]
    show_notes: bool = False
    #: what the change made that may not do what was meant (also warned on stderr); in the JSON when any
    warnings: list[str] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.outcome, **({"notes": self.notes} if self.show_notes and self.notes else {}),
                **({"warnings": self.warnings} if self.warnings else {})}


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
    `spec` (a `sxctl.cron.store.authoring.JobSpec`) gives every other flag of `cron add`; `policy` (a
    `sxctl.cron.policy.file.PolicyOptions`) sxctl's own settings: hold, catch-up, limits, lifetime."""
    ws = find_workspace(workspace, project=project, session=session)
    spec = spec or JobSpec(schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz), payload=payload,
                           text=text, paused=paused)
    if policy is not None:
        spec = dataclasses.replace(spec, policy=policy)
    default_project = str(target_project(ws, project, session=session))
    notes: list[str] = []
    warnings: list[str] = []
    if spec.policy is not None:  # every flag checked before the store is: a taken name hid a bad one
        apply_options({}, spec.policy, tz=spec.schedule.tz, now_ms=clock.now_ms(),
                      recurring=spec.schedule.at is None and spec.schedule.in_ is None)

    def change(doc, now):
        return jobs.add_job(doc, name, spec, agent_id=store.default_agent_id(doc, agent, os.environ),
                   default_project=default_project, now_ms=now, workspace=ws.root, max_jobs=max_jobs, notes=notes,
                   warnings=warnings)

    result = mutate_store(ws, change, clock=clock, report=report, create=True, lock_wait_s=lock_wait,
                          policy_change=job_change(name, spec)).outcome
    for note in notes:
        reporter(report).note(note)
    warnings += _hold_warnings(spec) + _never_warnings(ws, name, clock.now_ms())
    said = [f"{name}: {warning}" for warning in warnings]
    if spec.payload == "delivery" and not os.environ.get("SXCTL_DELIVER_CMD"):
        said.append(f"{name} is a delivery job and SXCTL_DELIVER_CMD is not set here: `cron tick` fails it "
                    "(a one-shot for good) unless the environment of the pass sets it")
    for warning in said:
        reporter(report).warn(warning)
    return JobChange(ws, result, notes, warnings=said)


def update_job(name: str, spec: JobSpec | None = None, *, text: str | None = None, cron: str | None = None,
               every: str | None = None, at: str | None = None, in_: str | None = None, tz: str | None = None,
               policy: PolicyOptions | None = None, workspace=None, project=None, session: str | None = None,
               lock_wait: float = 10.0, clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Change job `name`: a new schedule (`cron`/`every`/`at`/`in_`, `tz`) replaces the schedule,
    `text` the message; `spec` (a `JobSpec`) gives every other flag of `cron update`.
    `outcome` is `{jobName, updated}`, `notes` what was kept or implied."""
    ws = find_workspace(workspace, project=project, session=session)
    spec = spec or JobSpec(schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz), text=text)
    if policy is not None:
        spec = dataclasses.replace(spec, policy=policy)
    default_project = str(target_project(ws, project, session=session))
    notes: list[str] = []
    warnings: list[str] = []
    effective: dict[str, Any] = {}
    result = mutate_store(
        ws, lambda doc, now: jobs.update_job(doc, name, spec, default_project=default_project, now_ms=now,
                                      report=reporter(report), workspace=ws.root, notes=notes, warnings=warnings,
                                      policy_entry=lambda job_id: read_policy(ws)["jobs"].get(job_id, {}),
                                      effective=effective),
        clock=clock, report=report, lock_wait_s=lock_wait,
        policy_change=job_change(name, spec, resumed=spec.resumed, notes=notes, effective=effective),
    ).outcome
    for note in notes:
        reporter(report).note(note)
    said = [f"{result['jobName']}: {warning}"
            for warning in warnings + _hold_warnings(spec) + _never_warnings(ws, result["jobName"], clock.now_ms())
            + _managed_warnings(ws, name=result["jobName"])]
    for warning in said:
        reporter(report).warn(warning)
    return JobChange(ws, result, notes, show_notes=True, warnings=said)


def _never_warnings(ws: Workspace, name: str, now_ms: int) -> list[str]:
    """A job none of whose times falls in its --active-hours/--active-days: it never runs."""
    store = store_or_empty(ws)
    record = next((job for job in store["jobs"] if job["name"] == name), None)
    if record is None:
        return []
    job = job_of(record, read_policy(ws), ws.root)
    if job.active is None or not job.active.never_meets(job.schedule, job.zone_name, now_ms):
        return []
    return [f"none of its times falls in its {job.active.describe(job.zone_name)}: it never runs"]


def _hold_warnings(spec: JobSpec) -> list[str]:
    """A --hold-max shorter than the minute between passes (`--hold-max 5`: a bare number is seconds)."""
    hold = spec.policy.hold_max if spec.policy is not None else None
    if hold is None or not 0 < hold < 60:
        return []
    return [f"--hold-max {hold:g}s is shorter than the minute between passes: a run held for a live agent is "
            "given up at the next pass (a bare number is seconds: write 5m for minutes)"]


def pause_job(name: str | None = None, paused: bool = True, *, all_jobs: bool = False, until: str | None = None,
              reason: str | None = None, workspace=None, project=None, session: str | None = None,
              lock_wait: float = 10.0, clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Pause job `name` (its next run time and error counter are kept), or resume it
    (`paused=False`; a passed run time is due at the next pass, under the job's policy, and its
    maintenance window ends). With `until` (a TIME) and `reason`: a maintenance window instead,
    for job `name` or, `all_jobs`, every job — its occurrences are skipped, never caught up, and
    the jobs run again by themselves at its end; `paused=False, all_jobs=True` ends the
    workspace's window."""
    ws = find_workspace(workspace, project=project, session=session)
    if (name is None) == (not all_jobs):
        raise UsageError("give a job NAME or --all, not both" if name else "give a job NAME, or --all")
    if all_jobs or until is not None or reason is not None:
        from .workspace_policy import window_change  # only a maintenance window needs it

        return JobChange(ws, window_change(ws, name, paused=paused, until=until, reason=reason,
                                           lock_wait=lock_wait, clock=clock, report=report))
    assert name is not None  # checked above: without --all there is a NAME
    result = mutate_store(ws, lambda doc, now: jobs.set_job_paused(doc, name, paused),
                          clock=clock, report=report, lock_wait_s=lock_wait,
                          policy_change=None if paused else job_change(name, JobSpec(), resumed=True)).outcome
    window = read_policy(ws).get("maintenance")
    if not paused and window and window["fromMs"] <= clock.now_ms() < window["untilMs"]:
        from ..cron.policy.maintenance import window_text  # only a resume inside a workspace window says so

        reporter(report).warn(f"{name}: the workspace's {window_text(window)} still skips its occurrences; "
                              "`sxctl cron resume --all` ends it")
    return JobChange(ws, result)


def remove_job(name: str, *, workspace=None, project=None, session: str | None = None, lock_wait: float = 10.0,
               clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> JobChange:
    """Remove job `name` from the store (its runs stay in the ledger)."""
    ws = find_workspace(workspace, project=project, session=session)
    result = mutate_store(ws, lambda doc, now: jobs.remove_job(doc, name),
                          clock=clock, report=report, lock_wait_s=lock_wait).outcome
    said = [f"{name}: {warning}" for warning in _managed_warnings(ws, job_id=result["jobId"])]
    for warning in said:
        reporter(report).warn(warning)
    return JobChange(ws, result, warnings=said)


def _managed_warnings(ws: Workspace, *, name: str | None = None, job_id: str | None = None) -> list[str]:
    """A job a `cron apply` manages, changed by hand: the next apply of its schedule file undoes it."""
    applied = read_policy(ws).get("applied")
    if applied is None:
        return []
    if job_id is None:
        job_id = next((job["id"] for job in store_or_empty(ws)["jobs"] if job["name"] == name), None)
    if job_id not in applied["jobs"]:
        return []
    if applied["jobs"][job_id].get("kept"):
        return [f"it is no longer in {applied['file']}: `sxctl cron apply --prune` removes it"]
    return [f"it is managed by {applied['file']} (`cron apply`): the next apply sets what the file declares again; "
            "change the file instead (`sxctl cron plan` shows the drift)"]




def job_spec(*, cron: str | None = None, every: str | None = None, at: str | None = None, in_: str | None = None,
             tz: str | None = None, fold: str | None = None, anchor: str | None = None, payload: str | None = None,
             text: str | None = None, wake_mode: str | None = None, session_strategy: str | None = None,
             max_history_turns: int | None = None, continuation: str | None = None, model: str | None = None,
             timeout_seconds: int | None = None, wake_gate: str | os.PathLike | None = None,
             wake_gate_language: str | None = None, wake_gate_timeout: int | None = None, no_wake_gate: bool = False,
             to: str | None = None, to_project: str | os.PathLike | None = None, tenant: str | None = None,
             max_dependency_errors: int | None = None, paused: bool = False, resumed: bool = False,
             new_name: str | None = None, hold_max: float | None = None, catch_up: str | None = None,
             stale_after: float | None = None, missed_note: bool | None = None, max_unconsumed: int | None = None,
             max_runs_per_day: int | None = None, until: str | None = None, max_runs: int | None = None,
             active_hours: str | None = None, active_days: str | None = None,
             overlap: str | None = None, jitter: float | None = None, host: str | None = None,
             ping_url: str | None = None, ping_on: str | None = None, expires: float | None = None,
             read_within: float | None = None, rate_limit_ceiling: float | None = None,
             max_session_tokens: int | None = None, max_tokens_per_day: int | None = None,
             on_missing_usage: str | None = None) -> JobSpec:
    """Every flag of `cron add` / `cron update` as the `spec` of `add_job` / `update_job`: the
    schedule (one of `cron`/`every`/`at`/`in_`), the payload, the target (`to`, `to_project`,
    `tenant`; None keeps an updated job's), the wake gate (a script file) and sxctl's policy
    (`hold_max`, `stale_after`, `jitter`, `expires`, `read_within` in seconds; `overlap` skip, queue
    or replace; `ping_on` written or read) with its
    spend guards (`rate_limit_ceiling` … `on_missing_usage`). What is None is not given."""
    target = None
    if to is not None or to_project is not None or tenant is not None:
        project = os.path.realpath(to_project) if to_project else None
        target = Target(project, to, tenant)  # None: kept on update, else the default
    gate = None
    if wake_gate is not None:
        gate = WakeGate.from_file(Path(wake_gate), wake_gate_language, wake_gate_timeout)
    elif wake_gate_language or wake_gate_timeout:
        raise UsageError("--wake-gate-language and --wake-gate-timeout need --wake-gate FILE")
    return JobSpec(
        schedule=ScheduleInput(cron=cron, every=every, at=at, in_=in_, tz=tz, fold=fold, anchor=anchor),
        payload=payload, text=text, wake_mode=wake_mode, session_strategy=session_strategy,
        max_history_turns=max_history_turns, continuation=continuation, model=model,
        timeout_seconds=timeout_seconds, wake_gate=gate, no_wake_gate=no_wake_gate, target=target,
        max_dependency_errors=max_dependency_errors, paused=paused, resumed=resumed, new_name=new_name,
        policy=PolicyOptions(hold_max=hold_max, catch_up=catch_up, stale_after=stale_after, missed_note=missed_note,
                             max_unconsumed=max_unconsumed, max_runs_per_day=max_runs_per_day, until=until,
                             max_runs=max_runs, active_hours=active_hours, active_days=active_days,
                             overlap=overlap, jitter=jitter, host=host, ping_url=ping_url, ping_on=ping_on,
                             expires=expires, read_within=read_within,
                             guards=GuardOptions(rate_limit_ceiling, max_session_tokens, max_tokens_per_day,
                                                 on_missing_usage)),
    )

"""The store's jobs as the views show them (`cron list/show/next`, `next`, `status`, `cron status`,
`watch`, `upcoming()`): each job's limits counted as the pass counts them and its coming runs on
its timeline (`fate.preview_runs`), so a view's next run, its mark (held, skipped, given up) and
the pass's decision are one computation. Read-only: no lock, no write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...errors import InvalidDataError
from ..policy.job import Job, jobs_of
from ..policy.maintenance import window_at
from ..run.heartbeat import newest_pass_ms
from ..run.ledger import DEFAULT_MAX_LOG_BYTES, Ledger, scan_ledger
from ..spend.ledger import DayTokens, day_tokens
from ..store.workspace import Workspace
from .burst import CATCHUP_AFTER_MS, budget_notes
from .fate import Preview, end_mark, preview_runs
from .hold import Agents
from .limits import LimitUsage, job_history, limit_usage
from .schedule import schedule_computable


@dataclass
class JobPreviews:
    """Per job id: the `jobs` as the pass decides about them, their limits' `usages` (what
    `cron list/show` count) and their coming runs (`previews`, scheduled jobs with a computable
    schedule only)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    usages: dict[str, LimitUsage] = field(default_factory=dict)
    previews: dict[str, Preview] = field(default_factory=dict)
    #: when a pass last went through (`heartbeat.newest_pass_ms`), read once when a job is scheduled
    last_pass_ms: int | None = None

    def next_due(self) -> dict[str, Any] | None:
        """When the pass next has a job to run or hold — the `next due` of `status` and `cron
        status`: the earliest first run of every job's timeline, `{at_ms, job, mark}` (`mark`:
        fate.run_mark, as `cron list` and `cron next` show it)."""
        first = min(((p.runs[0]["at_ms"], self.jobs[job_id].name, p.runs[0]["mark"])
                     for job_id, p in self.previews.items() if p.runs), default=None)
        return None if first is None else {"at_ms": first[0], "job": first[1], "mark": first[2]}

    def overdue(self, now: int) -> list[str]:
        """THE overdue jobs of `status`, `cron status`, doctor, metrics and the `overdue` mark of
        every view: missed by the passes (`is_overdue`), and not held by them for a live agent or
        a spend guard."""
        held = set(self.held(now)) | set(self.held(now, by_guard=True))
        return [job.name for job in self.jobs.values()
                if is_overdue(job, now, self.last_pass_ms) and job.name not in held]

    def never_run(self) -> list[dict[str, Any]]:
        """The scheduled jobs whose timeline has no run at all (`fate.end_mark`), and why."""
        return [{"name": self.jobs[job_id].name, "why": p.end.detail}
                for job_id, p in self.previews.items() if not p.runs and end_mark(p) is not None and p.end]

    def held(self, now: int, *, by_guard: bool = False) -> list[str]:
        """The jobs the pass holds now: their first run is due and waits for a live agent (or,
        `by_guard`, for a spend guard)."""
        return [self.jobs[job_id].name for job_id, p in self.previews.items()
                if p.runs and p.runs[0]["at_ms"] <= now and (hold := p.runs[0]["fate"].hold) is not None
                and hold.status == "waiting" and hold.by_guard == by_guard]


#: a scheduled job whose next run is this far in the past has been missed: no pass has run it
OVERDUE_GRACE_MS = 120_000


def is_overdue(job: Job, now_ms: int, last_pass_ms: int | None = None) -> bool:
    """A job the passes missed: due (its next unrun occurrence, with its --jitter) for more than
    OVERDUE_GRACE_MS, with no pass since then within that grace (`last_pass_ms`: a pass that left
    it — held, deferred — said why, and the next decides again), and no maintenance window
    holding it (the pass skips it there). Skipped occurrences count: a pass must run to skip them."""
    if job.status != "scheduled" or job.next_run_ms is None:
        return False
    due = job.run_at(job.next_run_ms)
    late = now_ms - OVERDUE_GRACE_MS
    return (due < late and (last_pass_ms is None or last_pass_ms < max(due, late))
            and window_at(job.windows, job.next_run_ms, now_ms) is None)


def counted_usages(ws: Workspace, store: dict[str, Any], jobs: list[Job], project: Path, clock: Clock, *,
                   max_log_bytes: int = DEFAULT_MAX_LOG_BYTES, unread: bool = False) -> dict[str, LimitUsage]:
    """Each job's runs as the pass counts them (`limits.limit_usage`), for the jobs where the
    ledger matters: a claim left by a killed pass that dispatched counts before the next pass
    settles it, and a job with --max-runs or --max-runs-per-day counts what the ledger proves
    when the policy file says less (with `unread`, --max-unconsumed's unread messages too). An
    invalid ledger (`cron validate` names it; the pass refuses it) leaves the policy file's counts."""
    claimed = {claim["jobId"] for claim in store["activeClaims"]}
    counted = [job for job in jobs if job.has_policy
               and (job.id in claimed or job.max_runs or job.max_runs_per_day
                    or (unread and (job.max_unconsumed or job.overlap != "queue")))]
    if not counted:
        return {}
    try:
        ledger: Ledger | None = scan_ledger(ws.ledger, max_log_bytes=max_log_bytes)
    except InvalidDataError:
        return {}
    history = job_history(ledger, {job.id for job in counted}) if ledger is not None else None
    return {job.id: limit_usage(job, claims=store["activeClaims"], ledger=ledger, project=project, clock=clock,
                                workspace=ws.root, unread=unread, history=history)
            for job in counted}


def job_previews(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], project: Path, clock: Clock,
                 count: int, *, after: int | None = None, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
                 to: str = "live", merged: bool = False, only: str | None = None) -> JobPreviews:
    """The next `count` runs of every scheduled job (of job id `only`), as the pass at its time
    would decide them with the pass's defaults (`--to live`): skipped occurrences are not runs, an
    expired or limit-paused job ends its series, an overdue one says whether it is held for a live
    agent. `after` (a time in the future; default now): the runs from then on. `merged` (`cron
    next`, `next`: the first `count` runs of all jobs in time order): each job's runs only as far
    as they can be among those (`_merged`) — 100 runs of each of 3,000 jobs took 37 s."""
    now = clock.now_ms()
    spend: DayTokens | None = None
    jobs = [job for job in jobs_of(store, policy, ws.root) if only is None or job.id == only]
    agents = Agents(project, to, clock, ws.root)  # each target project asked once
    found = JobPreviews({job.id: job for job in jobs},
                        counted_usages(ws, store, jobs, project, clock, max_log_bytes=max_log_bytes, unread=True))
    usages: dict[str, LimitUsage] = {}
    nothing_counted = LimitUsage(0, None)  # shared by the jobs with no count: a timeline copies it to spend
    for job in jobs:
        if job.built_in or job.status != "scheduled" or not schedule_computable(job.schedule):
            continue
        usage = found.usages.get(job.id) or (
            LimitUsage(job.counted_runs, job.counted_day) if job.counted_runs or job.counted_day
            or job.token_cap is not None else nothing_counted)
        usages[job.id] = usage
        if job.token_cap is not None:  # --max-tokens-per-day: the tokens attributed so far (cron/spend/ledger.py)
            spend = spend if spend is not None else day_tokens(ws.scheduler, clock)
            usage.token_cap, usage.tokens = job.token_cap, spend.by_date(job.id)
        found.previews[job.id] = preview_runs(job, usage, now, 1 if merged else count, agents=agents, start=after)
    if merged:
        _merged(found, count, lambda job, reach: preview_runs(job, usages[job.id], now, reach, agents=agents,
                                                              start=after))
    budget_notes(found.previews, policy.get("defaults", {}).get("maxCatchup"), now, CATCHUP_AFTER_MS)
    _mark_missed(found, ws, now)
    return found


def _mark_missed(found: JobPreviews, ws: Workspace, now: int) -> None:
    """Read when a pass last went through, and mark `overdue` the due first run (`due`) of each
    job the passes missed — the jobs `status`, doctor and metrics call overdue, by one rule."""
    if not any(job.status == "scheduled" for job in found.jobs.values()):
        return
    found.last_pass_ms = newest_pass_ms(ws, now)
    due = [job_id for job_id, p in found.previews.items() if p.runs and p.runs[0]["mark"] == "due"]
    missed = set(found.overdue(now)) if due else set()
    for job_id in due:
        if found.jobs[job_id].name in missed:
            found.previews[job_id].runs[0]["mark"] = "overdue"


def _merged(found: JobPreviews, count: int, preview: Callable[[Job, int], Preview]) -> None:
    """Lengthen the jobs' previews (each of one run now) until the first `count` runs of them
    all, in time order, are known: a job whose last run so far comes no later than the
    `count`-th earliest run may have more before it; its preview is made again twice as long."""
    reach = dict.fromkeys(found.previews, 1)
    while True:
        times = sorted(run["at_ms"] for p in found.previews.values() for run in p.runs)
        last = times[count - 1] if len(times) >= count else None
        longer = [job_id for job_id, p in found.previews.items()
                  if reach[job_id] < count and len(p.runs) == reach[job_id]
                  and (last is None or p.runs[-1]["at_ms"] <= last)]
        if not longer:
            return
        for job_id in longer:
            reach[job_id] = min(2 * reach[job_id], count)
            found.previews[job_id] = preview(found.jobs[job_id], reach[job_id])

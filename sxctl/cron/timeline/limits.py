"""Counting a job's runs against its limits (--max-runs, --max-runs-per-day, --max-unconsumed)
from durable facts only — the policy file's counts, the claims, the ledger and the inbox — for the
pass that admits a job (cron/timeline/admission.py) and for the views (`cron list/show`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ..policy.job import Job
from ..policy.overlap import unread_previous
from ..run.ledger import Group, Ledger
from ..run.receipts import consumption, execution_dispatch
from .schedule import job_zone, local_time


@dataclass
class LimitUsage:
    """How much of its limits a job has used: `runs` toward --max-runs, `day` (`{date, runs}`,
    the newest day the policy file counted, in the job's zone) and `days` (runs per date the
    ledger proves) toward --max-runs-per-day, and `unread` (its newest messages all still
    unread, up to its --max-unconsumed; None without that limit). `proven` is the ledger's
    share of `runs` (None when the ledger was not asked)."""

    runs: int
    day: dict[str, Any] | None
    unread: int | None = None
    days: dict[str, int] = field(default_factory=dict)
    proven: int | None = None
    #: --max-tokens-per-day (the job's or the budget's) and the tokens attributed to its runs per
    #: date (cron/spend/ledger.py); set by the pass's admission
    token_cap: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    #: with --overlap skip/replace: the job's previous message while it is still unread
    #: (overlap.unread_previous; None: read, or not asked)
    pending: dict[str, Any] | None = None

    def copy(self) -> LimitUsage:
        """A copy whose counts a preview may spend without touching these."""
        return LimitUsage(self.runs, dict(self.day) if self.day else None, self.unread, dict(self.days), self.proven,
                          self.token_cap, dict(self.tokens), self.pending)

    def runs_on(self, date: str) -> int:
        counted = self.day["runs"] if self.day is not None and self.day["date"] == date else 0
        return max(counted, self.days.get(date, 0))


#: the policy keys of the limits counted from the ledger (job_history indexes just their jobs);
#: `overlap` (skip/replace) looks up the job's previous message there
LEDGER_LIMITS = ("maxRuns", "maxRunsPerDay", "maxUnconsumed", "overlap")


def job_history(ledger: Ledger, job_ids: set[str] | None = None) -> dict[str, list[Group]]:
    """The ledger's executions (those with a start row) by job, in file order — of `job_ids`
    only, when given: one walk over the ledger for every job a pass or a view counts."""
    index: dict[str, list[Group]] = {}
    for group in ledger.groups.values():
        start = group.start
        if start is not None and (job_ids is None or start["jobId"] in job_ids):
            index.setdefault(start["jobId"], []).append(group)
    return index


def limited_jobs(policy: dict[str, Any]) -> set[str]:
    """Ids of the jobs whose policy entry sets a limit counted from the ledger."""
    return {job_id for job_id, entry in policy["jobs"].items() if any(entry.get(key) for key in LEDGER_LIMITS)}


def proven_runs(job: Job, groups: list[Group], *, project: Path, clock: Clock, workspace: Path,
                sessions: dict[Path, list] | None = None) -> tuple[int, dict[str, int]]:
    """What the ledger proves a job spent, whatever the policy file says: its scheduled (not
    manual) executions that dispatched (`execution_dispatch`) started since its limits were
    last reset (`cron resume`) toward --max-runs, and per date of their occurrence in the job's
    zone toward --max-runs-per-day (only with that limit)."""
    since = job.limits_from_ms
    zone = job.zone if job.max_runs_per_day else None
    runs, days = 0, dict[str, int]()
    for group in groups:
        start = group.start
        if start is None or start["trigger"] == "manual":
            continue
        outcome = group.terminal["outcome"] if group.terminal is not None else None
        if execution_dispatch(start, outcome, job.record, project, clock, sessions, workspace=workspace) is None:
            continue
        if start["startedAtMs"] >= since:
            runs += 1
        if zone is not None:
            date = local_time(start["scheduledForMs"], zone).date().isoformat()
            days[date] = days.get(date, 0) + 1
    return runs, days


def count_dispatch(entry: dict[str, Any], job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any] | None,
                   *, project: Path, clock: Clock, workspace: Path, sessions: dict[Path, list] | None = None) -> bool:
    """Fold one scheduled execution into the entry's counts when it dispatched
    (`execution_dispatch`); True when it was counted now. `countedId` remembers the last one
    counted, so an execution is counted once: a pass counts its run in the policy file, written
    before the store write that drops the run's claim, and a pass killed before that leaves the
    claim, which the next pass settles and counts (or finds counted). Manual runs spend no limit."""
    if start["trigger"] == "manual" or entry.get("countedId") == start["executionId"]:
        return False
    if execution_dispatch(start, outcome, job, project, clock, sessions, workspace=workspace) is None:
        return False
    entry["runs"] = entry.get("runs", 0) + 1
    date = local_time(start["scheduledForMs"], job_zone(job, entry)).date().isoformat()
    day = entry.get("day")
    if day is None or day["date"] < date:
        entry["day"] = {"date": date, "runs": 1}
    elif day["date"] == date:
        entry["day"] = {"date": date, "runs": day["runs"] + 1}
    entry["countedId"] = start["executionId"]
    return True


def limit_usage(job: Job, *, claims: list[dict[str, Any]], ledger: Ledger | None, project: Path, clock: Clock,
                workspace: Path, unread: bool = True, sessions: dict[Path, list] | None = None,
                history: dict[str, list[Group]] | None = None) -> LimitUsage:
    """THE counting rule of every run limit, from durable facts only — used by the pass before it
    admits a job and by the views (`cron list/show`):

    - runs and runs per day: the LARGER of two counts. One is the counts folded into the policy
      file (`count_dispatch`), plus each of the job's claims not yet folded — a pass killed
      after it dispatched — whose execution dispatched by the ledger and the inbox
      (`execution_dispatch`: a claim without a start row sent nothing; an unsettled one, whose
      message is in the inbox, did). The other is what the ledger proves (`proven_runs`), so a
      policy file edited down, or a day stamped by a clock that ran ahead, never lets a job
      past a limit the ledger can show; the policy count stays for the runs retention dropped
      from the ledger.
    - unread: the job's newest dispatched inbox messages since its limits were last reset, an
      `unknown` run whose message is in the inbox included, counted while they are still pending.
    A run that dispatched nothing (failed before sending, a held occurrence given up past
    --hold-max) spends nothing. `history` (`job_history`) is the ledger indexed by job, built
    once for many jobs; without it this job's executions are picked from the ledger."""
    record, entry = job.record, job.entry
    counted: dict[str, Any] = {key: entry[key] for key in ("runs", "day", "countedId") if key in entry}
    for claim in claims:
        if claim["jobId"] != job.id:
            continue
        group = ledger.groups.get(claim["executionId"]) if ledger is not None else None
        start = group.start if group is not None else None
        outcome = group.terminal["outcome"] if group is not None and group.terminal is not None else None
        if start is not None:  # a claim without its start row dispatched nothing
            count_dispatch(counted, record, start, outcome, project=project, clock=clock, workspace=workspace,
                           sessions=sessions)
    usage = LimitUsage(counted.get("runs", 0), counted.get("day"))
    spent = job.max_runs or job.max_runs_per_day
    limit = job.max_unconsumed if unread else None
    overlap = unread and job.overlap != "queue"
    if ledger is None or not (spent or limit or overlap):
        return usage
    if history is None:
        history = job_history(ledger, {job.id})
    groups = history.get(job.id, [])
    if spent:
        usage.proven, usage.days = proven_runs(job, groups, project=project, clock=clock, workspace=workspace,
                                               sessions=sessions)
        usage.runs = max(usage.runs, usage.proven)
    if limit:
        usage.unread = _unread_streak(job, limit, groups, project, clock, sessions, workspace=workspace)
    if overlap:
        usage.pending = unread_previous(record, groups, project=project, clock=clock, workspace=workspace,
                                        sessions=sessions)
    return usage


def _unread_streak(job: Job, limit: int, history: list[Group], project: Path, clock: Clock,
                   sessions: dict[Path, list] | None, *, workspace: Path) -> int:
    """How many of the job's newest inbox messages (since its limits were last reset), up to
    `limit`, are still unread (`history`: the job's executions in the ledger)."""
    since = job.limits_from_ms
    groups = [g for g in history if g.start is not None and g.start["startedAtMs"] >= since]
    groups.sort(key=lambda g: g.start["startedAtMs"], reverse=True)  # type: ignore[index]
    where = job.target_project or project
    streak = 0
    for group in groups:
        outcome = group.terminal["outcome"] if group.terminal is not None else None
        dispatch = execution_dispatch(group.start, outcome, job.record, project, clock, sessions, workspace=workspace)
        if dispatch is None or dispatch.stem is None or dispatch.session_id is None:
            continue  # sent no message: neither read nor unread
        if consumption(where, dispatch.session_id, dispatch.stem, clock)["state"] != "pending":
            break
        streak += 1
        if streak >= limit:
            break
    return streak

"""The store's jobs as the previews show them (`cron list/show/next`, `next`, `watch`,
`upcoming()`): each job's limits counted as the pass counts them and its coming runs judged by
the pass's own rule (`fate.preview_runs`). Read-only: no lock, no write."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...errors import InvalidDataError
from ..policy.jitter import run_at
from ..policy.maintenance import window_at, windows_for
from ..run.ledger import DEFAULT_MAX_LOG_BYTES, Ledger, scan_ledger
from ..spend.ledger import read_spend, tokens_by_date
from ..spend.rules import effective_guards
from ..store.workspace import Workspace
from .admission import hold_state
from .burst import CATCHUP_AFTER_MS, budget_notes
from .fate import Preview, preview_runs
from .limits import LimitUsage, job_history, limit_usage
from .schedule import schedule_computable


@dataclass
class JobPreviews:
    """Per job id: its limits' `usages` (what `cron list/show` count) and its coming runs
    (`previews`, scheduled jobs with a computable schedule only)."""

    usages: dict[str, LimitUsage] = field(default_factory=dict)
    previews: dict[str, Preview] = field(default_factory=dict)


def counted_usages(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], project: Path, clock: Clock, *,
                   max_log_bytes: int = DEFAULT_MAX_LOG_BYTES, unread: bool = False) -> dict[str, LimitUsage]:
    """Each job's runs as the pass counts them (`limits.limit_usage`), for the jobs where the
    ledger matters: a claim left by a killed pass that dispatched counts before the next pass
    settles it, and a job with --max-runs or --max-runs-per-day counts what the ledger proves
    when the policy file says less (with `unread`, --max-unconsumed's unread messages too). An
    invalid ledger (`cron validate` names it; the pass refuses it) leaves the policy file's counts."""
    claimed = {claim["jobId"] for claim in store["activeClaims"]}
    jobs = [job for job in store["jobs"] if (entry := policy["jobs"].get(job["id"]))
            and (job["id"] in claimed or entry.get("maxRuns") or entry.get("maxRunsPerDay")
                 or (unread and (entry.get("maxUnconsumed") or entry.get("overlap"))))]
    if not jobs:
        return {}
    try:
        ledger: Ledger | None = scan_ledger(ws.ledger, max_log_bytes=max_log_bytes)
    except InvalidDataError:
        return {}
    history = job_history(ledger, {job["id"] for job in jobs}) if ledger is not None else None
    return {job["id"]: limit_usage(job, policy["jobs"][job["id"]], claims=store["activeClaims"], ledger=ledger,
                                   project=project, clock=clock, workspace=ws.root, unread=unread, history=history)
            for job in jobs}


def job_previews(ws: Workspace, store: dict[str, Any], policy: dict[str, Any], project: Path, clock: Clock,
                 count: int, *, after: int | None = None, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
                 to: str = "live") -> JobPreviews:
    """The next `count` runs of every scheduled job, as the pass at its time would decide them
    with the pass's defaults (`--to live`): skipped occurrences are not runs, an expired or
    limit-paused job ends its series, an overdue one says whether it is held for a live agent.
    `after` (a time in the future; default now): the runs from then on."""
    now = clock.now_ms()
    spend: dict[str, Any] | None = None
    live_seen: dict[Path, bool] = {}  # each target project's "no live session" at this instant
    found = JobPreviews(counted_usages(ws, store, policy, project, clock, max_log_bytes=max_log_bytes, unread=True))
    for job in store["jobs"]:
        if job["source"] == "built_in" or job["lifecycle"]["status"] != "scheduled" \
                or not schedule_computable(job["schedule"]):
            continue
        entry = policy["jobs"].get(job["id"], {})
        usage = found.usages.get(job["id"]) or LimitUsage(entry.get("runs", 0), entry.get("day"))
        cap = effective_guards(entry, policy.get("budget")).get("maxTokensPerDay")
        if cap is not None:  # --max-tokens-per-day: the tokens attributed so far (cron/spend/ledger.py)
            spend = spend if spend is not None else _spend_or_none(ws)
            usage.token_cap, usage.tokens = cap, tokens_by_date(spend, job["id"])

        def held(job: dict[str, Any] = job, entry: dict[str, Any] = entry) -> dict[str, Any] | None:
            return hold_state(job, entry, now, project=project, to=to, clock=clock, workspace=ws.root,
                              budget=policy.get("budget"), seen=live_seen)

        found.previews[job["id"]] = preview_runs(job, entry, usage, now, count, held=held, start=after,
                                                 windows=windows_for(policy, job["id"]))
    budget_notes(found.previews, policy.get("defaults", {}).get("maxCatchup"), now, CATCHUP_AFTER_MS)
    return found


def _spend_or_none(ws: Workspace) -> dict[str, Any]:
    """The attributed tokens, or none when the file is invalid (the pass names it; a preview still shows)."""
    try:
        return read_spend(ws.scheduler)
    except InvalidDataError:
        return {"formatVersion": 1, "runs": []}


def next_due(store: dict[str, Any], policy: dict[str, Any] | None, now: int) -> int | None:
    """When the pass next has a job to run — the `next due` of `status` and `cron status`: each
    scheduled job's next run (with its --jitter), or for a job whose occurrence a maintenance
    window skips, its first run after the window, as `cron list` and `cron next` show it."""
    policy = policy or {"jobs": {}}
    times = []
    for job in store["jobs"]:
        if job["lifecycle"]["status"] != "scheduled":
            continue
        entry = policy["jobs"].get(job["id"], {})
        windows = windows_for(policy, job["id"])
        due = job["lifecycle"]["nextRunAtMs"]
        if not window_at(windows, due, now) or not schedule_computable(job["schedule"]):
            times.append(run_at(job, entry, due))
            continue
        usage = LimitUsage(entry.get("runs", 0), entry.get("day"))
        times += [run["at_ms"] for run in preview_runs(job, entry, usage, now, 1, windows=windows).runs]
    return min(times, default=None)

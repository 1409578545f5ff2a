"""What the spend guards do now, for `status`, `doctor`, `watch` and `metrics`: the live
session's usage figures and, for each scheduled job with a guard (its own or the workspace
budget's), whether a guard holds it and why, which figures it cannot read, and its tokens today
against --max-tokens-per-day — by the pass's own rules (cron/spend/guards.py, cron/spend/ledger.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..clock import Clock
from ..cron.spend.ledger import DayTokens, day_tokens
from ..cron.timeline.hold import Agents
from ..cron.timeline.previews import JobPreviews, job_previews
from ..project.usage import Usage, read_usage, usage_line


def session_usage(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The `usage` part of `status`: every figure (None: unreadable), why each unreadable one is,
    and the one-line summary."""
    usage: Usage = read_usage(stats)
    return {**usage.to_json(), "line": usage_line(usage)}


def guard_states(ws, store: dict[str, Any], policy: dict[str, Any], project: Path, clock: Clock,
                 timeline: JobPreviews | None = None) -> list[dict[str, Any]]:
    """One row per scheduled job under a guard: `due` and `held` (its first run on the timeline
    is due now, and a guard holds it), `reason`/`detail`, `unreadable` (figure -> why),
    `tokensToday`/`maxTokensPerDay`. `timeline`: the jobs' previews, when the caller has them."""
    now = clock.now_ms()
    if timeline is None:
        timeline = job_previews(ws, store, policy, project, clock, 1)
    held = set(timeline.held(now, by_guard=True))
    hold = Agents(project, "live", clock, ws.root)
    spend: DayTokens | None = None
    rows = []
    for job in timeline.jobs.values():
        if job.built_in or job.status != "scheduled":
            continue
        verdict = hold.verdict(job)
        if verdict is None and job.token_cap is None:
            continue
        first = timeline.previews[job.id].first if job.id in timeline.previews else None
        row: dict[str, Any] = {"name": job.name, "jobId": job.id, "due": first is not None and first["at_ms"] <= now,
                               "held": job.name in held,
                               "reason": verdict.reason if verdict is not None else None,
                               "detail": (verdict.detail or None) if verdict is not None else None,
                               "session": verdict.session if verdict is not None else None,
                               "unreadable": dict(verdict.unreadable) if verdict is not None else {},
                               "maxTokensPerDay": job.token_cap, "tokensToday": None}
        if job.token_cap is not None:
            spend = spend if spend is not None else day_tokens(ws.scheduler, clock)
            row["tokensToday"] = spend.by_date(job.id).get(job.date_of(now), 0)
        rows.append(row)
    return rows


def guard_problems(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`status`'s problems for the guards: a due job a guard holds, a guard that cannot read its
    figure, a job past its tokens for today."""
    problems = []
    for row in rows:
        if row["held"]:
            problems.append({"code": f"cron_held_{row['reason']}",
                             "message": f"cron job {row['name']} is due and held by a spend guard: {row['detail']}"})
        elif row["unreadable"]:
            problems.append({"code": "cron_usage_unreadable",
                             "message": f"cron job {row['name']}: {row['detail']}"})
        if row["maxTokensPerDay"] is not None and (row["tokensToday"] or 0) >= row["maxTokensPerDay"]:
            problems.append({"code": "cron_token_cap_reached",
                             "message": f"cron job {row['name']}: {row['tokensToday']:,} tokens attributed today, "
                                        f"--max-tokens-per-day {row['maxTokensPerDay']:,}: skipped until tomorrow"})
    return problems

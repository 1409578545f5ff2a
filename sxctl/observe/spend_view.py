"""What the spend guards do now, for `status`, `doctor`, `watch` and `metrics`: the live
session's usage figures and, for each scheduled job with a guard (its own or the workspace
budget's), whether a guard holds it and why, which figures it cannot read, and its tokens today
against --max-tokens-per-day — by the pass's own rules (cron/spend/guards.py, cron/spend/ledger.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..clock import Clock
from ..cron.spend.guards import spend_verdict
from ..cron.spend.ledger import read_spend, tokens_by_date
from ..cron.spend.rules import effective_guards
from ..cron.timeline.schedule import job_zone, local_time
from ..errors import InvalidDataError
from ..project.usage import Usage, read_usage, usage_line


def session_usage(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The `usage` part of `status`: every figure (None: unreadable), why each unreadable one is,
    and the one-line summary."""
    usage: Usage = read_usage(stats)
    return {**usage.to_json(), "line": usage_line(usage)}


def guard_states(ws, store: dict[str, Any], policy: dict[str, Any], project: Path,
                 clock: Clock) -> list[dict[str, Any]]:
    """One row per scheduled job under a guard: `held` (due now and a guard stops its dispatch),
    `reason`/`detail`, `unreadable` (figure -> why), `tokensToday`/`maxTokensPerDay`."""
    now = clock.now_ms()
    budget = policy.get("budget")
    spend: dict[str, Any] | None = None
    rows = []
    for job in store["jobs"]:
        if job["source"] == "built_in" or job["lifecycle"]["status"] != "scheduled":
            continue
        entry = policy["jobs"].get(job["id"], {})
        guards = effective_guards(entry, budget)
        verdict = spend_verdict(job, entry, budget, project=project, to="live", clock=clock, workspace=ws.root)
        cap = guards.get("maxTokensPerDay")
        if verdict is None and cap is None:
            continue
        due = job["lifecycle"]["nextRunAtMs"] <= now
        row: dict[str, Any] = {"name": job["name"], "jobId": job["id"], "due": due,
                               "held": bool(verdict is not None and verdict.reason is not None and due),
                               "reason": verdict.reason if verdict is not None else None,
                               "detail": (verdict.detail or None) if verdict is not None else None,
                               "session": verdict.session if verdict is not None else None,
                               "unreadable": dict(verdict.unreadable) if verdict is not None else {},
                               "maxTokensPerDay": cap, "tokensToday": None}
        if cap is not None:
            if spend is None:
                try:
                    spend = read_spend(ws.scheduler)
                except InvalidDataError:
                    spend = {"runs": []}
            today = local_time(now, job_zone(job, entry)).date().isoformat()
            row["tokensToday"] = tokens_by_date(spend, job["id"]).get(today, 0)
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

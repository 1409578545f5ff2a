"""`doctor`'s check of the spend guards (cron/spend/guards.py): shown only when a job has a guard (its
own or the workspace budget's). A due job a guard holds, a guard that cannot read its figure, a
job past its tokens for today: a warning each, with the fix; else ok, with the session's usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..clock import Clock
from ..cron.policy.file import read_policy
from ..observe.spend_view import guard_problems, guard_states, session_usage
from .findings import Findings

FIXES = {
    "cron_held_rate_limit": "it runs once the figure falls (or past --hold-max it is skipped); "
                            "`sxctl cron update NAME --rate-limit-ceiling 0` removes the job's own guard, "
                            "`sxctl cron budget show` names the workspace's",
    "cron_held_token_budget": "compact or restart the agent (a new session counts from 0), "
                              "or raise --max-session-tokens",
    "cron_held_usage_unreadable": "`sxctl session show --json` shows the agent's usage block; "
                                  "--on-missing-usage run lets the job run without it",
    "cron_usage_unreadable": "`sxctl session show --json` shows the agent's usage block",
    "cron_token_cap_reached": "it runs again tomorrow (the job's zone), or raise --max-tokens-per-day",
}


def check_spend(found: Findings, ws, store: dict[str, Any], project: Path, session, clock: Clock) -> None:
    rows = guard_states(ws, store, read_policy(ws), project, clock)
    if not rows:
        return
    usage = session_usage(session.stats if session is not None else None)["line"]
    problems = guard_problems(rows)
    for problem in problems:
        found.add("spend guards", "warn", problem["message"], FIXES.get(problem["code"], "sxctl status"))
    if not problems:
        found.add("spend guards", "ok", f"{len(rows)} guarded job(s), none held; the session's usage: {usage}")

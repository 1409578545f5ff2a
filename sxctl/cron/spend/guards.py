"""The spend guards: whether the pass may dispatch a due occurrence into the agent's session,
judged from the agent's own usage figures (`stats.json`'s `usage` block, read by
project/usage.py). A job follows its own guards, else the workspace budget's
(cron/spend/rules.py):

- `rateLimitCeiling`: no dispatch while the session's `rl_5h` or `rl_7d` is at or above it
  (`rate_limit`);
- `maxSessionTokens`: no dispatch into a session whose `total_tokens` is at or above it
  (`token_budget`);
- a figure a guard needs that cannot be read: `onMissingUsage` `run` (the default; the guard
  says so in status/doctor) or `hold` (`usage_unreadable`).

A held occurrence waits, unclaimed, like one held for want of a live agent, up to the job's
--hold-max; past it, it is skipped with the guard's reason (cron/timeline/fate.py). `maxTokensPerDay` is
counted from the runs' attributed tokens (cron/spend/ledger.py) and skips, like --max-runs-per-day.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...project import SessionInfo, freshest_live, list_sessions, session_info
from ...project.layout import ProjectLayout, is_valid_session_id
from ...project.usage import RATE_FIGURES, Usage, read_usage
from ..store.targets import agent_target, holds_project

DISPATCH_GUARDS = ("rateLimitCeiling", "maxSessionTokens")


@dataclass
class GuardVerdict:
    """What the guards say of one job now: `reason` (None: it may be dispatched; else
    rate_limit, token_budget or usage_unreadable), `detail` in words, the `session` judged and
    its `usage`, and `unreadable` (the figures a guard needs that did not read, with why)."""

    reason: str | None
    detail: str
    session: str | None
    usage: Usage
    unreadable: dict[str, str] = field(default_factory=dict)
    guards: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "detail": self.detail or None, "session": self.session,
                "unreadable": dict(self.unreadable)}


def target_session(where: Path, conversation: str, clock: Clock) -> SessionInfo | None:
    """The session a dispatch would write to now: the live one, or the named one (None: none)."""
    if not holds_project(where):
        return None
    if conversation == "live":
        return freshest_live(list_sessions(where, clock))
    if not is_valid_session_id(conversation):
        return None
    folder = ProjectLayout(where).sessions / conversation
    return session_info(folder, clock) if folder.is_dir() else None


def judge(guards: dict[str, Any], usage: Usage, session: str | None) -> GuardVerdict:
    """THE rule of the dispatch guards on one usage block."""
    unreadable: dict[str, str] = {}
    ceiling = guards.get("rateLimitCeiling")
    if ceiling is not None:
        for name in RATE_FIGURES:
            value = usage.get(name)
            if value is None:
                unreadable[name] = usage.unreadable.get(name, "missing")
            elif value >= ceiling:
                return GuardVerdict("rate_limit", f"{name} {value:g} is at or above --rate-limit-ceiling {ceiling:g}",
                                    session, usage, unreadable, guards)
    most = guards.get("maxSessionTokens")
    if most is not None:
        total = usage.get("total_tokens")
        if total is None:
            unreadable["total_tokens"] = usage.unreadable.get("total_tokens", "missing")
        elif total >= most:
            return GuardVerdict("token_budget", f"session {session} has used {total:,} tokens, at or above "
                                f"--max-session-tokens {most:,}", session, usage, unreadable, guards)
    if unreadable:
        why = "; ".join(f"{name} {problem}" for name, problem in unreadable.items())
        if guards.get("onMissingUsage") == "hold":
            return GuardVerdict("usage_unreadable", f"usage unreadable ({why}); --on-missing-usage hold",
                                session, usage, unreadable, guards)
        return GuardVerdict(None, f"usage unreadable ({why}); runs (--on-missing-usage run)", session, usage,
                            unreadable, guards)
    return GuardVerdict(None, "", session, usage, unreadable, guards)


def spend_verdict(job: dict[str, Any], guards: dict[str, Any], *, project: Path, to: str, clock: Clock,
                  workspace: Path) -> GuardVerdict | None:
    """The dispatch guards' verdict now on a job (its stored record) that follows `guards`
    (rules.effective_guards), or None when it has none or sends to no agent session. With no
    session to judge (none live; the hold for a live agent is another rule), its figures are
    unreadable."""
    if not any(guards.get(key) is not None for key in DISPATCH_GUARDS):
        return None
    target = agent_target(job, project, to, workspace=workspace)
    if target is None:
        return None
    info = target_session(*target, clock)
    if info is None:  # the figures of a stopped agent's session are not the next session's; it waits
        return GuardVerdict(None, "no live session to read its figures from: the job waits for a live agent "
                            "(--hold-max), and its guards judge that agent's figures", None,
                            read_usage(None, "no live session to read them from"), {}, guards)
    return judge(guards, read_usage(info.stats), info.id)

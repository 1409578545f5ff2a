"""`sxctl cron budget set/show/clear`: the workspace's spend guards (cron/spend/guards.py), which every
job without a guard of its own follows. Kept in sxctl's policy file as `budget` (format 3),
written under the store lock like every policy edit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.spend.rules import GUARD_KEYS, GuardOptions, apply_guards
from ..cron.store.transaction import mutate_store
from ..errors import UsageError
from ..record import record
from ..report import Reporter
from .scope import find_workspace

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace


@record
class Budget:
    """The workspace budget: each guard's setting (None: not set)."""

    workspace: Workspace
    budget: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root),
                "budget": {key: self.budget.get(key) for key in GUARD_KEYS}}


def show_budget(*, workspace=None, project=None, session: str | None = None) -> Budget:
    """The workspace budget as the policy file keeps it."""
    ws = find_workspace(workspace, project=project, session=session)
    return Budget(ws, dict(read_policy(ws).get("budget") or {}))


def set_budget(*, rate_limit_ceiling: float | None = None, max_session_tokens: int | None = None,
               max_tokens_per_day: int | None = None, on_missing_usage: str | None = None, clear: bool = False,
               workspace=None, project=None, session: str | None = None, lock_wait: float = 10.0,
               clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> Budget:
    """Change the workspace budget: the guards given (0 clears a number, `default` the missing-usage
    rule), or with `clear` every one. At least one is needed (exit 2)."""
    options = GuardOptions(rate_limit_ceiling, max_session_tokens, max_tokens_per_day, on_missing_usage)
    if not clear and not options.given:
        raise UsageError("give at least one of --rate-limit-ceiling, --max-session-tokens, --max-tokens-per-day, "
                         "--on-missing-usage (`sxctl cron budget clear` removes them all)")
    ws = find_workspace(workspace, project=project, session=session)
    kept: dict[str, Any] = {}

    def change(policy: dict[str, Any], store: dict[str, Any], now: int) -> None:
        budget = {} if clear else dict(policy.get("budget") or {})
        apply_guards(budget, options)
        if budget:
            policy["budget"] = budget
        else:
            policy.pop("budget", None)
        kept.update(budget)

    mutate_store(ws, lambda store, now: None, clock=clock, report=report, lock_wait_s=lock_wait,
                 policy_change=change)
    return Budget(ws, kept)

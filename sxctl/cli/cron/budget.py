"""`sxctl cron budget set/show/clear`: the workspace's spend guards."""

from __future__ import annotations

import click

from ...api import set_budget, show_budget
from ..output import Command, Group, emit, in_workspace, reporter, say, settings
from .options import guard_options, lock_wait_option


def _say_budget(doc: dict) -> None:
    budget = doc["budget"]
    shown = [(flag, budget[key]) for flag, key in (("--rate-limit-ceiling", "rateLimitCeiling"),
                                                   ("--max-session-tokens", "maxSessionTokens"),
                                                   ("--max-tokens-per-day", "maxTokensPerDay"),
                                                   ("--on-missing-usage", "onMissingUsage")) if budget[key] is not None]
    if not shown:
        say("no workspace budget: only jobs with guards of their own are guarded")
    for flag, value in shown:
        say(f"{flag} {value}")


@click.group("budget", cls=Group)
def budget() -> None:
    """Spend guards for every job without its own, from the agent's usage figures (stats.json).

    \b
    Examples:
      sxctl cron budget set --rate-limit-ceiling 0.8 --max-tokens-per-day 2000000
      sxctl cron budget show
    """


def _guards(command):
    for option in reversed(guard_options(job=False)):
        command = option(command)
    return command


@budget.command("set", cls=Command, mutating=True)
@_guards
@lock_wait_option
def set_(rate_limit_ceiling, max_session_tokens, max_tokens_per_day, on_missing_usage, lock_wait_s) -> None:
    """Set workspace guards (0 removes a number's guard; the others are kept).

    \b
    Example:
      sxctl cron budget set --rate-limit-ceiling 0.8 --max-session-tokens 5000000
    """
    result = set_budget(rate_limit_ceiling=rate_limit_ceiling, max_session_tokens=max_session_tokens,
                        max_tokens_per_day=max_tokens_per_day, on_missing_usage=on_missing_usage,
                        lock_wait=lock_wait_s, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: _say_budget(result.to_json()))


@budget.command("clear", cls=Command, mutating=True)
@lock_wait_option
def clear(lock_wait_s) -> None:
    """Remove every workspace guard (jobs keep their own).

    \b
    Example:
      sxctl cron budget clear
    """
    result = set_budget(clear=True, lock_wait=lock_wait_s, clock=settings().clock, report=reporter(),
                        **in_workspace())
    emit(result.to_json(), lambda: _say_budget(result.to_json()))


@budget.command("show", cls=Command)
def show() -> None:
    """Show the workspace guards.

    \b
    Example:
      sxctl cron budget show --json
    """
    result = show_budget(**in_workspace())
    emit(result.to_json(), lambda: _say_budget(result.to_json()))

"""The settings of the spend guards (cron/spend/guards.py) in sxctl's policy file (cron/policy/file.py): per
job `rateLimitCeiling`, `maxSessionTokens`, `maxTokensPerDay` and `onMissingUsage`, and the
workspace `budget` with the same keys that every job without its own follows. A file that holds
any of them, or a skip one of them caused, is format 3: an sxctl that knows only formats 1 and 2
refuses it (exit 5) rather than drop a guard."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import UsageError
from ..store.schema_kit import MAX_SAFE_INT, Enum, Int, Node, Obj, SchemaError, opt

GUARD_KEYS = ("rateLimitCeiling", "maxSessionTokens", "maxTokensPerDay", "onMissingUsage")
#: why a guard holds a due occurrence (and the skip reason once it is given up past --hold-max)
GUARD_REASONS = ("rate_limit", "token_budget", "usage_unreadable")
#: the skip reasons of format 3
SPEND_SKIP_REASONS = (*GUARD_REASONS, "max_tokens_per_day")
MAX_TOKENS_SETTING = MAX_SAFE_INT


class Fraction(Node):
    """A number (never a bool) above 0 and at most 1."""

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SchemaError(path, "must be a number")
        if not (math.isfinite(value) and 0 < value <= 1):
            raise SchemaError(path, "must be above 0 and at most 1")


GUARD_FIELDS = [
    opt("rateLimitCeiling", Fraction()),
    opt("maxSessionTokens", Int(1, MAX_TOKENS_SETTING)),
    opt("maxTokensPerDay", Int(1, MAX_TOKENS_SETTING)),
    opt("onMissingUsage", Enum(("run", "hold"))),
]
BUDGET = Obj(GUARD_FIELDS)


@dataclass
class GuardOptions:
    """The guard flags of `cron add/update` and `cron budget set` (None: not given; 0 clears a
    number, `default` clears --on-missing-usage)."""

    rate_limit_ceiling: float | None = None
    max_session_tokens: int | None = None
    max_tokens_per_day: int | None = None
    on_missing_usage: str | None = None

    @property
    def given(self) -> bool:
        return any(value is not None for value in vars(self).values())


def apply_guards(entry: dict[str, Any], options: GuardOptions) -> None:
    """Put the guard flags given into `entry` (a job's or the budget), checking each (exit 2)."""
    ceiling = options.rate_limit_ceiling
    if ceiling is not None:
        if not (math.isfinite(ceiling) and 0 <= ceiling <= 1):
            raise UsageError(f"--rate-limit-ceiling {ceiling} must be a fraction between 0 and 1 (0: no ceiling)")
        _put(entry, "rateLimitCeiling", ceiling or None)
    for key, value, flag in (("maxSessionTokens", options.max_session_tokens, "--max-session-tokens"),
                             ("maxTokensPerDay", options.max_tokens_per_day, "--max-tokens-per-day")):
        if value is not None:
            if not 0 <= value <= MAX_TOKENS_SETTING:
                raise UsageError(f"{flag} {value} must be between 0 and {MAX_TOKENS_SETTING} (0: no limit)")
            _put(entry, key, value or None)
    if options.on_missing_usage is not None:
        if options.on_missing_usage not in ("run", "hold", "default"):
            raise UsageError(f"--on-missing-usage {options.on_missing_usage!r} must be run or hold")
        _put(entry, "onMissingUsage", None if options.on_missing_usage == "default" else options.on_missing_usage)


def _put(entry: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        entry.pop(key, None)
    else:
        entry[key] = value


def effective_guards(entry: dict[str, Any], budget: dict[str, Any] | None) -> dict[str, Any]:
    """The guards a job follows: each setting of its own, else the workspace budget's, else none
    (`onMissingUsage` defaults to `run`), with where each came from (`source`: key -> job|budget)."""
    if not entry and not budget:  # most jobs (a list of 10,000 asks for each): no setting anywhere
        return {"source": {}, "onMissingUsage": "run"}
    found: dict[str, Any] = {"source": {}}
    for key in GUARD_KEYS:
        if key in entry:
            found[key], found["source"][key] = entry[key], "job"
        elif budget and key in budget:
            found[key], found["source"][key] = budget[key], "budget"
    found.setdefault("onMissingUsage", "run")
    return found


def is_guarded(entry: dict[str, Any], budget: dict[str, Any] | None) -> bool:
    """Whether a job follows a spend guard that needs its runs' tokens or figures (every run of
    it is attributed; `cron runs` says why one has no record)."""
    return any(effective_guards(entry, budget).get(key) is not None for key in GUARD_KEYS[:3])


def describe_guards(entry: dict[str, Any]) -> dict[str, Any]:
    """A job's own guard settings for `cron list/show --json` (None: not set; the budget's apply)."""
    return {"rateLimitCeiling": entry.get("rateLimitCeiling"), "maxSessionTokens": entry.get("maxSessionTokens"),
            "maxTokensPerDay": entry.get("maxTokensPerDay"), "onMissingUsage": entry.get("onMissingUsage")}

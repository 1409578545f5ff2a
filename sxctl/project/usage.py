"""The agent's own usage figures, read from the `usage` block of its `stats.json` (sessions.md §6):
token counters and the provider's rate-limit use. THE one reader (`read_usage`): the agent
writes the block and anyone who can write the session folder can forge it, so every figure is
checked on its own and a bad one is *unreadable, with the reason*, never a crash and never a
guess. The spend guards (cron/spend/guards.py) act on what it returns.
"""

from __future__ import annotations

import math
from typing import Any

from ..record import Factory, record

#: the token counters, whole numbers >= 0 (total_tokens is what the guards use)
TOKEN_FIGURES = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens",
                 "total_tokens")
#: the provider's rate-limit use over 5 hours and 7 days, fractions 0.0-1.0
RATE_FIGURES = ("rl_5h", "rl_7d")
FIGURES = TOKEN_FIGURES + RATE_FIGURES
#: a counter beyond this is not believed (JSON's safe integers: above it two counts compare equal)
MAX_TOKENS = 2**53 - 1
#: turns of `history` looked at (the agent keeps "the last turns"; a forged list is not walked)
MAX_HISTORY = 1000


@record
class Usage:
    """The usage block of one `stats.json`: `figures` (name -> value, only those that read) and
    `unreadable` (name -> why, for every figure of FIGURES that did not), `history_turns` (the
    length of a `history` list, None without one)."""

    figures: dict[str, Any] = Factory(dict)  # type: ignore[assignment]
    unreadable: dict[str, str] = Factory(dict)  # type: ignore[assignment]
    history_turns: int | None = None

    def get(self, name: str) -> Any:
        """The figure, or None when it is unreadable."""
        return self.figures.get(name)

    def to_json(self) -> dict[str, Any]:
        return {**{name: self.figures.get(name) for name in FIGURES}, "unreadable": dict(self.unreadable),
                "historyTurns": self.history_turns}


def figure_problem(name: str, value: Any) -> str | None:
    """Why `value` is not a usable figure `name`, in words (None: it is)."""
    if isinstance(value, bool):
        return f"is a boolean ({str(value).lower()}), not a number"
    if isinstance(value, str):
        return f"is a string ({value[:20]!r}), not a number"
    if not isinstance(value, (int, float)):
        return f"is {'null' if value is None else type(value).__name__}, not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if value < 0:
        return f"is negative ({value})"
    if name in RATE_FIGURES:
        if value > 1:
            return f"is {value}, above 1.0 (a fraction of the limit)"
        return None
    if isinstance(value, float) and not value.is_integer():
        return f"is {value}, not a whole number of tokens"
    if value > MAX_TOKENS:
        return f"is too large (above {MAX_TOKENS})"
    return None


def read_usage(stats: dict[str, Any] | None, absent: str = "no readable stats.json") -> Usage:
    """The `usage` block of a parsed `stats.json` (None: none could be read, `absent` says why),
    each figure checked on its own: a missing, partial or hostile block (strings, booleans,
    negative, NaN, huge, a rate above 1.0) gives the figures that read and, for each other one,
    why not. Never raises."""
    usage = Usage()
    if stats is None:
        usage.unreadable = dict.fromkeys(FIGURES, absent)
        return usage
    block = stats.get("usage")
    if block is None:
        usage.unreadable = dict.fromkeys(FIGURES, "stats.json has no usage block")
        return usage
    if not isinstance(block, dict):
        usage.unreadable = dict.fromkeys(FIGURES, "stats.json's usage is not an object")
        return usage
    for name in FIGURES:
        if name not in block:
            usage.unreadable[name] = "missing"
            continue
        problem = figure_problem(name, block[name])
        if problem is None:
            value = block[name]
            usage.figures[name] = float(value) if name in RATE_FIGURES else int(value)
        else:
            usage.unreadable[name] = problem
    history = stats.get("history")
    if isinstance(history, list):
        usage.history_turns = min(len(history), MAX_HISTORY)
    return usage


def usage_line(usage: Usage) -> str:
    """`51,331 tokens, rl 5h 12% 7d 3%` (`?` for an unreadable figure): status and doctor."""
    total = usage.get("total_tokens")

    def rate(name: str) -> str:
        value = usage.get(name)
        return "?" if value is None else f"{round(value * 100)}%"

    return f"{'?' if total is None else f'{total:,}'} tokens, rl 5h {rate('rl_5h')} 7d {rate('rl_7d')}"

"""The reference agent's `usage` block (reference-agent.md §6): a stand-in for a model's
counters, so that the spend guards (cron/spend/guards.py) can be tested end to end. Tokens grow with
every turn (the context grows: each turn reads more than the last); the rate-limit use `rl_5h`
rises by `--rl-per-turn` with each turn that ended within the last `--rl-window` (default 5 h)
and so falls again as turns leave the window, on the agent's clock; `rl_7d` does the same over
7 days at a tenth of the rate. `history` keeps the last turns' figures."""

from __future__ import annotations

from typing import Any

from ..clock import Clock

DEFAULT_TOKENS_PER_TURN = 1500
DEFAULT_RL_PER_TURN = 0.02
DEFAULT_RL_WINDOW_S = 5 * 3600.0
WEEK_MS = 7 * 86_400_000
HISTORY_TURNS = 10


class UsageModel:
    """The counters of one agent run: `turn_ended(text)` after each turn, `block()` for stats.json."""

    def __init__(self, clock: Clock, *, tokens_per_turn: int = DEFAULT_TOKENS_PER_TURN,
                 rl_per_turn: float = DEFAULT_RL_PER_TURN, rl_window_s: float = DEFAULT_RL_WINDOW_S) -> None:
        self.clock = clock
        self.tokens_per_turn = tokens_per_turn
        self.rl_per_turn = rl_per_turn
        self.rl_window_ms = round(rl_window_s * 1000)
        self.counters = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_creation_tokens": 0,
                         "reasoning_tokens": 0}
        self.ended: list[int] = []  # when each turn of the last week ended (epoch ms)
        self.history: list[dict[str, Any]] = []
        self.turns = 0

    def turn_ended(self, text: str = "") -> None:
        """One more turn: it read the conversation so far plus its text, and wrote its answer."""
        self.turns += 1
        turns = self.turns
        output = max(1, self.tokens_per_turn // 5)
        fresh = self.tokens_per_turn - output + len(text) // 4
        context = self.counters["cache_read_tokens"] + self.counters["cache_creation_tokens"]
        self.counters["input_tokens"] += fresh
        self.counters["output_tokens"] += output
        self.counters["cache_read_tokens"] += context // max(turns, 1)
        self.counters["cache_creation_tokens"] += fresh
        now = self.clock.now_ms()
        self.ended = [at for at in self.ended if now - at < WEEK_MS] + [now]
        self.history = [*self.history, {"ended_ms": now, "input_tokens": fresh, "output_tokens": output}]
        self.history = self.history[-HISTORY_TURNS:]

    def block(self) -> dict[str, Any]:
        """The `usage` block as the agent publishes it now."""
        now = self.clock.now_ms()
        recent = sum(1 for at in self.ended if now - at < self.rl_window_ms)
        week = sum(1 for at in self.ended if now - at < WEEK_MS)
        total = self.counters["input_tokens"] + self.counters["output_tokens"]
        return {**self.counters, "total_tokens": total,
                "rl_5h": round(min(1.0, recent * self.rl_per_turn), 4),
                "rl_7d": round(min(1.0, week * self.rl_per_turn / 10), 4),
                "prompt_tps": 0, "gen_tps": 0, "speed_estimated": 0}

"""Wall and monotonic time behind one object, so time-dependent rules are tested without sleeping.

Every time on disk is wall-clock epoch milliseconds; waits and timeouts use the monotonic clock.
Core functions take a `clock` argument defaulting to `SYSTEM_CLOCK`; tests pass a `FakeClock`.
"""

from __future__ import annotations

import time


class Clock:
    """The real clock."""

    def time_ns(self) -> int:
        return time.time_ns()

    def now_ms(self) -> int:
        return self.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock(Clock):
    """A clock that moves only when told to (or when something sleeps on it)."""

    def __init__(self, now_ms: int = 1_789_974_090_000) -> None:
        self._ns = now_ms * 1_000_000
        self._mono = 1000.0

    def time_ns(self) -> int:
        return self._ns

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._ns += round(seconds * 1_000_000_000)
        self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


SYSTEM_CLOCK = Clock()


#: a time recorded further ahead of this machine's clock than this (a heartbeat, a lock's stamp)
#: was written by a clock that disagrees: doctor fails it, metrics do not believe it
CLOCK_SKEW_MS = 60_000

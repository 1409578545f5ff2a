"""The shortest time between two runs of a schedule over the coming year, and when it falls
(`--jitter` must be shorter: cron/policy/jitter.py). An `every` schedule's runs are always
`everyMs` apart; a cron pattern's gaps follow sxctl's DST policy (occurrences.py, cron-store.md §7):

- within a stretch of constant UTC offset, the gaps are those of the matching wall times, found
  from the pattern's field sets one matching day at a time (at most 366 days, whatever the pattern);
- around each offset change of the year, the occurrences near it are mapped wall by wall as
  occurrences.py maps them (a spring-forward gap's walls fire at the offset before it, a fold's
  first pass always fires and its second for a `*` or a step in the hour field only): that is where
  a day's runs move closer (Europe/Berlin's `0 0,12 * * *` is 11 h apart on the day DST starts).

An every-second pattern costs one walk over the 86,400 seconds of a day and the few thousand
walls around each change, never a walk over the year's occurrences.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from ...timeparse import LATEST_SCHEDULABLE_MS
from .occurrences import Walls, _next_change, _offset, _secs, _wall
from .schedule import CronPattern, load_cron_zone, next_run

YEAR_MS = 366 * 86_400_000  # "a year from now": a leap year's days too
_DAY_S = 86_400


@dataclass(frozen=True)
class Gap:
    """The shortest time between two consecutive runs (`ms`) and the earlier run of the first
    pair that is that close (`at_ms`)."""

    ms: int
    at_ms: int


class _Shortest:
    """The shortest gap seen so far, in seconds, the earliest pair winning a tie."""

    def __init__(self) -> None:
        self.gap: tuple[int, int] | None = None  # (seconds apart, the earlier run's instant)

    def see(self, gap: int, at: int) -> None:
        if gap > 0 and (self.gap is None or (gap, at) < self.gap):
            self.gap = (gap, at)


def shortest_gap(schedule: dict[str, Any], now_ms: int, span_ms: int = YEAR_MS) -> Gap | None:
    """The shortest gap between two consecutive runs of `schedule` from `now_ms` to `span_ms`
    later (None: fewer than two runs, or a one-shot)."""
    kind = schedule["kind"]
    if kind == "at":
        return None
    if kind == "every":
        first = next_run(schedule, now_ms)
        return None if first is None else Gap(schedule["everyMs"], first[0])
    pattern, zone = CronPattern.parse(schedule["expr"]), load_cron_zone(schedule["tz"])
    end_ms = min(now_ms + span_ms, LATEST_SCHEDULABLE_MS - 2 * _DAY_S * 1000)
    if end_ms <= now_ms:
        return None
    shortest = _Shortest()
    _cron_gaps(pattern, zone, now_ms // 1000, end_ms // 1000, shortest)
    return None if shortest.gap is None else Gap(shortest.gap[0] * 1000, shortest.gap[1] * 1000)


def _cron_gaps(pattern: CronPattern, zone, start: int, end: int, shortest: _Shortest) -> None:
    """Every gap of the pattern between the instants `start` and `end` (seconds), into `shortest`:
    each stretch of constant offset by its walls, each change by the occurrences around it."""
    walls = pattern.walls
    day = _Day(walls)
    t, low_wall = start, start + _offset(zone, start) + 1  # the runs after `start`
    while True:
        offset = _offset(zone, t)
        change = _next_change(zone, t, offset, end)
        if change is None:
            day.stretch(low_wall, end + offset + 1, offset, shortest)
            return
        later = _offset(zone, change)
        day.stretch(low_wall, change + min(offset, later), offset, shortest)
        _around_change(walls, change, offset, later, low_wall, shortest)
        t, low_wall = change, change + max(offset, later)


class _Day:
    """A pattern's times of day (seconds after midnight, sorted) and the shortest gap among them."""

    def __init__(self, walls: Walls) -> None:
        self.walls = walls
        self.times = [hour * 3600 + minute * 60 + second
                      for hour in walls.hours for minute in walls.minutes for second in walls.seconds]
        self.closest = _closest(self.times)  # (gap, index of its first time) on a whole matching day

    def stretch(self, low: int, high: int, offset: int, shortest: _Shortest) -> None:
        """The gaps between the matching walls in [low, high) (seconds of wall time), all read
        with `offset`: one stretch of constant offset."""
        if high <= low:
            return
        times, previous = self.times, None
        for midnight in self.walls._days(_wall(low), _wall(high - 1)):
            base = _secs(midnight)
            first = bisect_left(times, low - base) if base < low else 0
            last = bisect_left(times, high - base) if base + _DAY_S > high else len(times)
            if first >= last:
                continue
            if previous is not None:
                shortest.see(base + times[first] - previous, previous - offset)
            closest = self.closest if (first, last) == (0, len(times)) else _closest(times[first:last])
            if closest is not None:
                shortest.see(closest[0], base + times[first + closest[1]] - offset)
            previous = base + times[last - 1]


def _closest(times: list[int]) -> tuple[int, int] | None:
    """(the shortest gap between consecutive `times`, the index of the first of the pair)."""
    if len(times) < 2:
        return None
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    gap = min(gaps)
    return gap, gaps.index(gap)


def _around_change(walls: Walls, change: int, before: int, after: int, stretch_wall: int,
                   shortest: _Shortest) -> None:
    """The gaps between the occurrences near the offset change at `change` (from offset `before`
    to `after`): the last wall before the skipped or repeated walls, those walls, and the walls
    of the new offset whose instants can fall among theirs, mapped as occurrences.py maps them
    (`stretch_wall`: where the stretch before the change begins, in wall seconds)."""
    low, high = change + min(before, after), change + max(before, after)
    shift = high - low
    instants: set[int] = set()
    previous = walls.last_at_or_before(_wall(low - 1))
    if previous is not None and _secs(previous) >= stretch_wall:  # a wall of this stretch, not an earlier one
        instants.add(_secs(previous) - before)
    for wall in walls.between(_wall(low), _wall(high + shift - 1)):
        seconds = _secs(wall)
        if seconds >= high:
            instants.add(seconds - after)  # the new offset's walls
        elif after > before:
            instants.add(seconds - before)  # skipped by spring-forward: fired at the offset before the gap
        else:
            instants.add(seconds - before)  # a fold's first pass always fires,
            if walls.pattern.hour_follows_elapsed_time:
                instants.add(seconds - after)  # its second pass for `*` or a step in the hour field
    following = walls.first_at_or_after(_wall(high + shift))
    if following is not None:
        instants.add(_secs(following) - after)
    ordered = sorted(instants)
    for earlier, later in zip(ordered, ordered[1:], strict=False):
        shortest.see(later - earlier, earlier)

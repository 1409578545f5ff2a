"""A cron pattern's occurrences in a zone by arithmetic, one stretch of constant UTC offset at a
time, with sxctl's DST policy (cron-store.md §7, `cron_pattern.CronPattern`):

- within a stretch, the matching wall times map one to one to instants (wall - offset);
- a spring-forward change skips the walls [change + old, change + new): each that matches fires
  once at the offset before the gap (shifted forward by the gap's length), and one that lands on an
  instant the pattern already has counts once;
- a fall-back change repeats the walls [change + new, change + old): the first pass (the stretch
  before the change) always fires, the second only for a pattern with `*` or a step in the hour
  field (elapsed time).

The cost is a few croniter calls per stretch and per matching day, never a walk per second, so an
every-second pattern across a DST change is as cheap as an hourly one. Offset changes are found by
probing every 6 hours and bisecting to the second (no zone changes its offset twice in 6 hours).
"""

from __future__ import annotations

import copy
import time
from bisect import bisect_left
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Protocol


class CronPattern(Protocol):
    """What this module needs of `cron_pattern.CronPattern` (which calls it)."""

    @property
    def fields(self) -> tuple[str, ...]: ...

    @property
    def seconds_first(self) -> bool: ...

    @property
    def hour_follows_elapsed_time(self) -> bool: ...

    @property
    def expanded(self) -> list[list]: ...

    @property
    def walls(self) -> Walls: ...

    def _walls(self, start: datetime, *, backwards: bool = False) -> Iterator[datetime]: ...

_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_PROBE_S = 6 * 3600
_LAST_S = (datetime(9999, 12, 30) - _EPOCH) // _SECOND  # probes stay inside what a datetime holds
_FIRST_S = (datetime(1, 1, 2) - _EPOCH) // _SECOND
_MAX_GAP_S = 26 * 3600  # the longest gap a zone ever had is a day (Pacific/Apia, 2011-12-30)
_MAX_STRETCHES = 100_000  # a pattern that never matches again ends the search (croniter gives up first)


def _wall(seconds: int) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


def _secs(wall: datetime) -> int:
    return (wall - _EPOCH) // _SECOND


def _offset(zone, seconds: int) -> int:
    """The zone's UTC offset (seconds) at an instant."""
    moment = datetime.fromtimestamp(min(max(seconds, _FIRST_S), _LAST_S), UTC).astimezone(zone)
    return int(moment.utcoffset().total_seconds())  # type: ignore[union-attr]


def _second_reading(zone, seconds: int) -> bool:
    """Whether an instant is the second reading of a repeated (fall-back) wall time."""
    return datetime.fromtimestamp(min(max(seconds, _FIRST_S), _LAST_S), UTC).astimezone(zone).fold == 1


def _bisect_change(zone, before: int, after: int, offset: int) -> int:
    """The first instant in (before, after] whose offset is not `offset` (`before` has it, `after` not)."""
    while after - before > 1:
        middle = (before + after) // 2
        if _offset(zone, middle) == offset:
            before = middle
        else:
            after = middle
    return after


def _next_change(zone, start: int, offset: int, limit: int) -> int | None:
    """The first instant in (start, limit] whose offset is not `offset`, or None."""
    low = start
    while low < limit:
        high = min(low + _PROBE_S, limit)
        if _offset(zone, high) != offset:
            return _bisect_change(zone, low, high, offset)
        low = high
    return None


def _prev_change(zone, start: int, offset: int, limit: int) -> int | None:
    """The last instant in [limit, start) whose offset is not `offset`, or None."""
    high = start
    while high > limit:
        low = max(high - _PROBE_S, limit)
        if _offset(zone, low) != offset:
            return _bisect_change(zone, low, high, _offset(zone, low)) - 1
        high = low
    return None


def _gap_before(zone, seconds: int, offset: int) -> tuple[int, int] | None:
    """(the change, the offset before it) when the stretch holding `seconds` began with a gap
    whose shifted walls may still be ahead (within a day)."""
    change = _prev_change(zone, seconds, offset, seconds - _MAX_GAP_S)
    if change is None or _offset(zone, change) >= offset:
        return None
    return change + 1, _offset(zone, change)


def _fold_span(zone, seconds: int) -> tuple[int, int]:
    """(first instant, first instant after) of the second readings that `seconds` is one of."""
    offset = _offset(zone, seconds)
    wall = _wall(seconds + offset).replace(tzinfo=zone, fold=0)
    earlier = int(wall.utcoffset().total_seconds())  # type: ignore[union-attr]
    first_reading = seconds + offset - earlier
    change = _bisect_change(zone, first_reading, seconds, earlier)
    return change, change + earlier - offset


class Walls:
    """The matching wall times of a pattern, found and counted by croniter and set arithmetic."""

    def __init__(self, pattern: CronPattern) -> None:
        from croniter import croniter  # heavy: only when a cron expression is evaluated

        self.pattern = pattern
        expanded = pattern.expanded
        self.minutes = _values(expanded[0], 60)
        self.hours = _values(expanded[1], 24)
        self.seconds = _values(expanded[5], 60) if pattern.seconds_first else [0]
        day_fields = pattern.fields[3:6] if pattern.seconds_first else pattern.fields[2:5]
        self.day_pattern = "0 0 " + " ".join(day_fields)
        self._day_walker = croniter(self.day_pattern, ret_type=datetime)  # each walk starts from a copy
        self.hour_set, self.minute_set, self.second_set = set(self.hours), set(self.minutes), set(self.seconds)
        self._day_ok: dict[datetime, bool] = {}

    def first_at_or_after(self, wall: datetime) -> datetime | None:
        return next(self.pattern._walls(wall - _SECOND), None)

    def last_at_or_before(self, wall: datetime) -> datetime | None:
        return next(self.pattern._walls(wall + _SECOND, backwards=True), None)

    def matches(self, wall: datetime) -> bool:
        """By the field sets, and croniter once per day (cached)."""
        if wall.hour not in self.hour_set or wall.minute not in self.minute_set or wall.second not in self.second_set:
            return False
        day = wall.replace(hour=0, minute=0, second=0)
        if day not in self._day_ok:
            self._day_ok[day] = next(iter(self._days(day, day)), None) == day
        return self._day_ok[day]

    def between(self, first: datetime, last: datetime):
        """The matching walls in [first, last], in order, from the field sets."""
        for day in self._days(first, last):
            for hour in self.hours:
                for minute in self.minutes:
                    for second in self.seconds:
                        wall = day.replace(hour=hour, minute=minute, second=second)
                        if wall > last:
                            return
                        if wall >= first:
                            yield wall

    def _days(self, first: datetime, last: datetime):
        """The matching days (midnights) from `first`'s day to `last`'s."""
        from croniter import CroniterBadDateError  # heavy: only when a cron expression is evaluated

        day = first.replace(hour=0, minute=0, second=0)
        walker = copy.copy(self._day_walker)
        walker.set_current(day - _SECOND, force=True)
        while True:
            try:
                found = walker.get_next(datetime)
            except CroniterBadDateError:
                return
            if found > last:
                return
            yield found

    def _before(self, hours: list[int], tau: int) -> int:
        """How many (hour, minute, second) of the sets fall before `tau` seconds into a day."""
        hour, rest = divmod(tau, 3600)
        minute, second = divmod(rest, 60)
        count = bisect_left(hours, hour) * len(self.minutes) * len(self.seconds)
        if hour < 24 and hour in hours:
            count += bisect_left(self.minutes, minute) * len(self.seconds)
            if minute in self.minutes:
                count += bisect_left(self.seconds, second)
        return count

    def count(self, first: datetime, last: datetime, cap: int, deadline: float, hours: list[int] | None = None) -> int:
        """How many matching walls in [first, last] (at least `cap` when it stops there, or when
        the `deadline` passes — a span of many years); `hours` replaces the hour field."""
        if last < first:
            return 0
        hours = self.hours if hours is None else hours
        total = 0
        for index, day in enumerate(self._days(first, last)):
            low = _secs(first) - _secs(day) if day.date() == first.date() else 0
            high = _secs(last) - _secs(day) + 1 if day.date() == last.date() else 86_400
            total += self._before(hours, high) - self._before(hours, low)
            if total >= cap or (index % 256 == 255 and time.monotonic() > deadline):
                return max(total, cap)
        return total


def _values(field: list, size: int) -> list[int]:
    return list(range(size)) if field == ["*"] else sorted({int(value) for value in field})


def next_after(pattern: CronPattern, bound: int, zone) -> tuple[int, bool] | None:
    """(first occurrence strictly after the instant `bound` (seconds), whether DST shaped it)."""
    walls, elapsed = pattern.walls, pattern.hour_follows_elapsed_time
    best: tuple[int, bool] | None = None
    t = bound
    gap = _gap_before(zone, t + 1, _offset(zone, t + 1))
    if gap is not None:  # the walls of a gap just behind fire after it: some may still be ahead
        gap_start, earlier = gap
        gap_wall = walls.first_at_or_after(_wall(t + 1 + earlier))
        if gap_wall is not None and _secs(gap_wall) < gap_start + _offset(zone, gap_start):
            best = (_secs(gap_wall) - earlier, True)
    for _ in range(_MAX_STRETCHES):
        if best is not None and t >= best[0]:
            return best
        if not elapsed and _second_reading(zone, t + 1):
            t = _fold_span(zone, t + 1)[1] - 1  # a fixed hour fires in the first pass only
            continue
        offset = _offset(zone, t + 1)
        wall = walls.first_at_or_after(_wall(t + 1 + offset))
        if wall is None:
            return best
        candidate = _secs(wall) - offset
        limit = candidate if best is None else min(candidate, best[0])
        change = _next_change(zone, t + 1, offset, limit)
        if change is None:
            found = (candidate, _is_fold(wall, zone))
            return found if best is None or found[0] < best[0] else best
        later = _offset(zone, change)
        if later > offset:  # a gap: its matching walls fire at the offset before it
            gap_wall = walls.first_at_or_after(_wall(change + offset))
            if gap_wall is not None and _secs(gap_wall) < change + later:
                shifted = _secs(gap_wall) - offset
                if best is None or shifted < best[0]:
                    best = (shifted, True)
        t = change - 1
    return best


def last_at_or_before(pattern: CronPattern, until: int, zone) -> int | None:
    """The latest occurrence at or before the instant `until` (seconds)."""
    walls, elapsed = pattern.walls, pattern.hour_follows_elapsed_time
    best: int | None = None
    t = until
    for _ in range(_MAX_STRETCHES):
        if best is not None and t <= best:
            return best
        if not elapsed and _second_reading(zone, t):
            t = _fold_span(zone, t)[0] - 1
            continue
        offset = _offset(zone, t)
        wall = walls.last_at_or_before(_wall(t + offset))
        if wall is None:
            return best
        candidate = _secs(wall) - offset
        if not elapsed and _second_reading(zone, candidate):
            t = _fold_span(zone, candidate)[0] - 1  # a fixed hour fires in the first pass only
            continue
        lowest = (candidate if best is None else max(candidate, best)) - _MAX_GAP_S
        change = _prev_change(zone, t, offset, lowest)  # where this stretch began, if that is near
        if change is not None:
            earlier = _offset(zone, change)
            if offset > earlier:  # a gap began this stretch: its walls fire at the earlier offset
                gap_wall = walls.last_at_or_before(_wall(min(change + offset, t + earlier)))
                if gap_wall is not None and _secs(gap_wall) > change + earlier:
                    shifted = _secs(gap_wall) - earlier
                    best = shifted if best is None else max(best, shifted)
            if change >= candidate:
                t = change
                continue
        return candidate if best is None else max(candidate, best)
    return best


def count_between(pattern: CronPattern, after: int, until: int, zone, cap: int, budget_s: float) -> int:
    """How many occurrences in (after, until] (instants in seconds); `cap` when there are at least
    that many, or when counting took `budget_s` (a span of many years)."""
    walls, elapsed = pattern.walls, pattern.hour_follows_elapsed_time
    deadline = time.monotonic() + budget_s
    count = 0
    t = after
    gap = _gap_before(zone, t + 1, _offset(zone, t + 1))
    if gap is not None:  # the walls of a gap just behind fire after it: some may be in the span
        count += _gap_only(walls, gap[0], gap[1], _offset(zone, gap[0]), until, cap, deadline, low=t + 1)
    while t < until and count < cap:
        if time.monotonic() > deadline:
            return cap
        if not elapsed and _second_reading(zone, t + 1):
            t = min(_fold_span(zone, t + 1)[1] - 1, until)
            continue
        offset = _offset(zone, t + 1)
        change = _next_change(zone, t + 1, offset, until)
        end = until if change is None else change - 1
        count += walls.count(_wall(t + 1 + offset), _wall(end + offset), cap, deadline)
        if change is None:
            break
        later = _offset(zone, change)
        if later > offset:
            count += _gap_only(walls, change, offset, later, until, cap - count, deadline, low=change)
        t = change - 1
    return min(count, cap)


def _gap_only(walls: Walls, change: int, before: int, after: int, until: int, cap: int, deadline: float, *,
              low: int) -> int:
    """The skipped walls of a gap that fire (at the offset before it) on an instant the pattern
    does not already have, from `low` to `until`."""
    first, last = _wall(max(change, low) + before), _wall(min(change + after, until + before + 1) - 1)
    if last < first:
        return 0
    shift = after - before
    matching = walls.count(first, last, cap, deadline)
    if shift % 3600 == 0 and first.date() == (last + timedelta(seconds=shift)).date():
        hours = [hour for hour in walls.hours if hour + shift // 3600 in walls.hours]
        return matching - walls.count(first, last, cap, deadline, hours)  # both g and g + shift match
    if shift % 86_400 == 0 and walls.day_pattern == "0 0 * * *":
        return 0  # whole days skipped (Pacific/Apia, 2011): each skipped time lands on the same time of a day
    extra = 0
    for index, wall in enumerate(walls.between(first, last)):  # an odd shift (30 min, a day): walk the matches
        extra += not walls.matches(wall + timedelta(seconds=shift))
        if extra >= cap or (index % 4096 == 4095 and time.monotonic() > deadline):
            return cap
    return extra


def spring_gaps(zone, from_s: int, to_s: int) -> list[tuple[int, int]]:
    """The spring-forward gaps of a zone between two instants: (the first skipped wall time, in
    seconds of its day; the gap's length in seconds) — the walls whose matches fire shifted."""
    gaps = []
    at, offset = from_s, _offset(zone, from_s)
    while (change := _next_change(zone, at, offset, to_s)) is not None:
        later = _offset(zone, change)
        if later > offset:
            gaps.append(((change + offset) % 86_400, later - offset))
        at, offset = change, later
    return gaps


def zone_offsets(zone, from_s: int, to_s: int) -> list[int]:
    """The UTC offsets (seconds) a zone takes between two instants, in order of their stretches."""
    offsets = [_offset(zone, from_s)]
    at = from_s
    while (change := _next_change(zone, at, offsets[-1], to_s)) is not None:
        offsets.append(_offset(zone, change))
        at = change
    return offsets


def _is_fold(wall: datetime, zone) -> bool:
    return wall.replace(tzinfo=zone, fold=0).utcoffset() != wall.replace(tzinfo=zone, fold=1).utcoffset()

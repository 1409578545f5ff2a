"""Cron expressions as sxctl reads them (spec cron-store.md §6): 5 fields, 6 with seconds first
(as croner reads them) or a nickname, checked by croniter and refused in one line naming the field
at fault; each distinct expression parsed once, its croniter expansion made once and copied for
each walk (a store of 10,000 jobs holds a few dozen expressions). The occurrences in a zone, with
sxctl's DST policy, are occurrences.py's.
croniter is imported only when a cron expression is actually evaluated.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache
from typing import Any

from ...errors import ErrorCode, SxctlError, UsageError
from ...timeparse import datetime_of_ms
from . import occurrences

NICKNAMES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


def _invalid_expression(code: ErrorCode = ErrorCode.INVALID_VALUE, hint: str | None = None) -> SxctlError:
    return UsageError("Invalid cron expression", code=code, hint=hint or
                      "give 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first")


_FIELDS = (("minute", "0-59"), ("hour", "0-23"), ("day of month", "1-31"), ("month", "1-12 or jan-dec"),
           ("day of week", "0-7 or sun-sat"))


def _croniter_accepts(fields: tuple[str, ...] | list[str]) -> bool:
    """Whether croniter reads these 5 or 6 (seconds first) fields."""
    from croniter import croniter  # heavy: only when a cron expression is evaluated

    return bool(croniter.is_valid(" ".join(fields), second_at_beginning=len(fields) == 6))


def _field_hint(fields: tuple[str, ...]) -> str | None:
    """Which field of an expression croniter refuses, and the range it takes."""
    names = (("second", "0-59"), *_FIELDS) if len(fields) == 6 else _FIELDS
    for index, (name, allowed) in enumerate(names):
        probe = ["*"] * len(fields)
        probe[index] = fields[index]
        if not _croniter_accepts(probe):
            return f"field {index + 1} ({name}) is {fields[index]!r}; it takes {allowed}, lists, ranges and steps"
    return None


@dataclass(frozen=True)
class CronPattern:
    """A 5-field or 6-field (seconds first, as croner reads it) expression, or a nickname."""

    expr: str
    fields: tuple[str, ...]
    seconds_first: bool

    @classmethod
    def parse(cls, expr: str) -> CronPattern:
        """The pattern of `expr` (UsageError when croner or croniter would not read it); parsed
        once per distinct expression — a store of 10,000 jobs holds a few dozen."""
        return _parse(expr)

    @cached_property
    def _walker(self):
        """croniter's reading of the fields, made once: each walk starts from a copy of it
        (expanding the fields is most of what a croniter costs)."""
        from croniter import croniter  # heavy: only when a cron expression is evaluated

        return croniter(" ".join(self.fields), ret_type=datetime, second_at_beginning=self.seconds_first)

    def _walls(self, start: datetime, *, backwards: bool = False) -> Iterator[datetime]:
        """The naive wall times that match, after (or before) the naive `start`, nearest first,
        until croniter runs out of calendar."""
        from croniter import CroniterBadDateError  # heavy: only when a cron expression is evaluated

        walker = copy.copy(self._walker)
        walker.set_current(start, force=True)
        step = walker.get_prev if backwards else walker.get_next
        while True:
            try:
                yield step(datetime)
            except CroniterBadDateError:
                return

    def day_times(self) -> tuple[list[int], list[int], set[int] | None]:
        """The hours and minutes of the day the pattern fires at, and its weekdays (0 = Monday)
        when the weekday field alone picks its days (None: the day of month or month does too)."""
        expanded = self.expanded
        every = {0: range(60), 1: range(24)}
        minutes, hours = ([int(v) for v in expanded[i]] if expanded[i] != ["*"] else list(every[i]) for i in (0, 1))
        days = None
        if expanded[2] == ["*"] and expanded[3] == ["*"]:
            days = set(range(7)) if expanded[4] == ["*"] else {(int(v) - 1) % 7 for v in expanded[4]}
        return hours, minutes, days

    @cached_property
    def walls(self) -> occurrences.Walls:
        """The matching wall times, found and counted (occurrences.py); made once per pattern."""
        return occurrences.Walls(self)

    @property
    def expanded(self) -> list[list[Any]]:
        """croniter's expansion of each field (`["*"]` for a wildcard), in its field order."""
        return self._walker.expanded

    @property
    def hour_follows_elapsed_time(self) -> bool:
        """A wildcard or step in the hour field: the pattern fires in both passes of a fold."""
        hour = self.fields[2 if self.seconds_first else 1]
        return "*" in hour or "/" in hour

    def next_after(self, bound_ms: int, zone) -> tuple[int, bool] | None:
        """(first instant strictly after `bound_ms`, whether DST shaped it), or None."""
        bound_local = datetime_of_ms(bound_ms, zone)
        if bound_local is None or bound_local.year >= 9999:
            return None  # nothing a calendar can hold comes after this bound
        found = occurrences.next_after(self, bound_ms // 1000, zone)
        return None if found is None else (found[0] * 1000, found[1])

    def count_between(self, after_ms: int, until_ms: int, zone, cap: int, budget_s: float) -> int:
        """How many occurrences fall in (after_ms, until_ms], by arithmetic over each stretch of
        constant offset (occurrences.py); `cap` when there are at least that many, or when counting
        took `budget_s` (a caller holding a lock never holds it long)."""
        if datetime_of_ms(after_ms, zone) is None or datetime_of_ms(until_ms, zone) is None:
            return 0
        return occurrences.count_between(self, after_ms // 1000, until_ms // 1000, zone, cap, budget_s)

    def last_at_or_before(self, until_ms: int, zone) -> int | None:
        """The latest occurrence at or before `until_ms` — remembered for the last instants asked
        in each zone: a view asks it at one `now` for every overdue job of the expression (a
        hold's give-up time), and the walk back takes tens of microseconds."""
        key = (until_ms, zone)
        if key in self._latest:
            return self._latest[key]
        if datetime_of_ms(until_ms, zone) is None:
            return None
        found = occurrences.last_at_or_before(self, until_ms // 1000, zone)
        if len(self._latest) >= 64:
            self._latest.clear()
        self._latest[key] = None if found is None else found * 1000
        return self._latest[key]

    @cached_property
    def _latest(self) -> dict[tuple[int, Any], int | None]:
        return {}


@lru_cache(maxsize=1024)
def _parse(expr: str) -> CronPattern:
    text = expr.strip()
    expanded = NICKNAMES.get(text.lower(), text)
    fields = tuple(expanded.split())
    if len(fields) == 7:
        raise UsageError("Invalid cron expression: 7-field (year) patterns are not supported",
                         code=ErrorCode.UNSUPPORTED)
    if len(fields) not in (5, 6) or len(expr.encode()) > 1024:
        raise _invalid_expression()
    if any(ch in expanded for ch in "Hh?"):  # croniter's hash syntax, unknown to croner
        raise _invalid_expression(hint="H and ? are croniter's syntax; comis (croner) does not read them")
    if not _croniter_accepts(fields):
        raise _invalid_expression(hint=_field_hint(fields))
    return CronPattern(expr, fields, len(fields) == 6)

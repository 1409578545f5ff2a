"""The text forms of `--active-hours HH:MM-HH:MM` and `--active-days DAYS`, read into minutes of
the day and days of the week (the policy file keeps them as given; policy/job.py judges by them)."""

from __future__ import annotations

from ...errors import UsageError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_active_hours(value: str) -> tuple[int, int]:
    """`09:00-17:30` -> (540, 1050) minutes of the day; the end may be `24:00`; a start later than
    the end wraps past midnight (`22:00-06:00`)."""
    try:
        start, end = value.split("-")
        minutes = []
        for part in (start, end):
            hours, mins = part.split(":")
            if len(hours) != 2 or len(mins) != 2 or not (hours + mins).isdigit():
                raise ValueError
            minutes.append(int(hours) * 60 + int(mins))
    except ValueError:
        raise UsageError(f"invalid --active-hours {value!r}: HH:MM-HH:MM, e.g. 09:00-17:30") from None
    if minutes[0] >= 24 * 60 or minutes[1] > 24 * 60 or int(end[3:]) >= 60 or int(start[3:]) >= 60:
        raise UsageError(f"invalid --active-hours {value!r}: times of day are 00:00-24:00")
    if minutes[0] == minutes[1]:
        raise UsageError(f"invalid --active-hours {value!r}: the window is empty")
    return minutes[0], minutes[1]


def parse_active_days(value: str) -> list[str]:
    """`mon-fri`, `sat,sun`, `mon,wed-fri` -> the days in week order."""
    chosen: set[int] = set()
    for part in value.lower().split(","):
        ends = part.strip().split("-")
        if len(ends) > 2 or any(end not in DAYS for end in ends):
            raise UsageError(f"invalid --active-days {value!r}: days as mon-fri or sat,sun")
        first, last = DAYS.index(ends[0]), DAYS.index(ends[-1])
        span = range(first, last + 1) if first <= last else [*range(first, 7), *range(0, last + 1)]
        chosen.update(span)
    return [DAYS[i] for i in sorted(chosen)]

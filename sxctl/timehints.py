"""What a TIME that cannot be read may have meant: the hint under comis's verbatim message. A date
the calendar lacks (`2026-02-30`), a date without its time of day, words (`tomorrow 9am`: the
TIME to write instead, worked out with the clock), a zone abbreviation (`CEST`), an hour or
minute off the clock (`25:00`), else the accepted forms. Loaded only when a TIME is refused."""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta

#: the TIME forms sxctl accepts, for the hint of a TIME it cannot read
TIME_FORMATS = ("2026-09-21T09:00 (a wall time, read in --tz; seconds optional), 2026-09-21T07:00Z (UTC) or "
                "2026-09-21T09:00+02:00 (an offset)")

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY = r"\b(today|tomorrow|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|^(\d{4}-\d{2}-\d{2})\b"


def time_hint(text: str, *, now: datetime | None = None, zone_name: str = "UTC", named: bool = True) -> str:
    """The hint for a TIME `text` that cannot be read. `now`: when the command runs, in the zone
    `zone_name` a naive TIME is read in (words such as `tomorrow` are then turned into the TIME
    they mean); `named`: that zone was given (`--tz`, a job's), else the hint names `--tz`."""
    value = text.strip()
    missing = _missing_date(value)
    if missing:
        return missing
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return f"{value} has no time of day: write it with one, e.g. {value}T09:00"
    words = _words_hint(value, now, zone_name, named)
    if words:
        return words
    abbreviation = re.search(r"\d\s*([A-Za-z]{2,5})$", value)  # after a time: `10:00 CEST`
    if abbreviation and abbreviation.group(1).lower() not in ("am", "pm"):
        return (f"zone abbreviations such as {abbreviation.group(1)!r} are ambiguous: give the wall time with --tz "
                f"(e.g. --tz Europe/Berlin) or an offset (+02:00); accepted: {TIME_FORMATS}")
    clock = re.search(r"[T ](\d{2}):(\d{2})", value)
    if clock and (int(clock.group(1)) > 23 or int(clock.group(2)) > 59):
        return f"{clock.group(1)}:{clock.group(2)} is not a time of day (hours 00-23, minutes 00-59)"
    return f"accepted: {TIME_FORMATS}"


def _missing_date(value: str) -> str | None:
    """What is wrong with a `YYYY-MM-DD` the calendar does not have (`2026-02-30`), or None."""
    found = re.match(r"(\d{4})-(\d{2})-(\d{2})", value)
    if found is None:
        return None
    year, month, day = (int(part) for part in found.groups())
    if not 1 <= month <= 12:
        return f"{found.group()} does not exist: there is no month {found.group(2)} (01-12)"
    if year < 1:
        return f"{found.group()} does not exist: years start at 0001"
    days = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days:
        return f"{found.group()} does not exist: {calendar.month_name[month]} {year} has {days} days"
    return None


def _words_hint(value: str, now: datetime | None, zone_name: str, named: bool) -> str | None:
    """`tomorrow 9am`, `today at 17:30`, `friday noon`, `9pm`, `2026-12-07 9am`: the TIME that
    means it, in the zone it would be read in (None: not words sxctl can place)."""
    lowered = " ".join(value.lower().split())
    day = re.search(_DAY, lowered)
    rest = lowered if day is None else lowered[:day.start()] + lowered[day.end():]
    rest = re.sub(r"\bat\b", " ", rest).strip(" ,")
    clock = _clock_of(rest) if rest else None
    if (day is None and clock is None) or (rest and clock is None):
        return None
    with_tz = "" if named else f" with --tz {zone_name}"
    said = day.group() if day is not None else None
    on = _date_meant(said, clock, now)
    if on is None:
        return (f"sxctl reads a date and a time of day, not words: write e.g. 2026-09-21T09:00{with_tz}; "
                f"accepted: {TIME_FORMATS}")
    when = f"{said} at " if said is not None else "the next "
    if clock is None:
        return (f"sxctl reads a date and a time of day, not words: {said} in {zone_name} is {on.isoformat()}: "
                f"write it with the time, e.g. {on.isoformat()}T09:00{with_tz}")
    stamp = f"{on.isoformat()}T{clock[0]:02d}:{clock[1]:02d}"
    return (f"sxctl reads a date and a time of day, not words: {when}{clock[0]:02d}:{clock[1]:02d} in {zone_name} "
            f"is {stamp}: write {stamp}{with_tz}")


def _clock_of(text: str) -> tuple[int, int] | None:
    """`9am`, `9:30 pm`, `21:00`, `noon`, `midnight` -> (hour, minute) on a 24-hour clock."""
    if text in ("noon", "midnight"):
        return (12, 0) if text == "noon" else (0, 0)
    twelve = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?", text)
    if twelve:
        hour, minute = int(twelve.group(1)), int(twelve.group(2) or 0)
        if not 1 <= hour <= 12 or minute > 59:
            return None
        return hour % 12 + (12 if twelve.group(3) == "p" else 0), minute
    plain = re.fullmatch(r"(\d{1,2}):(\d{2})", text)
    if plain and int(plain.group(1)) <= 23 and int(plain.group(2)) <= 59:
        return int(plain.group(1)), int(plain.group(2))
    return None


def _date_meant(said: str | None, clock: tuple[int, int] | None, now: datetime | None) -> date | None:
    """The date `said` (a day word or an ISO date; None: the next `clock`) means at `now`; None
    when it takes the clock and there is none."""
    if said is not None and said[0].isdigit():
        return date.fromisoformat(said)
    if now is None:
        return None
    today = now.date()
    if said == "today":
        return today
    if said == "tomorrow":
        return today + timedelta(days=1)
    passed = clock is None or clock <= (now.hour, now.minute)
    if said is None:  # a time of day alone: its next one
        return today + timedelta(days=1 if passed else 0)
    ahead = (_WEEKDAYS.index(said) - today.weekday()) % 7  # a weekday: its next one (today if still to come)
    return today + timedelta(days=7 if ahead == 0 and passed else ahead)

"""Command-line DURATION and TIME values, and the short human forms of durations.

DURATION: a number with an optional unit (ms, s, m, h, d) or a compound such as `1h30m`;
a bare number means seconds. TIME: ISO 8601, either an absolute instant (ends in Z or an
offset) or a naive wall time read in a zone, with explicit fold choice (cron-store.md §6).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo

from .errors import UsageError

OUT_OF_RANGE = "(out of range)"


def _zone_info(name: str) -> tzinfo:
    """The IANA zone `name` (ValueError, OSError or KeyError when there is none)."""
    from zoneinfo import ZoneInfo  # lazy: measurable at start-up, and `inbox send` loads this module, never a zone

    return ZoneInfo(name)


@functools.cache  # a walk of the zone folder, 30 ms: once per process, not once per policy entry
def _zone_names() -> frozenset[str]:
    """Every IANA zone name the system knows."""
    from zoneinfo import available_timezones  # lazy: as `_zone_info`

    return frozenset(available_timezones())


def local_zone():
    """The zone local times are shown in: the system's IANA zone, so a date across a DST change
    gets that date's offset (not today's); else dateutil's view of the C library's local time;
    UTC when even that cannot be used (`TZ=UTC+99`) — a display choice, never a reason to fail."""
    try:
        return _zone_info(local_zone_name())
    except (UsageError, ValueError, OSError, KeyError):
        pass
    try:
        from dateutil import tz  # lazy: heavy third-party, only when the system zone has no IANA name

        zone = tz.tzlocal()
        datetime.now(zone).utcoffset()
        return zone
    except (ValueError, OverflowError, OSError):
        return UTC


def display_zone(tz: str | None = None):
    """THE display zone, the one rule of every human view: the zone `--tz ZONE` names where the
    command takes one, else the local zone (`TZ`, then the system's: `local_zone`). A job's own
    zone never changes it: it stays where the job's schedule is described. `--json` keeps instants
    (`*_ms`; an ISO string carries its offset). See docs/reference/json-and-exit-codes.md.

    With no `tz`, inside `displayed_in(zone)` it is that zone: the words the core writes for a
    view (a job's note in `cron list --tz Asia/Tokyo`) follow the command's `--tz` too."""
    if tz is not None:
        return load_zone(tz)
    chosen = _displayed_in().get()
    return local_zone() if chosen is None else chosen


@functools.cache
def _displayed_in():
    """The display zone a command chose with --tz, while its view is computed (`displayed_in`)."""
    import contextvars  # lazy: a plain `inbox send` loads this module and never shows a time

    return contextvars.ContextVar("sxctl_displayed_in", default=None)


@contextlib.contextmanager
def displayed_in(zone) -> Iterator[None]:
    """While a command with `--tz` computes its view, `display_zone()` is `zone`."""
    token = _displayed_in().set(zone)
    try:
        yield
    finally:
        _displayed_in().reset(token)


def chosen_display_zone():
    """The display zone `displayed_in` set for the view being computed (None: none was, and
    `display_zone()` is the local zone) — what words made later must be shown in."""
    return _displayed_in().get()


def zone_label(zone) -> str:
    """A display zone's name for a JSON document (`display_tz`): its IANA key, else what it calls itself."""
    return getattr(zone, "key", None) or str(zone)


def shown_time(ms: int, zone=None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """An instant as every human view prints it: in `zone` (None: `display_zone()`), labelled
    with that zone's abbreviation at that date (`2026-09-21 09:30:00 CEST`, `… UTC`, `… JST`)."""
    return format_ms(ms, f"{fmt} %Z", display_zone() if zone is None else zone)


def datetime_of_ms(ms: int, zone=UTC) -> datetime | None:
    """An epoch-ms instant as an aware datetime in `zone` (None: the local zone), or None for an
    instant no calendar date holds (a schema-valid 2^53 - 1 ms is the year 287396)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
        return moment.astimezone(zone if zone is not None else local_zone())
    except (OverflowError, ValueError, OSError):
        return None


def format_ms(ms: int, fmt: str | None = None, zone=UTC) -> str:
    """`datetime_of_ms` as `fmt` (None: ISO 8601 to the second); an impossible date reads
    `(out of range)`, so one bad job never breaks a listing."""
    moment = datetime_of_ms(ms, zone)
    if moment is None:
        return OUT_OF_RANGE
    return moment.isoformat(timespec="seconds") if fmt is None else moment.strftime(fmt)


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# patterns as strings: `re` compiles them on first use, so commands that never parse a
# DURATION or TIME do not pay for it at start-up
_PART = r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)"
_BARE = r"\d+(?:\.\d+)?|\.\d+"


def parse_duration_ms(text: str, *, what: str = "duration") -> int:
    """`90`, `1.5s`, `250ms`, `1h30m` -> milliseconds (exit 2 naming the value when malformed)."""
    if re.search(r"[\d.]M(?![Ss])", text):  # `1M`: a month in many tools; sxctl's m is a minute
        raise UsageError(f"invalid {what} {text!r}: 'M' is ambiguous; write m for minutes (there is no month "
                         "unit: a monthly job is a cron schedule such as '0 9 1 * *')")
    value = text.strip().lower()
    if re.fullmatch(_BARE, value):
        return round(float(value) * 1000)
    pos = 0
    total = 0.0
    seen: list[str] = []
    while pos < len(value):
        match = re.compile(_PART).match(value, pos)
        if match is None or match.group(2) in seen:
            break
        seen.append(match.group(2))
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise UsageError(
            f"invalid {what} {text!r}: use a number of seconds or units like 250ms, 30s, 5m, 1h30m, 7d"
        )
    return round(total)


_OFFSET_SUFFIX = r"(?:[Zz]|[+-]\d{2}:?\d{2})$"
_NAIVE = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?"


def load_zone(name: str):
    """An IANA zone by name (`local` = the system zone's IANA name); exit 2 when unknown."""
    if name == "local":
        name = local_zone_name()
    if not name or name.startswith("/") or ".." in name:
        raise UsageError("Invalid wall-clock timezone", hint=zone_hint(name))
    try:
        return _zone_info(canonical_zone_name(name))
    except (ValueError, OSError, KeyError):
        raise UsageError("Invalid wall-clock timezone", hint=zone_hint(name)) from None


#: abbreviations of summer time that are no zone name (tzdata has CET, EET, EST, MST, … but not
#: these): the place a user of one most likely meant
_SUMMER_ABBREVIATIONS = {"CEST": "Europe/Berlin", "BST": "Europe/London",
                         "EEST": "Europe/Athens", "WEST": "Europe/Lisbon", "EDT": "America/New_York",
                         "CDT": "America/Chicago", "MDT": "America/Denver", "PDT": "America/Los_Angeles",
                         "AEDT": "Australia/Sydney", "NZDT": "Pacific/Auckland"}


def zone_hint(name: str) -> str:
    """What an unknown zone name may have meant: `Berlin` -> Europe/Berlin, `Europe/Berln` ->
    Europe/Berlin (the error message itself stays comis's)."""
    zones = sorted(zone for zone in _zone_names() if is_iana_zone_name(zone))  # never suggest one refused
    by_city = [zone for zone in zones if zone.rsplit("/", 1)[-1].lower() == name.lower().replace(" ", "_")]
    import difflib  # lazy: only a mistyped zone pays for it (every command loads this module)

    summer = _SUMMER_ABBREVIATIONS.get(name.upper())
    if summer is not None:  # `CEST` was offered `EST`, a zone six hours away
        return (f"{name} is a summer-time abbreviation, not a zone: use the place, e.g. {summer} (its zone "
                "changes to summer time by itself)")
    close = by_city or difflib.get_close_matches(name, zones, n=3, cutoff=0.75)
    if close:
        return f"did you mean {' or '.join(close)}? (IANA zone names: Region/City, e.g. America/New_York)"
    return "an IANA zone name such as Europe/Berlin, America/New_York or UTC (`local` is this machine's zone)"


def is_iana_zone_name(name: str) -> bool:
    """Whether `name` is an IANA zone a job may keep: not `localtime` (this machine's link, whose
    meaning changes from host to host), `Factory`, or the `posix/` and `right/` copies."""
    if name == "UTC":
        return True
    return name in _zone_names() and name not in ("localtime", "Factory") \
        and not name.startswith(("posix/", "right/"))


def canonical_zone_name(name: str) -> str:
    """The IANA spelling of a zone named in any case (`utc` -> `UTC`, as comis accepts), or
    `name` itself when no zone matches."""
    if name in ("UTC", "local"):
        return name
    try:
        _zone_info(name)
        return name
    except (ValueError, OSError, KeyError):
        pass
    by_lower = {zone.lower(): zone for zone in _zone_names()}
    return by_lower.get(name.lower(), name)


#: the first instant sxctl cannot schedule: its dates, listings and next-run searches need a
#: calendar year below 10000
LATEST_SCHEDULABLE_MS = 253_370_764_800_000  # 9999-01-01T00:00:00Z


def local_zone_name() -> str:
    """The system zone as an IANA name, from `TZ` or the `/etc/localtime` link."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    if tz in ("UTC", "GMT"):
        return tz
    marker = "zoneinfo/"
    try:
        link = os.readlink("/etc/localtime")
        if marker in link:
            return link.split(marker, 1)[1]
    except OSError:
        pass
    try:  # /etc/localtime is a copy: Debian and Ubuntu also name the zone here
        with open("/etc/timezone", encoding="utf-8") as handle:
            name = handle.read(256).strip()
        if name:
            return name
    except (OSError, UnicodeDecodeError):
        pass
    raise UsageError("Invalid wall-clock timezone")


def parse_time_ms(
    text: str, *, tz: str | None = None, fold: str | None = None, now_ms: int | None = None
) -> tuple[int, bool]:
    """TIME -> (epoch ms, was_naive). A nonexistent wall time is an error; an ambiguous one
    needs `fold` ('earlier' = first occurrence). Messages are comis's, verbatim, and in comis's
    order: a naive TIME's zone is checked before the TIME. `now_ms` (when the command runs) lets
    the hint of a TIME in words (`tomorrow 9am`) give the TIME meant."""
    value = text.strip()
    if re.search(_OFFSET_SUFFIX, value):
        if tz is not None:
            raise UsageError("An offset-bearing timestamp cannot also specify a timezone",
                             hint=f"{value} carries its own offset: drop the offset to read it in {tz}, or drop --tz")
        if fold is not None:
            raise UsageError("Fold selection is legal only for a naive wall-clock timestamp")
        try:
            instant = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            raise UsageError("Invalid offset-bearing timestamp", hint=_time_hint(value, now_ms, tz)) from None
        if instant.tzinfo is None:
            raise UsageError("Invalid offset-bearing timestamp", hint=_time_hint(value, now_ms, tz))
        return epoch_ms(instant), False
    zone = load_zone(tz or "UTC")
    if not re.fullmatch(_NAIVE, value):
        raise UsageError("Invalid naive wall-clock timestamp", hint=_time_hint(value, now_ms, tz))
    try:
        naive = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError("Invalid naive wall-clock timestamp", hint=_time_hint(value, now_ms, tz)) from None
    except OverflowError:
        raise UsageError("Wall-clock timestamp exceeds the safe epoch range") from None
    earlier = naive.replace(tzinfo=zone, fold=0)
    kind = wall_time_kind(naive, zone)
    if kind == "gap":
        raise UsageError("Wall-clock timestamp does not exist in the requested timezone")
    if kind == "fold":
        if fold not in ("earlier", "later"):
            raise UsageError("Ambiguous wall-clock timestamp requires earlier or later fold selection",
                             hint=f"{value} happens twice in {zone} (the clocks go back): add --fold earlier "
                                  "for the first or --fold later for the second")
        return epoch_ms(naive.replace(tzinfo=zone, fold=0 if fold == "earlier" else 1)), True
    return epoch_ms(earlier), True


def _time_hint(value: str, now_ms: int | None, tz: str | None) -> str:
    """`timehints.time_hint` for a TIME read in `tz` (None: UTC, the hint then naming this
    machine's zone with --tz, the day words worked out there) at `now_ms`."""
    from .timehints import time_hint  # lazy: only a TIME that cannot be read pays for it

    zone_name = tz
    if zone_name is None:
        try:
            zone_name = local_zone_name()
        except UsageError:
            zone_name = "UTC"
    try:
        now = datetime_of_ms(now_ms, load_zone(zone_name)) if now_ms is not None else None
    except UsageError:
        now = None
    return time_hint(value, now=now, zone_name=zone_name, named=tz is not None)


def parse_time_in_zone_ms(text: str, tz: str | None, now_ms: int | None = None) -> int:
    """A TIME option of a job (`--until`, `cron next --from`): an offset-bearing time as given,
    a naive one read in the job's zone `tz`."""
    return parse_time_ms(text, tz=None if re.search(_OFFSET_SUFFIX, text.strip()) else tz, now_ms=now_ms)[0]


def parse_local_time_ms(text: str, tz: str | None) -> int:
    """A TIME of a command whose naive times are this machine's (`cron simulate`, `cron pause
    --until`): an offset-bearing one as given, a naive one in `tz`, else in the local zone (`TZ`,
    `/etc/localtime`; UTC when it has no IANA name) — the zone the times are shown in."""
    if tz is None and not re.search(_OFFSET_SUFFIX, text.strip()):
        try:
            tz = local_zone_name()
        except UsageError:
            tz = None
    return parse_time_in_zone_ms(text, tz)


def wall_time_kind(naive: datetime, zone) -> str:
    """What a naive wall time is in `zone`: `gap` (skipped by a spring-forward change: it does
    not survive the round trip through UTC), `fold` (repeated by a fall-back change: its two
    readings have different offsets) or `normal`. The one DST check of sxctl."""
    earlier = naive.replace(tzinfo=zone, fold=0)
    if earlier.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
        return "gap"
    if earlier.utcoffset() != naive.replace(tzinfo=zone, fold=1).utcoffset():
        return "fold"
    return "normal"


def epoch_ms(instant: datetime) -> int:
    """An aware datetime as epoch milliseconds (exact: no float on the way)."""
    return (instant - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def format_duration_ms(ms: int) -> str:
    """A short human duration: `0.8s`, `12s`, `3m12s`, `3h12m`, `2d3h`."""
    ms = abs(int(ms))
    if ms < 10_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def duration_text(ms: int) -> str:
    """A duration as a DURATION would give it, exactly: `24h`, `1h30m`, `45s`, `0s` (what
    `parse_duration_ms` reads back to the same value)."""
    parts, rest = [], abs(int(ms))
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_relative_ms(target_ms: int, now_ms: int) -> str:
    """`in 0m12s` for the future, `3m ago` for the past."""
    delta = target_ms - now_ms
    if delta >= 0:
        seconds = delta // 1000
        minutes, seconds = divmod(seconds, 60)
        if minutes < 60:
            return f"in {minutes}m{seconds:02d}s"
        return f"in {format_duration_ms(delta)}"
    return f"{format_duration_ms(-delta)} ago"

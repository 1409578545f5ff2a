"""Schedules: authoring flags -> persisted comis schedules, and next-run math with sxctl's DST
policy (spec cron-store.md §6, §7).

croniter walks *wall-clock* matches; this module turns each wall time into instants:
- a time in a spring-forward gap is read with the offset in force before the gap, so it fires
  once, shifted forward by the gap's length;
- in a fall-back fold, a fixed-hour pattern fires once at the earlier instant, while a pattern
  with a wildcard or step in the hour field fires in both passes (elapsed time).
croniter is imported only when a cron expression is actually evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from typing import Any

from ...errors import UsageError
from ...timeparse import (
    LATEST_SCHEDULABLE_MS,
    canonical_zone_name,
    datetime_of_ms,
    duration_text,
    epoch_ms,
    format_duration_ms,
    format_ms,
    is_iana_zone_name,
    load_zone,
    local_zone_name,
    parse_duration_ms,
    parse_time_ms,
    shown_time,
)
from ..store.schema_kit import MAX_SAFE_INT
from .cron_pattern import CronPattern

PASS_INTERVAL_MS = 60_000  # how often every engine `cron export` writes runs a pass


def next_run(schedule: dict[str, Any], bound_ms: int) -> tuple[int, bool] | None:
    """`next(schedule, bound)`: the first occurrence strictly after `bound_ms` (cron-store.md §7)."""
    kind = schedule["kind"]
    if kind == "every":
        anchor, every = schedule["anchorMs"], schedule["everyMs"]
        if bound_ms < anchor:
            return anchor, False
        return anchor + ((bound_ms - anchor) // every + 1) * every, False
    if kind == "at":
        return (schedule["atMs"], False) if schedule["atMs"] > bound_ms else None
    try:
        return CronPattern.parse(schedule["expr"]).next_after(bound_ms, load_cron_zone(schedule["tz"]))
    except (ValueError, OverflowError):  # the next one would fall in year 10000: there is none
        return None


def last_run(schedule: dict[str, Any], until_ms: int) -> int | None:
    """The latest occurrence at or before `until_ms` (None: none yet) — the occurrence a late
    run stands for (a catch-up's hold is measured from it, runner.md §4)."""
    kind = schedule["kind"]
    if kind == "every":
        anchor, every = schedule["anchorMs"], schedule["everyMs"]
        return None if until_ms < anchor else anchor + (until_ms - anchor) // every * every
    if kind == "at":
        return schedule["atMs"] if schedule["atMs"] <= until_ms else None
    try:
        return CronPattern.parse(schedule["expr"]).last_at_or_before(until_ms, load_cron_zone(schedule["tz"]))
    except (ValueError, OverflowError):
        return None


def load_cron_zone(name: str):
    try:
        return load_zone(name or "UTC")
    except UsageError as error:
        raise UsageError("Invalid cron timezone", hint=error.extra.get("hint")) from None


def job_zone_name(job: dict[str, Any], entry: dict[str, Any] | None = None) -> str:
    """The zone a job's days, hours and human times are counted in: a cron job's own zone, else
    the zone its policy entry keeps (`--tz` on an `every` or `at` job: comis's store has no place
    for it), else UTC."""
    if job["schedule"]["kind"] == "cron":
        return job["schedule"].get("tz") or "UTC"
    return (entry or {}).get("tz") or "UTC"


def job_zone(job: dict[str, Any], entry: dict[str, Any] | None = None):
    """The zone of `job_zone_name`, loaded."""
    return load_cron_zone(job_zone_name(job, entry))


#: tzdata's fixed-offset zones named like a region's time: each region's zone and the same offset's
#: Etc/ name (files that already keep one stay valid; only a new --tz is refused)
_FIXED_LOOKALIKES = {"EST": ("America/New_York", "Etc/GMT+5"), "MST": ("America/Denver", "Etc/GMT+7"),
                     "HST": ("Pacific/Honolulu", "Etc/GMT+10")}


def honoured_zone_name(tz: str, *, message: str = "Invalid cron timezone") -> str:
    """`--tz` as the zone name a job keeps: `local` resolved, the IANA spelling; a zone that
    cannot be honoured (unknown, or `local` on a machine that has no zone name) is exit 2 with
    `message` (comis's: `Invalid wall-clock timezone` where the zone reads an --at or --anchor time)."""
    zone_name = tz
    if zone_name == "local":
        try:
            zone_name = local_zone_name()
        except UsageError:
            raise UsageError(message, hint="--tz local: this machine's zone has no IANA name; "
                             "give one, e.g. Europe/Berlin") from None
    zone_name = canonical_zone_name(zone_name)
    try:
        load_zone(zone_name)
    except UsageError as error:
        raise UsageError(message, hint=error.extra.get("hint")) from None
    if zone_name in _FIXED_LOOKALIKES:  # in tzdata, but a trap: EST is never New York's summer time
        region, fixed = _FIXED_LOOKALIKES[zone_name]
        raise UsageError(message, hint=f"--tz {zone_name} is a fixed offset all year (no daylight "
                         f"saving time), not a region's clock: give {region}, or {fixed} if a fixed offset is meant")
    if not is_iana_zone_name(zone_name):
        raise UsageError(message, hint=f"--tz {tz!r} is not an IANA zone name: give one, e.g. "
                         "Europe/Berlin, or --tz local for this machine's zone")
    if len(zone_name.encode()) > 128:
        raise UsageError(message)
    return zone_name


def local_time(ms: int, zone):
    """The wall time in `zone` of an instant (a datetime)."""
    return datetime_of_ms(ms, zone)


# --- authoring (cron-store.md §6) -----------------------------------------------------------------

@dataclass
class ScheduleInput:
    """The schedule flags of `cron add/update/next`."""

    cron: str | None = None
    every: str | None = None
    at: str | None = None
    in_: str | None = None
    tz: str | None = None
    fold: str | None = None
    anchor: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.cron, self.every, self.at, self.in_))


def pass_rate_warning(schedule: dict[str, Any]) -> str | None:
    """What to say when a job is due more often than a pass runs (once a minute, from every engine
    `cron export` writes): it runs at most once a pass, the occurrences in between folded into it."""
    if schedule["kind"] != "every" or schedule["everyMs"] >= PASS_INTERVAL_MS:
        return None
    return (f"--every {duration_text(schedule['everyMs'])} is shorter than a minute, but the scheduler pass "
            "(`cron tick` from cron, a systemd timer or Kubernetes) runs once a minute: the job runs at most "
            "once a pass, and each run stands for the occurrences since the last")


def anchor_hint(every: str, every_ms: int, tz: str | None, now_ms: int) -> str | None:
    """What to say when `--every` has no `--anchor`: it counts from the millisecond it was typed,
    and the `--anchor` (the start of this hour in the job's zone) that puts the runs on the clock.
    None: a period under a minute, or runs already on it."""
    zone = load_cron_zone(tz or "UTC")
    now = datetime_of_ms(now_ms, zone)
    if every_ms < PASS_INTERVAL_MS or now is None:
        return None
    hour = now.replace(minute=0, second=0, microsecond=0)
    round_ms = epoch_ms(hour)
    if (now_ms - round_ms) % every_ms == 0:
        return None
    suggested = f"{hour:%Y-%m-%dT%H:%M}" if tz is not None else f"{hour.astimezone(UTC):%Y-%m-%dT%H:%MZ}"
    then = next_run({"kind": "every", "everyMs": every_ms, "anchorMs": round_ms}, now_ms)
    first = f" (first occurrence {shown_time(then[0])})" if then is not None else ""
    return (f"--every {every} counts from now, to the millisecond: its first occurrence is "
            f"{shown_time(now_ms + every_ms)}, then every {every}; to count from a round time, add e.g. "
            f"--anchor {suggested}{first}")


def resolve_schedule(spec: ScheduleInput, now_ms: int, notes: list[str] | None = None) -> dict[str, Any]:
    """The persisted schedule for the flags, with comis's error messages (all exit 2)."""
    chosen = [v for v in (spec.cron, spec.every, spec.at, spec.in_) if v is not None]
    if len(chosen) != 1:
        raise UsageError("Invalid cron schedule input", hint="give exactly one of --cron, --every, --at, --in")
    if spec.fold is not None and spec.at is None and spec.anchor is None:
        raise UsageError("Fold selection is legal only for a naive wall-clock timestamp")
    if spec.cron is not None:
        zone_name = honoured_zone_name(spec.tz if spec.tz is not None else "UTC")
        zone = load_cron_zone(zone_name)
        pattern = CronPattern.parse(spec.cron)
        if pattern.next_after(now_ms, zone) is None:
            raise UsageError("Cron schedule has no future occurrence")
        return {"kind": "cron", "expr": spec.cron, "tz": zone_name}
    wall_time = spec.at if spec.at is not None else spec.anchor if spec.every is not None else None
    if spec.tz is not None:  # kept in the policy file (transaction.job_change): never dropped
        if wall_time is None:
            honoured_zone_name(spec.tz)
        else:  # comis's order and words: an offset with --tz first, then the zone a wall time is read in
            parse_time_ms(wall_time, tz=spec.tz, fold=spec.fold, now_ms=now_ms)
            honoured_zone_name(spec.tz, message="Invalid wall-clock timezone")
    if spec.every is not None:
        every_ms = parse_duration_ms(spec.every, what="--every")
        if not 0 < every_ms <= MAX_SAFE_INT:
            raise UsageError("Invalid cron schedule input",
                             hint=f"--every takes a DURATION above 0 and up to {MAX_SAFE_INT} ms (30s, 5m, 1h30m)")
        anchor = now_ms
        if spec.anchor is not None:
            anchor, _ = parse_time_ms(spec.anchor, tz=spec.tz, fold=spec.fold, now_ms=now_ms)
            if anchor < 0:
                raise UsageError("Wall-clock timestamp exceeds the safe epoch range")
        elif notes is not None and (hint := anchor_hint(spec.every, every_ms, spec.tz, now_ms)):
            notes.append(hint)
        return {"kind": "every", "everyMs": every_ms, "anchorMs": anchor}
    if spec.at is not None:
        at_ms, naive = parse_time_ms(spec.at, tz=spec.tz, fold=spec.fold, now_ms=now_ms)
        if naive and spec.tz is None and notes is not None:
            notes.append(f"--at {spec.at} was read as UTC; pass --tz ZONE (or --tz local) to say which zone")
        if at_ms <= now_ms:
            raise UsageError("One-shot schedule must be in the future")
        if at_ms >= LATEST_SCHEDULABLE_MS:
            raise UsageError(f"--at {spec.at}: sxctl schedules times before 9999-01-01")
        return {"kind": "at", "atMs": at_ms}
    seconds_text = spec.in_ or ""
    seconds = parse_duration_ms(seconds_text, what="--in")
    if seconds % 1000 or seconds <= 0:
        raise UsageError("Invalid cron schedule input",
                         hint="--in takes a positive whole number of seconds, or a DURATION of whole seconds (90, 2m)")
    if now_ms + seconds > MAX_SAFE_INT:
        raise UsageError("Relative schedule exceeds the safe epoch range")
    if now_ms + seconds >= LATEST_SCHEDULABLE_MS:
        raise UsageError(f"--in {seconds_text}: sxctl schedules times before 9999-01-01")
    return {"kind": "at", "atMs": now_ms + seconds}


def describe_schedule(schedule: dict[str, Any], tz: str | None = None) -> str:
    """`cron 0 9 * * * America/New_York`, `every 30m`, `at 2026-09-21 06:02 UTC`; `tz` is the
    zone an every/at job keeps in the policy file (`every 30m America/New_York`, the `at` time in it)."""
    kind = schedule["kind"]
    if kind == "cron":
        return f"cron {schedule['expr']} {schedule['tz']}"
    if kind == "every":
        every = schedule["everyMs"]
        period = format_every(every) if every % 1000 == 0 else format_duration_ms(every)
        return f"every {period} {tz}" if tz and tz != "UTC" else f"every {period}"
    if tz and tz != "UTC":
        return f"at {format_ms(schedule['atMs'], '%Y-%m-%d %H:%M', load_cron_zone(tz))} {tz}"
    return f"at {format_ms(schedule['atMs'], '%Y-%m-%d %H:%M')} UTC"


def format_every(ms: int) -> str:
    """`30m`, `1h30m`, `45s`, `2d`: the compact DURATION form of a period."""
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            count, ms = divmod(ms, size)
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def schedule_computable(schedule: dict[str, Any]) -> bool:
    """Whether sxctl can compute this schedule's occurrences (a 7-field or foreign cron
    expression cannot: its runs are shown as '?')."""
    if schedule["kind"] != "cron":
        return True
    try:
        CronPattern.parse(schedule["expr"])
    except Exception:  # noqa: BLE001 - a 7-field or foreign expression is shown as '?'
        return False
    return True

"""One job as sxctl decides about it: comis's stored record joined with sxctl's policy entry and
the workspace's shared settings, read once where the store and the policy file are read
(`jobs_of`). Every rule below the API that decides a job's future — the timeline, the pass's
admission, the previews — reads these typed fields; the key strings of both files for what a
decision needs are here and in the files' own modules (store/schema.py, policy/file.py), nowhere
else. The `record` and `entry` a Job carries are for the writers: the pass that claims, settles,
skips and counts writes them back through the store and the policy file."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from ..spend.rules import effective_guards
from ..store.targets import endpoint_of, resolve_project
from ..timeline.occurrences import spring_gaps, zone_offsets
from ..timeline.schedule import CronPattern, job_zone_name, last_run, load_cron_zone, local_time, next_run
from .file import DAYS, DEFAULT_HOLD_MAX_MS, parse_active_hours
from .jitter import jitter_offset_ms, jittered_at

#: how often the engines run the pass (crontab, systemd, Kubernetes: each minute)
PASS_PERIOD_MS = 60_000
_GAP_CACHE_MS = 30 * 86_400_000  # the coming year's gaps, computed once a month per zone
_DAY_MS = 86_400_000
_WEEK_MS = 7 * _DAY_MS
MAX_WEEK_TIMES = 40_320  # the times of the week an --every job's "never runs" is proven over (15 s apart)


@lru_cache(maxsize=64)
def _spring_gaps(zone_name: str, month: int) -> tuple[tuple[int, int], ...]:
    """A zone's spring-forward gaps over the year from month `month` (of the epoch) on."""
    start_s = month * _GAP_CACHE_MS // 1000
    return tuple(sorted(set(spring_gaps(load_cron_zone(zone_name), start_s, start_s + 400 * 86_400))))


@lru_cache(maxsize=64)
def _zone_offsets(zone_name: str, month: int) -> frozenset[int]:
    """The UTC offsets (ms) a zone takes over the two years from month `month` (of the epoch) on:
    all it will take, as its rules repeat each year."""
    start_s = month * _GAP_CACHE_MS // 1000
    return frozenset(offset * 1000 for offset in zone_offsets(load_cron_zone(zone_name), start_s,
                                                               start_s + 2 * 366 * 86_400))


@dataclass(frozen=True)
class ActiveHours:
    """`--active-hours HH:MM-HH:MM` (minutes of the day; a start after the end wraps past
    midnight) on `days` (`--active-days`, week order), in the job's zone."""

    text: str
    start: int
    end: int
    days: tuple[str, ...]

    def allows(self, local: datetime) -> bool:
        """Is a wall time in the job's zone inside the active hours and days?"""
        return self._inside(local.weekday(), local.hour * 60 + local.minute)

    def _inside(self, weekday: int, minute: int) -> bool:
        """Is a minute of a weekday (0 = Monday) inside the active hours and days?"""
        if DAYS[weekday] not in self.days:
            return False
        return self.start <= minute < self.end if self.start < self.end else (minute >= self.start or minute < self.end)

    def next_start(self, local: datetime) -> datetime | None:
        """The wall time (naive) at which the next active span after `local` begins: the start on
        an active day, or midnight on one when the window wraps past it."""
        starts = [self.start, 0] if self.start > self.end else [self.start]
        found = [datetime.combine(local.date() + timedelta(days=ahead), time(minute // 60, minute % 60))
                 for ahead in range(8) for minute in starts
                 if DAYS[(local.weekday() + ahead) % 7] in self.days]
        return min((start for start in found if start > local), default=None)

    def span_end(self, local: datetime) -> datetime | None:
        """When the active span holding the wall time `local` (naive) ends (None: it is outside
        one): a late run is not sent after it."""
        if not self.allows(local):
            return None
        end = local.replace(second=0, microsecond=0)
        for _ in range(8 * 24 * 4):  # a quarter-hour at a time, then to the minute: at most a week ahead
            later = end + timedelta(minutes=15)
            if not self.allows(later):
                while self.allows(end):
                    end += timedelta(minutes=1)
                return end
            end = later
        return None  # active every day all day: no end

    def never_meets(self, schedule: Mapping[str, Any], zone_name: str, now_ms: int) -> bool:
        """Whether no time of a recurring schedule ever falls in these hours and days (its
        timeline has no run: a view says so instead of walking it to year 9999)."""
        if schedule["kind"] == "every":
            return self._every_never_meets(schedule["anchorMs"], schedule["everyMs"], zone_name, now_ms)
        if schedule["kind"] != "cron":
            return False
        hours, minutes, weekdays = CronPattern.parse(schedule["expr"]).day_times()
        times = {hour * 60 + m for hour in hours for m in minutes}
        for start, length in _spring_gaps(schedule.get("tz") or "UTC", now_ms // _GAP_CACHE_MS):
            # a time in one of the zone's spring-forward gaps of the coming year runs that much later
            shifted = {t + length // 60 for t in times if start // 60 <= t < (start + length) // 60}
            if any(t >= 24 * 60 for t in shifted):
                return False  # shifted into the next day: another weekday; not worth proving never
            times |= shifted
        inside = any(self.start <= minute < self.end if self.start < self.end else (minute >= self.start
                                                                                    or minute < self.end)
                     for minute in times)
        return not inside or (weekdays is not None and not {DAYS[day] for day in weekdays} & set(self.days))

    def _every_never_meets(self, anchor_ms: int, every_ms: int, zone_name: str, now_ms: int) -> bool:
        """For `--every` longer than a minute (a minute's meets any active minute): its
        occurrences fall, in UTC, on the times of the week `anchor + j * g` (g: the greatest common
        divisor of its period and a week), each in turn; none of them, read at any UTC offset the
        zone takes in the coming two years, is active. Not proven (False) when there are more than
        MAX_WEEK_TIMES such times."""
        step = math.gcd(every_ms, _WEEK_MS)
        if every_ms <= 60_000 or _WEEK_MS // step > MAX_WEEK_TIMES:
            return False
        for offset in _zone_offsets(zone_name, now_ms // _GAP_CACHE_MS):
            for position in range(anchor_ms % step, _WEEK_MS, step):
                local = (position + offset) % _WEEK_MS  # the epoch began on a Thursday (weekday 3)
                if self._inside((local // _DAY_MS + 3) % 7, local % _DAY_MS // 60_000):
                    return False
        return True

    def describe(self, zone_name: str) -> str:
        days = ",".join(self.days)
        if self.text == "00:00-24:00":  # --active-days alone
            return f"active days {days} {zone_name}"
        return f"active hours {self.text}{f' {days}' if self.days != DAYS else ''} {zone_name}"


@dataclass(eq=False)
class Job:
    """A job's schedule, zone, target, limits, windows and pins, typed (see the module). Read
    only: nothing assigns to a Job after `job_of` (not `frozen`, which made building the Jobs of
    a 10,000-job store cost twice as much)."""

    id: str
    name: str
    built_in: bool
    #: comis's persisted schedule (kind cron/every/at); next_after/last_at_or_before walk it
    schedule: dict[str, Any]
    status: str
    next_run_ms: int | None
    zone_name: str
    #: the project its messages go to when it names one (resolved against the workspace); None:
    #: the pass's project
    target_project: Path | None
    hold_max_ms: int
    catch_up: str
    stale_after_ms: int
    missed_note: bool
    active: ActiveHours | None
    max_runs_per_day: int | None
    max_runs: int | None
    until_ms: int | None
    max_unconsumed: int | None
    overlap: str
    jitter_offset_ms: int
    host: str | None
    #: the spend guards it follows, its own or the workspace budget's (spend/rules.effective_guards)
    guards: dict[str, Any]
    #: the maintenance windows that apply to it: the workspace's and its own
    windows: tuple[dict[str, Any], ...]
    #: whether the policy file has an entry for it (a job without one follows every default)
    has_policy: bool
    #: the runs the policy file counted (toward --max-runs) and its newest counted day
    #: (`{date, runs}`, toward --max-runs-per-day): the half of each count that outlives the ledger
    counted_runs: int
    counted_day: dict[str, Any] | None
    #: when its limits were last reset (`cron resume` of an expired job): runs before spend nothing
    limits_from_ms: int
    #: occurrences it ran while the clock was ahead, kept by `cron repair --clock`: never run again
    ran_ahead: frozenset[int]
    record: dict[str, Any]
    entry: dict[str, Any]

    @property
    def guarded(self) -> bool:
        """Whether any spend guard setting applies to it, its own or the workspace budget's."""
        return bool(self.guards["source"])

    @property
    def token_cap(self) -> int | None:
        """--max-tokens-per-day, the job's own or the workspace budget's."""
        cap: int | None = self.guards.get("maxTokensPerDay")
        return cap

    @property
    def one_shot(self) -> bool:
        return self.schedule["kind"] == "at"

    @cached_property
    def zone(self):
        """The job's zone, loaded once (its days, hours and daily limits are counted there)."""
        return load_cron_zone(self.zone_name)

    def run_at(self, occurrence_ms: int) -> int:
        """When the pass runs an occurrence: its time plus the job's --jitter offset, cut to a
        second before the next occurrence (policy/jitter.py), and to a minute (the engines' pass
        period) before the end of the active span the occurrence is in and before its --until: the
        limits judge the occurrence and the sending pass alike, and a jitter alone never moves a
        run out of them."""
        if not self.jitter_offset_ms:
            return occurrence_ms
        if occurrence_ms not in self._run_times:  # asked several times per occurrence
            run_ms = jittered_at(self.schedule, self.jitter_offset_ms, occurrence_ms)
            for limit in (self.until_ms if self.until_ms is not None and occurrence_ms <= self.until_ms else None,
                          self.span_end_ms(occurrence_ms)):
                if limit is not None:
                    run_ms = max(occurrence_ms, min(run_ms, limit - PASS_PERIOD_MS))
            self._run_times[occurrence_ms] = run_ms
        return self._run_times[occurrence_ms]

    @cached_property
    def _run_times(self) -> dict[int, int]:
        return {}

    def span_end_ms(self, at_ms: int) -> int | None:
        """When the active span holding the instant ends (None: no active hours, outside them, or
        active all week): a run is not sent after it."""
        if self.active is None:
            return None
        end = self.active.span_end(self.local(at_ms).replace(tzinfo=None))
        if end is None:
            return None
        late, early = (int(end.replace(tzinfo=self.zone, fold=fold).timestamp() * 1000) for fold in (0, 1))
        if self.local(late).replace(tzinfo=None) == end:
            return late
        while late - early > 1:  # the end is in a spring-forward gap: the span ends as the clocks jump past it
            middle = (early + late) // 2
            early, late = (early, middle) if self.local(middle).replace(tzinfo=None) >= end else (middle, late)
        return late

    @property
    def due_ms(self) -> int | None:
        """When the pass runs its next unrun occurrence (None: it has none)."""
        return None if self.next_run_ms is None else self.run_at(self.next_run_ms)

    def next_after(self, bound_ms: int) -> tuple[int, bool] | None:
        """(the first occurrence strictly after `bound_ms`, whether DST shaped it)."""
        return next_run(self.schedule, bound_ms)

    def last_at_or_before(self, until_ms: int) -> int | None:
        return last_run(self.schedule, until_ms)

    def count_between(self, after_ms: int, until_ms: int, *, cap: int, budget_s: float) -> int:
        """How many occurrences of a recurring job fall in (after_ms, until_ms]: arithmetic for
        `every`, and over each stretch of constant offset for cron (timeline/occurrences.py, at
        most `cap`, or `cap` when counting took `budget_s`), never a walk."""
        schedule = self.schedule
        if schedule["kind"] == "every":
            anchor, every = schedule["anchorMs"], schedule["everyMs"]
            if until_ms < anchor:
                return 0
            low = max(after_ms, anchor - 1)
            return (until_ms - anchor) // every - ((low - anchor) // every if low >= anchor else -1)
        return CronPattern.parse(schedule["expr"]).count_between(after_ms, until_ms, self.zone, cap, budget_s)

    def local(self, ms: int) -> datetime:
        """An instant as a wall time in the job's zone (its days and hours are counted there)."""
        return local_time(ms, self.zone)

    def date_of(self, ms: int) -> str:
        """The date in the job's zone of an instant (`--max-runs-per-day` counts by it)."""
        return self.local(ms).date().isoformat()


def due_no_sooner_than(record: dict[str, Any]) -> int | None:
    """A bound of `Job.due_ms` read from the stored record alone: its next run (None: none).
    `--jitter` only delays a run (`Job.run_at`), so a pass skips building the Jobs of the
    records not due yet, and a rehearsal wakes no later than the first of them comes due."""
    next_run_ms: int | None = record["lifecycle"].get("nextRunAtMs")
    return next_run_ms


def job_of(record: dict[str, Any], policy: Mapping[str, Any], workspace: Path,
           unset: dict[str, Any] | None = None) -> Job:
    """The Job of a stored record, with its entry of the policy document `policy` (read_policy)
    and its target resolved against `workspace` (the folder holding the store). `unset`: the
    `policy_fields` of a job without an entry, when the caller builds many."""
    entry = policy["jobs"].get(record["id"], {})
    fields = policy_fields(record["id"], entry, policy) if entry or unset is None else unset
    endpoint = endpoint_of(record)
    life = record["lifecycle"]
    return Job(
        id=record["id"], name=record["name"], built_in=record["source"] == "built_in", schedule=record["schedule"],
        status=life["status"], next_run_ms=life.get("nextRunAtMs"), zone_name=job_zone_name(record, entry),
        target_project=resolve_project(endpoint["channelInstanceId"], workspace) if endpoint else None,
        record=record, entry=entry, **fields)  # its own entry: the pass writes the one it adds


def policy_fields(job_id: str, entry: dict[str, Any], policy: Mapping[str, Any]) -> dict[str, Any]:
    """The Job fields its policy entry (`{}`: it has none) and the workspace's settings give."""
    hours = entry.get("activeHours")
    active = None
    if hours is not None:
        start, end = parse_active_hours(hours)
        active = ActiveHours(hours, start, end, tuple(entry.get("activeDays", DAYS)))
    return dict(
        hold_max_ms=entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS), catch_up=entry.get("catchUp", "once"),
        stale_after_ms=entry.get("staleAfterMs", 0), missed_note=entry.get("missedNote", True), active=active,
        max_runs_per_day=entry.get("maxRunsPerDay"), max_runs=entry.get("maxRuns"), until_ms=entry.get("untilMs"),
        max_unconsumed=entry.get("maxUnconsumed"), overlap=entry.get("overlap", "queue"),
        jitter_offset_ms=jitter_offset_ms(job_id, entry.get("jitterMs")), host=entry.get("host"),
        guards=effective_guards(entry, policy.get("budget")),
        windows=tuple(w for w in (policy.get("maintenance"), entry.get("maintenance")) if w),
        has_policy=bool(entry), counted_runs=entry.get("runs", 0), counted_day=entry.get("day"),
        limits_from_ms=entry.get("limitsFromMs", 0), ran_ahead=frozenset(entry.get("ranAheadMs", ())))


def jobs_of(store: Mapping[str, Any], policy: Mapping[str, Any], workspace: Path) -> list[Job]:
    """Every job of the store, as sxctl decides about it."""
    unset = policy_fields("", {}, policy)  # most jobs have no entry: their fields are these
    return [job_of(record, policy, workspace, unset) for record in store["jobs"]]

"""What a late run stands for: the occurrences it skipped (counted under the store lock within a
budget) and the note a catch-up run's message ends with (spec runner.md §4)."""

from __future__ import annotations

from typing import Any

from ...timeparse import format_ms
from ..policy.file import DAYS
from ..policy.job import Job
from .limits import LimitUsage
from .schedule import CronPattern, load_cron_zone, next_run

SKIP_COUNT_CAP = 10_000
SKIP_COUNT_BUDGET_S = 0.5  # counting runs under the store lock


def count_skipped(job: Job, scheduled_for: int, claimed_at: int, entry: dict[str, Any],
                  usage: LimitUsage | None = None) -> dict[str, list[Any]]:
    """Occurrences strictly after the one we run and at or before the claim, folded into this run:
    those the job's policy would have run — inside its active hours and days, within its daily
    limits as `usage` has them used (runs already made that day, a day whose tokens are spent) —
    are recorded in the run's report `entry` (the pass reports them once, with the run:
    cron/run/pass_report.py; a catch-up's note tells the agent). Returned: the others, as
    `{reason: [count, first, last]}`, for the pass to record as skipped."""
    span = missed_between(job.schedule, scheduled_for, claimed_at)
    if span is None:
        return {}
    total = span
    left_out: dict[str, list[Any]] = {}
    if job.active is not None or job.max_runs_per_day is not None or (usage is not None and usage.token_cap):
        span, left_out = _missed_by_policy(job, scheduled_for, claimed_at, total, usage or LimitUsage(0, None))
    if span is not None:
        shown, first, last = span
        entry.update(skipped_occurrences=shown, skipped_first_ms=first, skipped_last_ms=last)
    return left_out


Span = tuple[int | str, int | None, int | None]  # (count, first, last) of folded occurrences


def _missed_by_policy(job: Job, after: int, until: int, total: Span, usage: LimitUsage
                      ) -> tuple[Span | None, dict[str, list[Any]]]:
    """Of the occurrences in (after, until], those inside the job's active hours and days and
    within its daily limits (the runs already made that day and the run itself count on theirs; a
    day whose tokens are spent runs none): counted day by day, each active span
    by arithmetic (no walk, so a week of every-minute occurrences costs a few steps a day); and the
    rest by reason, `[count, first, last]` (their first and last as the whole span's)."""
    from datetime import datetime, time, timedelta  # only when a late run with such a policy is claimed

    def instant(day, minute: int) -> int:  # a wall time of the day in the job's zone (24:00: the next midnight)
        return int((datetime.combine(day, time(), job.zone) + timedelta(minutes=minute)).timestamp() * 1000)

    count, first, last = 0, None, None
    cut = {"inactive_hours": 0, "max_runs_per_day": 0, "max_tokens_per_day": 0}
    day, end_day = job.local(after).date(), job.local(until).date()
    while day <= end_day and count < SKIP_COUNT_CAP:
        in_day = 0
        for start, end in _spans(job, day):
            low, high = max(after, instant(day, start) - 1), min(until, instant(day, end) - 1)
            found = 0 if high <= low else job.count_between(low, high, cap=SKIP_COUNT_CAP,
                                                             budget_s=SKIP_COUNT_BUDGET_S)
            if found:
                in_day += found
                first = first or (job.next_after(low) or (None,))[0]
                last = job.last_at_or_before(high)
        date = day.isoformat()
        if usage.token_cap is not None and usage.tokens.get(date, 0) >= usage.token_cap:
            cut["max_tokens_per_day"] += in_day
            day += timedelta(days=1)
            continue
        used = usage.runs_on(date) + (1 if day == job.local(after).date() else 0)
        room = max(0, (job.max_runs_per_day or SKIP_COUNT_CAP) - used)
        cut["max_runs_per_day"] += max(0, in_day - room)
        count += min(in_day, room)
        day += timedelta(days=1)
    total_count = total[0] if isinstance(total[0], int) else SKIP_COUNT_CAP
    cut["inactive_hours"] = max(0, total_count - count - cut["max_runs_per_day"] - cut["max_tokens_per_day"])
    left_out = {reason: [n, total[1], total[2]] for reason, n in cut.items() if n > 0}
    if count == 0:
        return None, left_out
    shown: int | str = count if count < SKIP_COUNT_CAP else f"≥{SKIP_COUNT_CAP}"
    return (shown, first, last), left_out


def _spans(job: Job, day) -> list[tuple[int, int]]:
    """The job's active spans on a day, in minutes of the day (all of it without active hours)."""
    active = job.active
    if active is None:
        return [(0, 24 * 60)]
    if DAYS[day.weekday()] not in active.days:
        return []
    if active.start < active.end:
        return [(active.start, active.end)]
    return [(0, active.end), (active.start, 24 * 60)]


def missed_between(schedule: dict[str, Any], after: int, until: int) -> tuple[int | str, int | None, int | None] | None:
    """The occurrences of `schedule` strictly after `after` and at or before `until`: their count
    (`≥10000` past the cap), first and last; None when there are none (or for a one-shot, which
    has one occurrence)."""
    if schedule["kind"] == "every":
        every = schedule["everyMs"]
        count = (until - after) // every
        first, last = after + every, after + count * every
    elif schedule["kind"] == "at":
        return None
    else:
        pattern, zone = CronPattern.parse(schedule["expr"]), load_cron_zone(schedule["tz"])
        count = pattern.count_between(after, until, zone, SKIP_COUNT_CAP, SKIP_COUNT_BUDGET_S)
        found = next_run(schedule, after) if count else None
        first = found[0] if found else None
        last = pattern.last_at_or_before(until, zone) if count else None
    if count <= 0:
        return None
    return (count if count < SKIP_COUNT_CAP else f"≥{SKIP_COUNT_CAP}"), first, last


def missed_note(job: Job, run: dict[str, Any]) -> str | None:
    """The last line of a catch-up run's message: how many occurrences it stands for and
    their span in the job's zone (off with the job's `--no-missed-note`); `run`: the pass's
    report entry of the run (`scheduledForMs`, what `count_skipped` found)."""
    if not job.missed_note:
        return None
    zone = job.zone
    first = run["scheduledForMs"]
    skipped = run.get("skipped_occurrences", 0)
    last = run.get("skipped_last_ms") or first
    if not skipped:
        return f"[sxctl: a late run — this occurrence was due at {_wall(first, zone)} ({job.zone_name})]"
    count = f"{skipped + 1}" if isinstance(skipped, int) else f"more than {skipped.lstrip('≥')}"
    return (f"[sxctl: a catch-up run for {count} missed occurrences, {_wall(first, zone)} to {_wall(last, zone)} "
            f"({job.zone_name})]")


def _wall(ms: int, zone) -> str:
    """A time as the job's zone reads it; with its abbreviation when the clock shows it twice (a
    fall-back hour: `01:00 EDT` or `01:00 EST`)."""
    from datetime import datetime  # only when a late run is told

    local = datetime.fromtimestamp(ms / 1000, zone)
    twice = local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()
    return format_ms(ms, "%Y-%m-%d %H:%M %Z" if twice else "%Y-%m-%d %H:%M", zone)


def skipped_count(run: dict[str, Any]) -> int:
    """A run's skipped occurrences as a number (a count cut short, `≥N`, counts as N)."""
    value = run.get("skipped_occurrences", 0)
    return value if isinstance(value, int) else int(str(value).lstrip("≥"))

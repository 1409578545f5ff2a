"""What a late run stands for: the occurrences it skipped (counted under the store lock within a
budget) and the note a catch-up run's message ends with (spec runner.md §4)."""

from __future__ import annotations

from typing import Any

from ...timeparse import format_ms
from ..policy.job import Job
from .schedule import CronPattern, load_cron_zone, next_run

SKIP_COUNT_CAP = 10_000
SKIP_COUNT_BUDGET_S = 0.5  # counting runs under the store lock


def count_skipped(job: Job, scheduled_for: int, claimed_at: int, entry: dict[str, Any]) -> None:
    """Occurrences strictly after the one we run and at or before the claim that the job's policy
    would have run — inside its active hours and days, within its daily limit: never run, folded
    into this run. Recorded in the run's report `entry` (the pass reports them once, with the
    run: cron/run/pass_report.py; a catch-up's note tells the agent)."""
    if job.active is None and job.max_runs_per_day is None:
        span = missed_between(job.schedule, scheduled_for, claimed_at)  # type: ignore[arg-type]
    else:
        span = _missed_by_policy(job, scheduled_for, claimed_at)
    if span is not None:
        shown, first, last = span
        entry.update(skipped_occurrences=shown, skipped_first_ms=first, skipped_last_ms=last)


def _missed_by_policy(job: Job, after: int, until: int) -> tuple[int | str, int | None, int | None] | None:
    """`missed_between`, counting only the occurrences the job's active hours and daily limit
    let run (each day's limit counts the run itself): one by one, within the same cap and budget."""
    import time  # only when a late run with such a policy is claimed

    deadline = time.monotonic() + SKIP_COUNT_BUDGET_S
    per_day = {job.date_of(after): 1}
    count, first, last = 0, None, None
    found = job.next_after(after)
    while found is not None and found[0] <= until and count < SKIP_COUNT_CAP and time.monotonic() < deadline:
        at, local = found[0], job.local(found[0])
        day = local.date().isoformat()
        if (job.active is None or job.active.allows(local)) and per_day.get(day, 0) < (job.max_runs_per_day
                                                                                       or SKIP_COUNT_CAP):
            count, first, last = count + 1, first or at, at
            per_day[day] = per_day.get(day, 0) + 1
        found = job.next_after(at)
    if count == 0:
        return None
    stopped = found is not None and found[0] <= until  # the cap or the budget ended the count
    return (f"≥{count}" if stopped else count), first, last


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

"""Deterministic jitter (`--jitter DURATION`): a job's runs are delayed by a fixed offset derived
from its id, so that fifty jobs at `0 9 * * *` do not all reach the agent at 09:00 (systemd's
`RandomizedDelaySec` with `FixedRandomDelay`, anacron's `RANDOM_DELAY`). The offset is applied by
the pass to the due time: comis's `nextRunAtMs` stays what comis computes, and an occurrence not
yet run inside its jitter window is still the store's next one after any restart.

A run never reaches the job's next occurrence: `--jitter` must be shorter than the shortest time
between two runs over the coming year, DST changes included (`check_jitter`, timeline/gaps.py),
and a jitter that is not (a policy file edited by hand, a zone whose rules changed) is cut, per
occurrence, to fall a second before the next one (`jittered_at`): each occurrence is due before the
one after it."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from ...errors import UsageError
from ...timeparse import duration_text, format_ms
from ..timeline.gaps import shortest_gap
from ..timeline.schedule import job_zone_name, load_cron_zone, next_run, schedule_computable

MAX_JITTER_MS = 7 * 24 * 3_600_000
#: how far a run stays before the job's next occurrence when its offset would reach it
_BEFORE_NEXT_MS = 1000


def jitter_offset_ms(job_id: str, jitter_ms: int | None) -> int:
    """The job's fixed offset in [0, jitter_ms): the same on every pass, host and restart (a
    SHA-256 of the id, not Python's salted hash)."""
    if not jitter_ms:
        return 0
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % jitter_ms


def jittered_at(schedule: dict[str, Any], offset: int, due_at: int) -> int:
    """`due_at` plus the job's jitter `offset`, but at least a second before the job's next
    occurrence (an offset that would reach it would fold that occurrence into this run). The
    one rule of the pass and every preview (`policy.job.Job.run_at`)."""
    if not offset:
        return due_at
    following = _following(_schedule_key(schedule), due_at)
    if following is not None:
        offset = max(0, min(offset, following - due_at - _BEFORE_NEXT_MS))
    return due_at + offset


_SCHEDULE_KEYS = ("kind", "expr", "tz", "everyMs", "anchorMs", "atMs")  # what next_run reads


def _schedule_key(schedule: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((key, schedule[key]) for key in _SCHEDULE_KEYS if key in schedule)


@lru_cache(maxsize=4096)
def _following(key: tuple[Any, ...], due_at: int) -> int | None:
    """The occurrence after `due_at` (cached: the pass and the previews ask it of each occurrence
    more than once)."""
    schedule = dict(key)
    if not schedule_computable(schedule):
        return None
    try:
        found = next_run(schedule, due_at)
    except UsageError:  # a zone this machine cannot load: `cron validate` names it
        return None
    return None if found is None else found[0]


def check_jitter(job: dict[str, Any], entry: dict[str, Any], now_ms: int) -> None:
    """--jitter must be shorter than the time between two runs of the job over the coming year,
    DST changes included (exit 2): a longer delay would fold the following occurrence into this
    one's run. The message says when the runs are that close."""
    jitter = entry.get("jitterMs")
    schedule = job["schedule"]
    if not jitter or schedule["kind"] == "at" or not schedule_computable(schedule):
        return
    gap = shortest_gap(schedule, now_ms)
    if gap is None or jitter < gap.ms:
        return
    prefix = f"--jitter {duration_text(jitter)} must be shorter than the time between two runs of {job['name']}"
    if schedule["kind"] == "every":
        raise UsageError(f"{prefix}: its runs are {duration_text(gap.ms)} apart")
    zone = job_zone_name(job, entry)
    day = format_ms(gap.at_ms, "%Y-%m-%d", load_cron_zone(zone))
    raise UsageError(f"{prefix}: on {day} its runs are {duration_text(gap.ms)} apart ({zone})")

"""A job's policy as `cron list` and `cron show` print it in `--json` (`policy`): every setting of
its entry in sxctl's policy file (cron/policy/file.py) with the defaults filled in."""

from __future__ import annotations

from typing import Any

from ..run.pings import mask_url
from ..spend.rules import describe_guards
from .file import DEFAULT_HOLD_MAX_MS
from .hosts import ANY
from .jitter import jitter_offset_ms


def describe(entry: dict[str, Any]) -> dict[str, Any]:
    """A job's policy for `cron list/show --json`: every setting with its default filled in."""
    return {
        "holdMaxMs": entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS), "catchUp": entry.get("catchUp", "once"),
        "staleAfterMs": entry.get("staleAfterMs"), "missedNote": entry.get("missedNote", True),
        "maxUnconsumed": entry.get("maxUnconsumed"), "maxRunsPerDay": entry.get("maxRunsPerDay"),
        "untilMs": entry.get("untilMs"), "maxRuns": entry.get("maxRuns"), "runs": entry.get("runs", 0),
        "activeHours": entry.get("activeHours"), "activeDays": entry.get("activeDays"),
        "paused": entry.get("paused"), "skips": entry.get("skips", {"total": 0, "recent": []}),
        "tz": entry.get("tz"), "overlap": entry.get("overlap", "queue"), "maintenance": entry.get("maintenance"),
        "jitterMs": entry.get("jitterMs"), "host": entry.get("host", ANY),
        "pingUrl": mask_url(entry["pingUrl"]) if entry.get("pingUrl") else None,  # never shown whole
        "pingOn": entry.get("pingOn", "written"),  # each run's message (inbox/lifetimes.py):
        "expiresMs": entry.get("expiresMs"), "readWithinMs": entry.get("readWithinMs"),
        **describe_guards(entry),
    }


def describe_job(job_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """`describe` with what depends on the job's id: its fixed jitter offset (`jitterOffsetMs`)."""
    return {**describe(entry), "jitterOffsetMs": jitter_offset_ms(job_id, entry.get("jitterMs"))
            if entry.get("jitterMs") else None}

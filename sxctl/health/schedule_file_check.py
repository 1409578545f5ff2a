"""doctor's `schedule file` check: the drift of the store from the last `cron apply`
(cron/schedule_file/drift.py), as `cron plan` and `status` say it."""

from __future__ import annotations

import shlex
from typing import Any

from ..cron.policy.file import read_policy
from .findings import Findings


def check_schedule_file(found: Findings, ws, store: dict[str, Any]) -> None:
    """Nothing when no apply was made; ok when the store is as the last apply left it; one warning
    per job or setting changed by hand since, and one when the schedule file changed since."""
    policy = read_policy(ws)
    if "applied" not in policy:
        return  # no apply made here (and nothing of jobs as code loaded)
    from ..cron.schedule_file.drift import drift_of
    from ..cron.schedule_file.read import DEFAULT_NAME

    drift = drift_of(store, policy, ws.root)
    given = "" if drift.file == DEFAULT_NAME else f" -f {shlex.quote(drift.file or '')}"
    for line in drift.lines():
        found.add("schedule file", "warn", line,
                  f"sxctl cron plan{given} (then sxctl cron apply{given} to restore the file's jobs)")
    if drift.file_changed is None:
        found.add("schedule file", "warn", f"{drift.file}, which the last cron apply read, is not there or cannot "
                  "be read", f"restore it, or sxctl cron dump > {drift.file}")
    elif drift.file_changed:
        found.add("schedule file", "warn", f"{drift.file} changed since the last cron apply",
                  f"sxctl cron plan{given}, then sxctl cron apply{given}")
    if not drift.moved and drift.file_changed is False:
        found.add("schedule file", "ok", f"the jobs are as the last cron apply of {drift.file} left them")

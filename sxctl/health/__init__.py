"""`sxctl doctor`: is everything around the agent alive and sound? One verdict per check — `ok`,
`warn` or `fail` — and for every check that is not ok, the command that fixes it. Read-only."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from .cron_checks import (
    check_cron_files,
    check_crontab_blocks,
    check_failed_runs,
    check_job_targets,
    check_ledger,
    check_scheduler,
)
from .engine_checks import check_crontab_entry
from .findings import Findings
from .host_checks import check_hosts, check_pings
from .maintenance_check import check_maintenance, check_paused_by_sxctl
from .schedule_file_check import check_schedule_file
from .session_checks import (
    check_agent,
    check_deadlines,
    check_history,
    check_inbox_switch,
    check_permissions,
    check_stranded,
    check_temps_and_locks,
    check_timers,
)
from .spend_checks import check_spend

__all__ = ["diagnose"]


def diagnose(project: Path | None, session, ws, *, environ: Mapping[str, str] = os.environ,
             clock: Clock = SYSTEM_CLOCK, max_log_bytes: int = 2_000_000,
             crontab_text: Callable[[], str | None] = lambda: None,
             crontab_file: str | None = None) -> list[dict[str, Any]]:
    """Every check, in the order a person would look. `project`/`session`/`ws` may be None
    (not found); `crontab_text` returns the user's crontab (`crontab_file` when doctor was given
    one), None when there is none, raising SxctlError when it cannot be read (the `crontab entry`
    check's failure; the other checks read it as none)."""
    found = Findings()
    now = clock.now_ms()
    if project is None:
        found.add("project", "fail", "no project here (no .scorpiox/ folder in this folder or above)",
                  "cd into the project, or pass --project DIR (sxctl agent run --init creates one)")
    else:
        found.add("project", "ok", str(project))
        found.guard("sessions", lambda: check_agent(found, project, clock))
        found.guard("stranded", lambda: check_stranded(found, project, clock))
        found.guard("message deadlines", lambda: check_deadlines(found, project, clock))
    if session is not None:
        found.guard("inbox gate", lambda: check_inbox_switch(found, session))
        found.guard("permissions", lambda: check_permissions(found, session, ws))
        found.guard("timers", lambda: check_timers(found, session))
        found.guard("history", lambda: check_history(found, session))
    if ws is not None:
        found.guard("temps and locks", lambda: check_temps_and_locks(found, session, ws, now))
        files = found.guard("cron files", lambda: check_cron_files(found, ws, max_log_bytes, clock))
        if files is not None:  # else: which jobs are scheduled, and which runs exist, is unknown
            found.guard("scheduler",
                        lambda: check_scheduler(found, ws, files[0], clock, environ, crontab_text, project))
            found.guard("hosts", lambda: check_hosts(found, ws, files[0], now))
            found.guard("pings", lambda: check_pings(found, ws, now))
            found.guard("job targets", lambda: check_job_targets(found, ws, files[0]))
            found.guard("maintenance", lambda: check_maintenance(found, ws, files[0], now))
            found.guard("paused jobs", lambda: check_paused_by_sxctl(found, ws, files[0]))
            found.guard("schedule file", lambda: check_schedule_file(found, ws, files[0]))
            found.guard("spend guards", lambda: check_spend(found, ws, files[0], project or ws.root, session, clock))
            found.guard("failed runs", lambda: check_failed_runs(found, files, clock, ws))
        found.guard("ledger", lambda: check_ledger(found, ws, files, max_log_bytes, environ))
    if ws is not None:
        found.guard("crontab entry", lambda: check_crontab_entry(found, ws, project, crontab_text, crontab_file))
    found.guard("crontab blocks", lambda: check_crontab_blocks(found, crontab_text, crontab_file))
    return found.checks

"""`doctor`'s maintenance checks: the windows open now (`cron pause --until`), each a warning —
its jobs skip their occurrences until it ends — with the command that ends it early; and the jobs
sxctl paused (expired, or at a limit), each a warning as in `status`."""

from __future__ import annotations

from typing import Any

from ..cron.policy.file import read_policy
from ..cron.policy.maintenance import maintenance_message, open_windows, resume_command
from ..cron.timeline.views import paused_by_sxctl
from .findings import Findings


def check_maintenance(found: Findings, ws, store: dict[str, Any], now: int) -> None:
    """One `maintenance` verdict per open window; nothing when there is none."""
    for window in open_windows(read_policy(ws), store, now):
        found.add("maintenance", "warn", maintenance_message(window), resume_command(window))


def check_paused_by_sxctl(found: Findings, ws, store: dict[str, Any]) -> None:
    """One `paused jobs` warning per job sxctl paused (`cron_expired`/`cron_paused_by_limit` in
    `status`), with the command that resumes it."""
    for paused in paused_by_sxctl(store, read_policy(ws)["jobs"]):
        found.add("paused jobs", "warn", f"cron job {paused['name']}: {paused.get('message') or paused['reason']}",
                  f"sxctl cron resume -- {paused['name']}")

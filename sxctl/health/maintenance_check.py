"""`doctor`'s maintenance check: the windows open now (`cron pause --until`), each a warning —
its jobs skip their occurrences until it ends — with the command that ends it early."""

from __future__ import annotations

from typing import Any

from ..cron.policy.file import read_policy
from ..cron.policy.maintenance import maintenance_message, open_windows, resume_command
from .findings import Findings


def check_maintenance(found: Findings, ws, store: dict[str, Any], now: int) -> None:
    """One `maintenance` verdict per open window; nothing when there is none."""
    for window in open_windows(read_policy(ws), store, now):
        found.add("maintenance", "warn", maintenance_message(window), resume_command(window))

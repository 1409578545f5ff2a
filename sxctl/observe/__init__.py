"""One view of everything that will happen: `status` (`summary`), the merged `next` timeline
(`timeline`), the snapshots that `watch` diffs into events (`watching`, woken by `waiter`) and
the Prometheus text of `metrics` (`metrics`); `stranded` is the one definition of a session left
holding what no agent reads. Read-only: nothing here takes a lock or writes, but for the metrics
textfile of `cron tick --metrics-file`. Every name below is offered from here."""

from __future__ import annotations

from .metrics import CONTENT_TYPE, Family, collect, exposition, write_metrics_file
from .stranded import Stranded, stranded_problem, stranded_sessions
from .summary import status
from .timeline import merged_next
from .waiter import ChangeWaiter
from .watching import Snapshot, diff, snapshot, stranded_events, watch_events

__all__ = [
    "CONTENT_TYPE", "ChangeWaiter", "Family", "Snapshot", "Stranded", "collect", "diff", "exposition", "merged_next",
    "snapshot", "status", "stranded_events", "stranded_problem", "stranded_sessions", "watch_events",
    "write_metrics_file",
]

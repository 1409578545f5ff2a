"""`cron repair`: the way out of a state every pass and edit stops on, when sxctl can tell what
is right (`--clock`: claims and runs recorded by a clock that ran ahead; cron/store/clock_repair.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import UsageError
from ..record import record
from ..report import Reporter
from .jobs import ledger_ceiling
from .scope import find_workspace, reporter

if TYPE_CHECKING:
    from ..cron.store.clock_repair import ClockRepair
    from ..cron.store.workspace import Workspace


@record
class Repair:
    """`cron repair --clock`: the records found ahead of the clock and what the repair did with
    each job (`.outcome`: `ClockRepair`)."""

    workspace: Workspace
    outcome: ClockRepair

    def to_json(self) -> dict[str, Any]:
        return {**self.outcome.to_json(), "workspace": str(self.workspace.root)}


def repair_scheduler(*, clock_ahead: bool = False, max_log_bytes: int | None = None, lock_wait: float = 10.0,
                     workspace=None, project=None, session: str | None = None,
                     environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK,
                     report: Reporter | None = None) -> Repair:
    """`clock_ahead`: take this clock as the right one after passes ran under a clock that was
    ahead — the claims and runs recorded after now stop stopping passes and edits, each recurring
    job runs again from its first occurrence after now that did not run, and none that ran runs
    again. Nothing ahead: nothing is written; a second repair changes nothing."""
    if not clock_ahead:
        raise UsageError("say what to repair: --clock (claims and runs recorded by a clock that ran ahead)")
    from ..cron.store.clock_repair import repair_clock

    ws = find_workspace(workspace, project=project, session=session)
    return Repair(ws, repair_clock(ws, environ=environ, clock=clock, report=reporter(report),
                                  max_log_bytes=ledger_ceiling(max_log_bytes, environ), lock_wait_s=lock_wait))

"""`sxctl cron repair`: the way out of a state every pass and edit stops on (added to the cron
group by `sxctl.cli.cron`)."""

from __future__ import annotations

import click

from ...api import repair_scheduler
from ..output import Command, emit, in_workspace, reporter, say, settings
from .options import lock_wait_option, max_log_option, shown_time, when


@click.command("repair", cls=Command, mutating=True)
@click.option("--clock", "clock_ahead", is_flag=True,
              help="This clock is right: claims and runs recorded after its now came from a clock that ran ahead.")
@lock_wait_option
@max_log_option
def repair(clock_ahead, lock_wait_s, max_log_bytes) -> None:
    """Let passes and edits go on after a clock that ran ahead (they stop on `clock_behind`).

    With --clock, the claims and runs recorded after this clock's now are taken as made by a
    clock that ran ahead: passes and edits no longer stop on them, each recurring job runs
    again from its first occurrence after now that did not run, and no occurrence that ran
    runs again. The ledger is never rewritten. A second repair changes nothing.

    \b
    Example:
      sxctl cron repair --clock
    """
    result = repair_scheduler(clock_ahead=clock_ahead, max_log_bytes=max_log_bytes, lock_wait=lock_wait_s,
                              clock=settings().clock, report=reporter(), **in_workspace())
    outcome = result.outcome

    def human() -> None:
        if not outcome.ahead:
            say(f"nothing to repair: no claim or run is recorded after this clock's now ({when(outcome.now_ms)})")
            return
        if not outcome.changed:
            say(f"repaired already: the {outcome.ahead} record(s) ahead of this clock (up to "
                f"{when(outcome.through_ms)}) are acknowledged and every job runs from now")
            return
        say(f"acknowledged {outcome.ahead} claim(s) and run(s) recorded after this clock's now, up to "
            f"{when(outcome.through_ms)}: passes and edits go on from now")
        for job in outcome.jobs:
            moved = job["nextRunAtMs"]
            was = f", was {shown_time(moved['before'])}" if moved["after"] != moved["before"] else ""
            kept = f"; {job['ranAhead']} occurrence(s) it ran ahead will not run again" if job["ranAhead"] else ""
            say(f"{job['name']}: next run {when(moved['after'])}{was}{kept}")

    emit(result.to_json(), human)

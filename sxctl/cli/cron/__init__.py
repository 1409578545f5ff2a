"""`sxctl cron …`: edit, validate and preview a comis scheduler store offline.

The group is defined here and its commands live in one module per banner (edit, view, ledger,
tick, engines); no command module imports this package, so there is no import circle."""

from __future__ import annotations

import click

from ..output import Group
from . import edit, engines, ledger, tick, view


@click.group("cron", cls=Group)
def cron() -> None:
    """Durable scheduled jobs in the comis store (<workspace>/.scheduler/cron-jobs.json).

    \b
    Examples:
      sxctl cron add nightly --cron "0 2 * * *" --tz Europe/Berlin --payload agent-turn --text "run the nightly audit"
      sxctl cron list
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
    """


for _command in (edit.init, edit.add, edit.update, edit.pause, edit.resume, edit.remove,
                 view.list_, view.show, view.next_,
                 ledger.status, ledger.runs, ledger.validate, ledger.wake,
                 tick.tick, tick.run, engines.export, engines.handoff):
    cron.add_command(_command)

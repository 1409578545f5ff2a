"""`sxctl cron …`: edit, validate and preview a comis scheduler store offline.

The group is defined here; its commands live in one module per banner (edit, view, checks, wake, tick,
engines) and, as the root's groups, are imported only when used: `cron tick` (run every minute)
loads the pass and not the editing code, and `sxctl --help` none of them. No command module
imports this package, so there is no import circle."""

from __future__ import annotations

import importlib

import click

from ..output import Group

#: every command of the group: name -> "module:attribute" (explicit; nothing is scanned)
COMMANDS = {
    "init": "edit:init", "add": "edit:add", "update": "edit:update", "pause": "edit:pause",
    "resume": "edit:resume", "remove": "edit:remove", "list": "view:list_", "show": "view:show",
    "next": "view:next_", "status": "checks:status", "runs": "checks:runs", "validate": "checks:validate",
    "wake": "wake:wake", "tick": "tick:tick_command", "run": "tick:run", "export": "engines:export",
    "handoff": "engines:handoff", "simulate": "simulate:simulate", "defaults": "edit:defaults",
    "budget": "budget:budget", "repair": "repair:repair", "plan": "schedule_file:plan",
    "apply": "schedule_file:apply", "dump": "schedule_file:dump",
}


class CronGroup(Group):
    """The cron group, whose commands load on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


@click.group("cron", cls=CronGroup)
def cron() -> None:
    """Durable scheduled jobs in the comis store (<workspace>/.scheduler/cron-jobs.json).

    \b
    Examples:
      sxctl cron add nightly --cron "0 2 * * *" --tz Europe/Berlin --payload agent-turn --text "run the nightly audit"
      sxctl cron list
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
    """

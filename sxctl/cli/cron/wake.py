"""`sxctl cron wake`: drop a scheduler-wake message into the agent's session now."""

from __future__ import annotations

import click

from ...api import wake_agent
from ..output import Command, emit, in_workspace, reporter, say, settings


@click.command("wake", cls=Command, mutating=True)
@click.option("--target", type=click.Choice(["agent", "monitoring"]), default="agent", show_default=True)
@click.option("--to", "to", metavar="SESSION|live", default="live", show_default=True)
@click.option("--text", default="Scheduler wake: check pending scheduled work.", show_default=True)
def wake(target, to, text) -> None:
    """Wake the agent now: drop a scheduler-wake message (mode auto) into the target session.

    \b
    Example:
      sxctl cron wake --to live
    """
    result = wake_agent(text, target=target, to=to, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"woke {result.session_id} ({result.stem})"))


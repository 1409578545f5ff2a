"""`sxctl config get KEY`: the SCORPIOX configuration value the agent most likely sees."""

from __future__ import annotations

import click

from .output import Group, emit, reporter, say, settings


@click.group("config", cls=Group)
def config() -> None:
    """Read the agent's configuration cascade (read-only).

    \b
    Example:
      sxctl config get SCORPIOX_INBOX
    """


@config.command("get")
@click.argument("key")
def get(key: str) -> None:
    """Print the resolved value of KEY and, with -v or --json, where each tier set it.

    The agent's own environment is invisible to sxctl, so the result is approximate.

    \b
    Example:
      sxctl config get SESSION_RETENTION_DAYS --json
    """
    from ..api import get_config

    s = settings()
    resolved = get_config(key, project=s.project, session=s.session, report=reporter())
    emit(resolved.to_json(), lambda: say(resolved.value))

"""`sxctl config get KEY`: the SCORPIOX configuration value the agent most likely sees."""

from __future__ import annotations

import click

from .output import Group, current_project, emit, reporter, say


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
    from ..project import resolve_config

    report = reporter()
    resolved = resolve_config(key, current_project(), report=report)
    for link in resolved.chain:
        report.detail(f"{key}={link['value']} from {link['source']}")

    if resolved.value is None:  # a lookup that finds nothing: exit 3, as for a stem or a job
        from ..errors import NotFoundError

        raise NotFoundError(f"{key} is not set in any tier", code="key_not_set")
    value = resolved.value
    emit(resolved.to_json(), lambda: say(value))



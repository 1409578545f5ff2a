"""`sxctl config get KEY`: the SCORPIOX configuration value the agent most likely sees."""

from __future__ import annotations

import click

from .output import current_project, emit, global_options, reporter, say


@click.group("config")
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

    def human() -> None:
        say(resolved.value if resolved.value is not None else "")

    if resolved.value is None:
        report.note(f"{key} is not set in any tier")
    emit(resolved.to_json(), human)


for _command in (config, get):
    global_options(_command)

"""Shell completion of the names a user types: session ids, cron job names, pending stems, timer
slots and IANA zones. Each runs on a keypress and asks the API, which applies the same rules as
the commands (the project, session and workspace found as they find them; a slot is active as
`callbacks list` says), and gives up quietly: a completion never fails.

The global options (`--project`, `--session`, `--workspace`) are read from the invocation's
settings, which their callbacks fill while click parses the command line for completion, wherever
on the line they were given."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from zoneinfo import available_timezones

import click

from .settings import settings
from .text import printable


def _matching(names: Iterable[str], incomplete: str) -> list[str]:
    """The names that start with `incomplete`; a name that `printable` would escape is never offered
    (a line break would forge a completion, an escape sequence would reach the terminal)."""
    return sorted(name for name in names if name.startswith(incomplete) and printable(name) == name)


def _quietly(produce: Callable[[click.Context, str], list[str]]):
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        try:
            return produce(ctx, incomplete)
        except Exception:  # noqa: BLE001 - a completion never fails
            return []

    return complete


@_quietly
def sessions(ctx: click.Context, incomplete: str) -> list[str]:
    from ..api.sessions import session_names  # on a keypress: only the API part this completion asks

    return _matching(session_names(project=settings(ctx).project), incomplete)


@_quietly
def stems(ctx: click.Context, incomplete: str) -> list[str]:
    from ..api.inbox import pending_stems  # on a keypress: only the API part this completion asks

    given = settings(ctx)
    return _matching(pending_stems(session=given.session, project=given.project), incomplete)


@_quietly
def slots(ctx: click.Context, incomplete: str) -> list[str]:
    from ..api.callbacks import active_slot_ids  # on a keypress: only the API part this completion asks

    given = settings(ctx)
    return _matching((str(i) for i in active_slot_ids(session=given.session, project=given.project)), incomplete)


@_quietly
def jobs(ctx: click.Context, incomplete: str) -> list[str]:
    from ..api.job_views import job_names  # on a keypress: only the API part this completion asks

    given = settings(ctx)
    return _matching(job_names(workspace=given.workspace, project=given.project, session=given.session),
                     incomplete)


@_quietly
def zones(ctx: click.Context, incomplete: str) -> list[str]:
    lowered = incomplete.lower()
    return sorted(zone for zone in available_timezones() | {"local"} if zone.lower().startswith(lowered))

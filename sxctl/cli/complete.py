"""Shell completion of the names a user types: session ids, cron job names, pending stems, timer
slots and IANA zones. Each runs on a keypress, so it reads names only (no validation, no rich, no
croniter) and gives up quietly: a completion never fails."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import click


def _project(ctx: click.Context) -> Path | None:
    from ..project import find_project

    given = ctx.find_root().params.get("project") if ctx else None
    try:
        return find_project(given)
    except Exception:  # noqa: BLE001 - a completion never fails
        return None


def _matching(names, incomplete: str) -> list[str]:
    """The names that start with `incomplete`; a name that `printable` would escape is never offered
    (a line break would forge a completion, an escape sequence would reach the terminal)."""
    from .output import printable

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
    project = _project(ctx)
    folder = project / ".scorpiox" / "sessions" if project else None
    return _matching(os.listdir(folder), incomplete) if folder else []


def _session_dir(ctx: click.Context) -> Path | None:
    from ..project import select_session

    project = _project(ctx)
    if project is None:
        return None
    return select_session(project, os.environ.get("SXCTL_SESSION") or None).dir


@_quietly
def pending_stems(ctx: click.Context, incomplete: str) -> list[str]:
    folder = _session_dir(ctx)
    names = os.listdir(folder / "inbox") if folder else []
    return _matching((n[:-5] for n in names if n.endswith(".json") and not n.startswith(".")), incomplete)


@_quietly
def timer_slots(ctx: click.Context, incomplete: str) -> list[str]:
    folder = _session_dir(ctx)
    doc = json.loads((folder / "callbacks.json").read_bytes()) if folder else {}
    active = [str(s["id"]) for s in doc.get("slots", []) if isinstance(s, dict) and s.get("active")]
    return _matching(active, incomplete)


@_quietly
def job_names(ctx: click.Context, incomplete: str) -> list[str]:
    root = os.environ.get("SXCTL_WORKSPACE") or _project(ctx)
    store = json.loads((Path(root) / ".scheduler" / "cron-jobs.json").read_bytes()) if root else {}
    return _matching((job["name"] for job in store.get("jobs", []) if isinstance(job, dict)), incomplete)


@_quietly
def zones(ctx: click.Context, incomplete: str) -> list[str]:
    from zoneinfo import available_timezones

    lowered = incomplete.lower()
    return sorted(zone for zone in available_timezones() | {"local"} if zone.lower().startswith(lowered))

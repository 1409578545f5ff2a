"""The workspace's own settings in sxctl's policy file (format 3): `cron defaults` (what every
pass of the workspace uses unless its flags say otherwise) and maintenance windows (`cron pause
--until`, for `api.jobs.pause_job`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.policy.keys import MAX_CATCHUP
from ..cron.policy.maintenance import new_window, window_text
from ..cron.store.file import find_job
from ..cron.store.transaction import mutate_store
from ..errors import UsageError
from ..record import record
from ..report import Reporter
from .scope import find_workspace

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace


@record
class WorkspaceDefaults:
    """`cron defaults`: the workspace's defaults as they are now (`maxCatchup`: None when unset)."""

    workspace: Workspace
    defaults: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root),
                "defaults": {"maxCatchup": self.defaults.get("maxCatchup")}}


def workspace_defaults(*, max_catchup: int | None = None, workspace=None, project=None, session: str | None = None,
                       lock_wait: float = 10.0, clock: Clock = SYSTEM_CLOCK,
                       report: Reporter | None = None) -> WorkspaceDefaults:
    """The workspace's defaults; with `max_catchup` N, first set the catch-up budget of every
    pass that does not give `--max-catchup` (0 removes it), under the store lock."""
    ws = find_workspace(workspace, project=project, session=session)
    if max_catchup is None:
        return WorkspaceDefaults(ws, read_policy(ws).get("defaults", {}))
    if not 0 <= max_catchup <= MAX_CATCHUP:
        raise UsageError(f"invalid --max-catchup {max_catchup}: 0 (no budget) to {MAX_CATCHUP}")
    now: dict[str, Any] = {}

    def change(policy: dict[str, Any], store: dict[str, Any], now_ms: int) -> None:
        defaults = {**policy.get("defaults", {}), "maxCatchup": max_catchup}
        if not max_catchup:
            defaults.pop("maxCatchup")
        policy["defaults"] = defaults  # an empty one is not written
        now.update(defaults)

    mutate_store(ws, lambda doc, now_ms: None, clock=clock, report=report, lock_wait_s=lock_wait,
                 policy_change=change)
    return WorkspaceDefaults(ws, now)


def window_change(ws: Workspace, name: str | None, *, paused: bool, until: str | None, reason: str | None,
                  lock_wait: float, clock: Clock, report: Reporter | None) -> dict[str, Any]:
    """`cron pause [NAME | --all] --until TIME --reason TEXT` opens a maintenance window (the
    jobs stay scheduled: they resume by themselves at its end), `cron resume --all` ends the
    workspace's; comis's `{jobName, updated, state}`-like outcome with the `maintenance` window
    (None once ended)."""
    if paused and until is None:
        raise UsageError("--all and --reason need --until TIME: a maintenance window ends by itself" if name is None
                         else f"--reason needs --until TIME (a maintenance window for {name}, which ends by itself); "
                         f"without both, `cron pause {name}` pauses it until `cron resume {name}`")
    if not paused and (until is not None or reason is not None):
        raise UsageError("cron resume takes no --until or --reason")
    outcome: dict[str, Any] = {"jobName": name, "all": name is None, "updated": True}

    def change(policy: dict[str, Any], store: dict[str, Any], now: int) -> None:
        window = new_window(until, reason, now) if until is not None else None
        if name is None:
            holder = policy
        else:
            job = find_job(store, name)
            holder = policy["jobs"].setdefault(job["id"], {})
        earlier = holder.get("maintenance")
        if window is None:
            holder.pop("maintenance", None)
        else:
            holder["maintenance"] = window
            if earlier and earlier["fromMs"] <= now < earlier["untilMs"] and report is not None:
                report.note(f"this window replaces the open one ({window_text(earlier)})")
        outcome["maintenance"] = window

    mutate_store(ws, lambda doc, now: None, clock=clock, report=report, lock_wait_s=lock_wait, policy_change=change)
    return outcome

"""The workspace's own settings in sxctl's policy file (format 3): `cron defaults` (what every
pass of the workspace uses unless its flags say otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy import read_policy
from ..cron.policy_keys import MAX_CATCHUP
from ..cron.transaction import mutate_store
from ..errors import UsageError
from ..record import record
from ..report import Reporter
from .scope import find_workspace

if TYPE_CHECKING:
    from ..cron.workspace import Workspace


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

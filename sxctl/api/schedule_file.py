"""Jobs as code (sxctl.cron.schedule_file): `cron plan` (what an apply of the schedule file would
change, written nowhere), `cron apply` (all of it in one store transaction, or none), `cron dump`
(today's jobs as a schedule file), and the drift `status` and `doctor` report."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import policy_bytes, read_policy
from ..cron.schedule_file.declared import shown as value_text  # noqa: F401 - how `cron plan` prints a value
from ..cron.schedule_file.drift import Drift, drift_of
from ..cron.schedule_file.plan import Plan, carry_out, plan_of, remove_pruned
from ..cron.schedule_file.read import DEFAULT_NAME, read_schedule_file
from ..cron.store.file import default_agent_id
from ..cron.store.schema import validate_store
from ..cron.store.schema_kit import SchemaError, with_job
from ..cron.store.transaction import mutate_store, refuse_clock_behind
from ..errors import ConflictError, NotFoundError, UsageError
from ..record import Factory, record
from ..report import Reporter
from .jobs import store_or_empty
from .scope import find_workspace, reporter

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace


@record
class SchedulePlan:
    """`cron plan` / `cron apply`: the plan (what changes, or changed when `applied`), the drift
    from the last apply, and the warnings comis's rules gave."""

    workspace: Workspace
    file: Path
    plan: Plan
    drift: Drift
    applied: bool = False
    warnings: list[str] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "file": str(self.file),
                "pending": self.plan.pending, "applied": self.applied, "counts": self.plan.counts(),
                "jobs": [step.to_json() for step in self.plan.steps],
                "workspaceChanges": {key: {"from": old, "to": new} for key, (old, new) in self.plan.workspace.items()},
                "drift": self.drift.to_json(), **({"warnings": self.warnings} if self.warnings else {})}


def schedule_file_path(ws: Workspace, file: str | os.PathLike | None) -> Path:
    """The schedule file: `file`, else `sxctl.toml` in the workspace folder."""
    return Path(file) if file is not None else ws.root / DEFAULT_NAME


def _label(ws: Workspace, path: Path) -> str:
    """The file as the applied record names it: relative to the workspace when it is inside."""
    real, root = os.path.realpath(path), os.path.realpath(ws.root)
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else real


def plan_schedule(file: str | os.PathLike | None = None, *, prune: bool = False, workspace=None, project=None,
                  session: str | None = None, agent: str | None = None, max_jobs: int = 100,
                  environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK,
                  report: Reporter | None = None, warn_all: bool = True) -> SchedulePlan:
    """What `apply_schedule` would change, found by carrying it out on copies of the store and the
    policy file (every error apply would meet, met here; nothing written). What the file leaves
    as it is here (an unset ping URL variable) and one-shots it does not add (their time has
    passed) are warned of on `report`, and with `warn_all` what apply would warn of (a target
    project without .scorpiox/) too."""
    ws = find_workspace(workspace, project=project, session=session)
    path = schedule_file_path(ws, file)
    default_project = str(ws.root)  # a job of the file without a `to-project` sends to the workspace's own
    now = clock.now_ms()
    schedule = read_schedule_file(path, environ=environ, now_ms=now, workspace=ws.root)
    store = store_or_empty(ws)
    policy = read_policy(ws)
    if os.path.lexists(ws.scheduler):  # what apply checks first, plan checks too
        ws.refuse_symlinks()
        refuse_clock_behind(ws, store, clock)
    plan = plan_of(schedule, store, policy, ws.root, prune=prune, now_ms=now, file_label=_label(ws, path))
    trial_store = {"formatVersion": 1, "agentSchedulerSeed": "x", **copy.deepcopy(store)}
    trial_policy = copy.deepcopy(policy)
    warnings = carry_out(plan, trial_store, trial_policy, workspace=ws.root, default_project=default_project,
                         agent_id=default_agent_id(store, agent, environ), max_jobs=max_jobs, now_ms=now,
                         report=Reporter(), file_label=_label(ws, path))
    removing = {step.job_id for step in plan.steps if step.action == "remove" and step.job_id}
    remove_pruned(trial_store, trial_policy)
    try:
        validate_store(trial_store)
    except SchemaError as error:  # a value beyond comis's bounds: what the write would refuse
        raise UsageError(with_job(f"{path}: invalid value for {error.path}: {error.rule}", None)) from None
    policy_bytes(trial_policy, trial_store, removing, ws.policy)  # past its bounds or its size: as the write
    said = [*schedule.notes, *(f"jobs.{step.name}: its time has passed: not added (a one-shot runs once)"
                               for step in plan.steps if step.action == "passed")]
    for warning in [*said, *(warnings if warn_all else [])]:
        reporter(report).warn(warning)
    return SchedulePlan(ws, path, plan, drift_of(store, policy, ws.root), warnings=[*said, *warnings])


def apply_schedule(file: str | os.PathLike | None = None, *, prune: bool = False, dry_run: bool = False,
                   workspace=None, project=None, session: str | None = None, agent: str | None = None,
                   max_jobs: int = 100, lock_wait: float = 10.0, environ: Mapping[str, str] = os.environ,
                   clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> SchedulePlan:
    """Make the store and the policy file match the schedule file in one transaction (the plan
    made again under the store lock, so a pass or an edit in between is not lost); nothing is
    written when nothing would change. `dry_run`: the plan only."""
    def planning() -> SchedulePlan:
        return plan_schedule(file, prune=prune, workspace=workspace, project=project, session=session, agent=agent,
                             max_jobs=max_jobs, environ=environ, clock=clock, report=report,
                             warn_all=dry_run)  # an apply warns of them once, when it has made the change

    if dry_run:
        return planning()
    try:
        planned = planning()
    except ConflictError:  # met again under the lock, after the checks every edit makes first (a clock behind)
        pass
    else:
        if not planned.plan.pending:
            return planned
    ws = find_workspace(workspace, project=project, session=session)
    path = schedule_file_path(ws, file)
    default_project = str(ws.root)
    said: dict[str, Any] = {}

    def change(store: dict[str, Any], now: int) -> None:
        policy = read_policy(ws)  # under the lock, as the transaction's own read
        schedule = read_schedule_file(path, environ=environ, now_ms=now, workspace=ws.root)
        plan = plan_of(schedule, store, policy, ws.root, prune=prune, now_ms=now, file_label=_label(ws, path))
        said["warnings"] = carry_out(plan, store, policy, workspace=ws.root, default_project=default_project,
                                     agent_id=default_agent_id(store, agent, environ), max_jobs=max_jobs,
                                     now_ms=now, report=reporter(report), file_label=_label(ws, path))
        removing.update(step.job_id for step in plan.steps if step.action == "remove" and step.job_id)
        remove_pruned(store, policy)
        said["plan"], said["policy"] = plan, policy

    def policy_change(policy: dict[str, Any], store: dict[str, Any], now: int) -> None:
        policy.clear()
        policy.update(said["policy"])

    removing: set[str] = set()  # kept in the policy file written first: see `carry_out`
    mutate_store(ws, change, clock=clock, report=report, create=True, lock_wait_s=lock_wait,
                 policy_change=policy_change, removing=removing)
    for warning in said["warnings"]:
        reporter(report).warn(warning)
    return SchedulePlan(ws, path, said["plan"], drift_of(store_or_empty(ws), read_policy(ws), ws.root), applied=True,
                        warnings=said["warnings"])


@record
class ScheduleDump:
    """`cron dump`: the schedule file's text, the jobs it leaves out (and why), and the
    environment variables it names for ping URLs (their values are secrets: never printed)."""

    workspace: Workspace
    text: str
    left_out: list[str]
    variables: list[str]
    output: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "file": str(self.output) if self.output else None,
                "text": self.text, "leftOut": self.left_out, "pingVariables": self.variables}


def dump_schedule(output: str | os.PathLike | None = None, *, workspace=None, project=None,
                  session: str | None = None) -> ScheduleDump:
    """Today's jobs as a schedule file (written atomically to `output`, else returned): what
    `apply_schedule` reads back into the same jobs, target projects relative to the file's folder."""
    from ..cron.schedule_file.write import dump_text  # only `cron dump` writes TOML
    from ..engines.outside import refuse_owned_place, replace_outside_file

    ws = find_workspace(workspace, project=project, session=session)
    base = Path(os.path.realpath(Path(output).parent)) if output is not None else ws.root
    header = (f"sxctl schedule file: the jobs of {ws.root} (`sxctl cron dump`).\n"
              "`sxctl cron plan` shows what `sxctl cron apply` would change; `sxctl cron apply` makes the store match.")
    text, left_out, pings = dump_text(store_or_empty(ws), read_policy(ws), ws.root, base=base, header=header)
    if output is not None:  # never one of the scheduler's or the agent's files, a link, a FIFO or a device
        if not os.fspath(output):
            raise UsageError("-o needs a file name")
        refuse_owned_place(output, "the schedule file", "write it beside them (sxctl.toml in the workspace folder)",
                           owned=(ws.scheduler, ws.root / ".scorpiox"))
        if not os.path.isdir(os.path.dirname(os.path.abspath(output))):
            raise NotFoundError(f"no folder {os.path.dirname(os.path.abspath(output))} for -o {output}")
        replace_outside_file(Path(output), text.encode("utf-8"), new_mode=0o644)
    return ScheduleDump(ws, text, left_out, sorted(variable for variable, url in pings.items()
                                                   if os.environ.get(variable) != url),
                        Path(output) if output is not None else None)


def schedule_drift(ws: Workspace) -> Drift:
    """The drift of the workspace's store from its last `cron apply` (`status`, `doctor`)."""
    return drift_of(store_or_empty(ws), read_policy(ws), ws.root)

"""Where a job's messages go: the one rule for how a target project is written into the comis
store and how it is read back (docs/protocol-amendments.md, "Job targets").

A target project (`channelInstanceId` of a `scorpiox-inbox` endpoint) is stored relative to the
workspace that holds the store — `.` for the workspace's own project, `sub/app` for a project
below it — so a store keeps working when the workspace is copied, moved or mounted elsewhere (a
container). A project outside the workspace cannot be named relative to it: it is stored as an
absolute path, as every target was before this rule; such targets (older stores hold them) are
read and honoured as they are. Every reader — dispatch, admission, the receipts, the views and
`doctor` — resolves a target through `run_target_project`, against the workspace, at use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import SxctlError
from ...project.layout import SCORPIOX_DIR
from .file import read_store
from .workspace import Workspace

#: the channel type of sxctl's own endpoints: a SCORPIOX session inbox of a project folder
INBOX_CHANNEL = "scorpiox-inbox"


def stored_project(project: str | os.PathLike[str], workspace: Path) -> str:
    """The `channelInstanceId` written for `project`: `.` for the workspace itself, a relative
    path (`/`-separated, no `..`) for a project below it, the absolute canonical path for one
    outside it (it cannot be relative to the workspace)."""
    real = Path(os.path.realpath(project))
    root = Path(os.path.realpath(workspace))
    if real == root:
        return "."
    try:
        return real.relative_to(root).as_posix()
    except ValueError:
        return str(real)


@lru_cache(maxsize=1024)
def resolve_project(stored: str, workspace: Path) -> Path:
    """The folder a stored `channelInstanceId` names: an absolute path as it is (older stores),
    a relative one joined to the workspace. Lexical (`..` removed by name, nothing looked up), so
    it never fails and names the same folder for every reader (cached: `cron list` of 10,000
    jobs asks for the same few)."""
    return Path(os.path.normpath(os.path.join(workspace, stored)))


def endpoint_of(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """The job's SCORPIOX inbox endpoint, or None (no target of its own, or another channel)."""
    target = (job or {}).get("deliveryTarget")
    if target is None or target["destinationEndpoint"]["channelType"] != INBOX_CHANNEL:
        return None
    endpoint: dict[str, Any] = target["destinationEndpoint"]
    return endpoint


def run_target_project(job: dict[str, Any] | None, default_project: Path, *, workspace: Path) -> Path:
    """THE rule for the project whose sessions a job's messages go to: its own target resolved
    against `workspace` (the folder holding the store), else `default_project` (the pass's
    project, for jobs without a target of their own)."""
    endpoint = endpoint_of(job)
    if endpoint is None:
        return default_project
    return resolve_project(endpoint["channelInstanceId"], workspace)


def holds_project(folder: Path) -> bool:
    """Whether `folder` is a project (holds `.scorpiox/`): the condition dispatch needs. False for
    a path no file system can hold (a NUL, a name too long) as for a missing one."""
    return os.path.isdir(os.path.join(folder, SCORPIOX_DIR))


def linked_through(stored: str, resolved: Path, workspace: Path) -> Path | None:
    """The symbolic link on the way from the workspace to a relative target, or None. A target
    stored relative to the workspace must be a folder below it: a link there (`lnk` ->
    /another/project, from a cloned repository) would send into a project the store never
    named. Absolute targets name their folder as the user gave it and are judged as such."""
    if os.path.isabs(stored) or not inside(resolved, workspace):
        return None
    current = workspace
    for part in resolved.relative_to(workspace).parts:
        current = current / part
        try:
            if os.path.islink(current):
                return current
        except ValueError:  # a NUL: no file system holds it, nor a link
            return None
    return None


def inside(path: Path, workspace: Path) -> bool:
    return path == workspace or workspace in path.parents


# --- doctor's view of the targets ------------------------------------------------------------------

@dataclass(frozen=True)
class TargetProblem:
    """One job whose target will not survive, or does not resolve. `kind`: `missing` (resolves to
    no project: every run fails `precondition`), `copied` (an absolute target naming the project
    this workspace was copied from: runs go into that project's agent), `absolute` (an absolute
    target inside the workspace, written by an older sxctl: a copy, a move or a mount breaks it)
    `outside` (a project outside the workspace: it stays where it is when the workspace
    moves), `linked` (a relative target through a symbolic link: refused at dispatch) or `link`
    (a project whose `.scorpiox` is a symbolic link: refused at dispatch).
    `suggestion`: the folder `cron update NAME --to-project` should name, when known."""

    kind: str
    job: dict[str, Any]
    stored: str
    resolved: Path
    suggestion: Path | None


def target_problems(store: dict[str, Any], workspace: Path) -> list[TargetProblem]:
    """The targets of the store's jobs that can still run (not finished one-shots) and that
    `doctor` reports, in store order."""
    problems: list[TargetProblem] = []
    seeds: dict[Path, str | None] = {}
    for job in store["jobs"]:
        endpoint = endpoint_of(job)
        if endpoint is None or job["lifecycle"]["status"] == "one_shot_terminal":
            continue
        stored = endpoint["channelInstanceId"]
        resolved = resolve_project(stored, workspace)
        absolute = os.path.isabs(stored)
        if linked_through(stored, resolved, workspace) is not None:
            problems.append(TargetProblem("linked", job, stored, resolved, None))
        elif not holds_project(resolved):
            problems.append(TargetProblem("missing", job, stored, resolved, _relocated(stored, workspace)))
        elif os.path.islink(os.path.join(resolved, SCORPIOX_DIR)):  # sxctl never writes through one: every run fails
            problems.append(TargetProblem("link", job, stored, resolved, None))
        elif absolute and inside(resolved, workspace):
            problems.append(TargetProblem("absolute", job, stored, resolved, resolved))
        elif not inside(resolved, workspace):
            if resolved not in seeds:
                seeds[resolved] = _store_seed(resolved)
            if seeds[resolved] == store["agentSchedulerSeed"]:
                problems.append(TargetProblem("copied", job, stored, resolved,
                                              workspace if holds_project(workspace) else None))
            else:
                problems.append(TargetProblem("outside", job, stored, resolved, None))
    return problems


def _relocated(stored: str, workspace: Path) -> Path | None:
    """Where a target that no longer resolves most likely is now: the same trailing folders
    under the workspace (`/old/home/app/sub` -> `<workspace>/sub`), else, for an absolute
    target, the workspace's own project (the workspace was moved, copied or mounted elsewhere)."""
    if "\0" in stored:
        return None
    parts = [part for part in Path(stored).parts if part not in ("/", ".", "..")]
    for count in range(1, len(parts)):
        candidate = workspace.joinpath(*parts[-count:])
        if holds_project(candidate):
            return candidate
    if os.path.isabs(stored) and holds_project(workspace):
        return workspace
    return None


def _store_seed(project: Path) -> str | None:
    """The `agentSchedulerSeed` of the store in `project`'s own `.scheduler/`, if it has a valid
    one: a copied workspace carries its origin's seed."""
    try:
        found = read_store(Workspace(project))
    except (SxctlError, OSError):
        return None
    return found["agentSchedulerSeed"] if found is not None else None


def agent_target(job: dict[str, Any], project: Path, to: str, *, workspace: Path) -> tuple[Path, str] | None:
    """The project and conversation (`live` or a session id) a job's message goes to, or None
    for a job that sends to no agent session (the guards do not apply to it)."""
    if job["payload"]["kind"] not in ("agent_turn", "heartbeat_event"):
        return None
    target = job.get("deliveryTarget")
    if target is None:
        conversation = to
    elif target["destinationEndpoint"]["channelType"] == INBOX_CHANNEL:
        conversation = target["destinationEndpoint"]["conversationId"]
    else:
        return None
    return run_target_project(job, project, workspace=workspace), conversation

"""The overlap policy (`--overlap skip|queue|replace`): what a due occurrence does while the job's
previous message is still unread. `queue` (the default) sends it anyway; `skip` records the
occurrence as skipped (reason `overlap`, cron/fate.py); `replace` retracts the unread message with
the inbox's own retract (one rename, race-free against the agent: a message the agent took
meanwhile counts as read) and sends the new one, the run's outcome saying which (`replaced`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import SxctlError, TooLateError
from ..project import ProjectLayout, as_session, session_info
from .ledger import Group, Ledger
from .receipts import consumption, execution_dispatch, names_a_message
from .targets import run_target_project


def unread_previous(job: dict[str, Any], groups: list[Group], *, project: Path, clock: Clock, workspace: Path,
                    sessions: dict[Path, list] | None = None) -> dict[str, Any] | None:
    """The job's newest inbox message (`groups`: its executions in the ledger), when it is still
    unread: `{executionId, sessionId, stem}` (where it is now, after an `inbox forward`); None when
    it was read, retracted or lost, or the job sent none."""
    where = run_target_project(job, project, workspace=workspace)
    started = [g for g in groups if g.start is not None]
    for group in sorted(started, key=lambda g: g.start["startedAtMs"], reverse=True):  # type: ignore[index]
        outcome = group.terminal["outcome"] if group.terminal is not None else None
        dispatch = execution_dispatch(group.start, outcome, job, project, clock, sessions, workspace=workspace)
        if dispatch is None or dispatch.stem is None or dispatch.session_id is None:
            continue  # sent no message: neither read nor unread
        if not names_a_message(dispatch.session_id, dispatch.stem):
            return None  # a ledger row naming something else is never retracted
        receipt = consumption(where, dispatch.session_id, dispatch.stem, clock)
        if receipt["state"] != "pending":
            return None
        moved = receipt.get("forwardedTo") or {"session": dispatch.session_id, "stem": dispatch.stem}
        if not names_a_message(moved["session"], moved["stem"]):
            return None
        return {"executionId": group.start["executionId"], "sessionId": moved["session"],  # type: ignore[index]
                "stem": moved["stem"]}
    return None


def retract_previous(job: dict[str, Any], previous: dict[str, Any], *, project: Path, clock: Clock,
                     workspace: Path) -> dict[str, Any]:
    """Retract the job's unread previous message (`unread_previous`) for `--overlap replace`:
    `previous` with `state` `retracted`, `read` (the agent took it first: the rename is the commit
    point of both) or `lost` (gone meanwhile). The new message is sent in every case."""
    from ..inbox.manage import retract  # only a replacing pass needs it
    where = run_target_project(job, project, workspace=workspace)
    folder = ProjectLayout(where).sessions / previous["sessionId"]
    try:
        retract(as_session(session_info(folder, clock), where, "flag"), previous["stem"])
        state = "retracted"
    except TooLateError:
        state = "read"
    except (SxctlError, OSError):
        state = "lost"
    return {**previous, "state": state}


def replace_previous(job: dict[str, Any], entry: dict[str, Any], ledger: Ledger, *, project: Path, clock: Clock,
                     workspace: Path) -> dict[str, Any] | None:
    """What a scheduled run of a `--overlap replace` job does before it sends: its unread previous
    message retracted (`retract_previous`); None when the job does not replace or nothing is unread."""
    if entry.get("overlap") != "replace" or job["schedule"]["kind"] == "at":
        return None
    groups = [g for g in ledger.groups.values() if g.start is not None and g.start["jobId"] == job["id"]]
    previous = unread_previous(job, groups, project=project, clock=clock, workspace=workspace)
    if previous is None:
        return None
    return retract_previous(job, previous, project=project, clock=clock, workspace=workspace)


def record_replaced(replaced: dict[str, Any] | None, entry: dict[str, Any], outcome: dict[str, Any]) -> None:
    """What a run replaced (`replace_previous`), in its line of the pass's report (`entry`) and in
    its ledger outcome (an `inbox_dispatch` one: cron-ledger.md §3)."""
    if replaced is None:
        return
    entry["replaced"] = replaced
    if outcome["kind"] == "inbox_dispatch":
        outcome["replaced"] = replaced


def mark_replaced(runs: list[dict[str, Any]]) -> None:
    """The receipts of runs whose message a later `--overlap replace` run retracted say so
    (`consumption.replacedBy`: that run's execution id), as far as `runs` hold both."""
    by = {run["outcome"]["replaced"]["executionId"]: run["executionId"] for run in runs
          if isinstance(run.get("outcome"), dict) and isinstance(run["outcome"].get("replaced"), dict)
          and run["outcome"]["replaced"].get("state") == "retracted"}
    for run in runs:
        receipt = run.get("consumption")
        if run["executionId"] in by and isinstance(receipt, dict) and receipt["state"] == "retracted":
            receipt["replacedBy"] = by[run["executionId"]]

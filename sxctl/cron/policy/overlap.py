"""The overlap policy (`--overlap skip|queue|replace`): what a due occurrence does while the job's
previous message is still unread. `queue` (the default) sends it anyway; `skip` records the
occurrence as skipped (reason `overlap`, cron/timeline/fate.py); `replace` sends the new one, then retracts
the job's unread ones with the inbox's own retract (one rename, race-free against the agent: a
message the agent took meanwhile counts as read), the run's outcome saying which (`replaced`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...clock import Clock
from ...errors import SxctlError, TooLateError
from ...project import ProjectLayout, as_session, session_info
from ..run.ledger import Group, Ledger
from ..run.receipts import Dispatch, consumption, execution_dispatch, message_by_key
from ..store.targets import run_target_project

#: the most of a job's past messages a look for unread ones judges (a job nobody reads for months)
UNREAD_WALK = 100


def unread_messages(job: dict[str, Any], groups: list[Group], *, project: Path, clock: Clock, workspace: Path,
                    sessions: dict[Path, list] | None = None, exclude: str | None = None) -> list[dict[str, Any]]:
    """The job's messages still unread, newest first (`groups`: its executions in the ledger;
    `exclude`: the execution sending now), each `{executionId, sessionId, stem}` where it is now
    (after an `inbox forward`). The look stops at the first one read (the agent reads in name
    order). A message counts only where the inbox's own key record (the execution id) places it:
    a ledger row edited by hand never names someone else's message."""
    where = run_target_project(job, project, workspace=workspace)
    started = [g for g in groups if g.start is not None and g.start["executionId"] != exclude]
    found = []
    for group in sorted(started, key=lambda g: g.start["startedAtMs"], reverse=True)[:UNREAD_WALK]:  # type: ignore[index]
        outcome = group.terminal["outcome"] if group.terminal is not None else None
        dispatch = execution_dispatch(group.start, outcome, job, project, clock, sessions, workspace=workspace)
        if dispatch is None or dispatch.stem is None or dispatch.session_id is None:
            continue  # sent no message: neither read nor unread
        receipt = consumption(where, dispatch.session_id, dispatch.stem, clock)
        if receipt["state"] == "read":
            break
        moved = receipt.get("forwardedTo") or {"session": dispatch.session_id, "stem": dispatch.stem}
        execution_id = group.start["executionId"]  # type: ignore[index]
        if receipt["state"] == "pending" \
                and message_by_key(where, execution_id, clock, sessions) == Dispatch(moved["session"], moved["stem"]):
            found.append({"executionId": execution_id, "sessionId": moved["session"], "stem": moved["stem"]})
    return found


def unread_previous(job: dict[str, Any], groups: list[Group], *, project: Path, clock: Clock, workspace: Path,
                    sessions: dict[Path, list] | None = None) -> dict[str, Any] | None:
    """The job's newest unread message (`unread_messages`), or None."""
    found = unread_messages(job, groups, project=project, clock=clock, workspace=workspace, sessions=sessions)
    return found[0] if found else None


def retract_previous(job: dict[str, Any], previous: dict[str, Any], *, project: Path, clock: Clock,
                     workspace: Path) -> dict[str, Any]:
    """Retract the job's unread previous message (`unread_previous`) for `--overlap replace`:
    `previous` with `state` `retracted`, `read` (the agent took it first: the rename is the commit
    point of both) or `lost` (gone meanwhile). The new message is sent in every case."""
    from ...inbox.manage import retract  # only a replacing pass needs it
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
                     workspace: Path, sent: str) -> list[dict[str, Any]]:
    """What a scheduled run (execution `sent`) of a `--overlap replace` job does once its message is
    written: every unread message of the job before it retracted (`retract_previous`), newest
    first. Sending first, then retracting, means a pass killed in between leaves one message too
    many (the next replacing run retracts it), never none."""
    if entry.get("overlap") != "replace" or job["schedule"]["kind"] == "at":
        return []
    groups = [g for g in ledger.groups.values() if g.start is not None and g.start["jobId"] == job["id"]]
    return [retract_previous(job, previous, project=project, clock=clock, workspace=workspace)
            for previous in unread_messages(job, groups, project=project, clock=clock, workspace=workspace,
                                            exclude=sent)]


def record_replaced(replaced: list[dict[str, Any]], entry: dict[str, Any], outcome: dict[str, Any]) -> None:
    """What a run replaced (`replace_previous`), in its line of the pass's report (`entry`: the
    newest, and any older ones as `replacedOlder`) and in its ledger outcome (the newest;
    cron-ledger.md §3)."""
    if not replaced:
        return
    entry["replaced"] = outcome["replaced"] = replaced[0]
    if replaced[1:]:
        entry["replacedOlder"] = replaced[1:]


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

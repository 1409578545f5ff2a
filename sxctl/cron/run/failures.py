"""Runs that did not succeed, in words: which statuses are failures, why a run failed (from what
the ledger keeps), the jobs whose last run failed (`status`, `doctor`) and the finished one-shots
whose run failed (`cron list` shows them `failed`, not `done`); and comis's dependency-error
counter, which a settled run moves (`apply_dependency_rule`)."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidDataError
from ..store.workspace import Workspace
from .ledger import Ledger, project_run, scan_ledger

#: a run that ended with one of these statuses did not succeed (`cron run` exits 10, a one-shot is
#: `failed` in `cron list`, `status` and `doctor` name the job)
FAILED_STATUSES = ("failed", "unknown", "timed_out", "cancelled")

_STAGE_REASONS = {
    "executor_precondition": "no live agent or session to send to, or a target folder it may not use",
    "executor_invalid_input": "the message is too large",
    "dispatch_rejected": "the inbox refused the message",
    "start_record_recovery": "the pass that claimed it stopped before it started",
}


def failure_reason(job: dict[str, Any] | None, run: dict[str, Any]) -> str:
    """Why a run (a `project_run` row) did not succeed, in words, from what the ledger keeps:
    `failed precondition: SXCTL_DELIVER_CMD is not set`, `unknown internal: …`."""
    outcome = run.get("outcome") or {}
    head = f"{run['status']} {run.get('errorKind') or ''}".rstrip()
    stage = outcome.get("stage")
    if outcome.get("kind") == "pre_dispatch_failure" and stage == "executor_not_bound":
        delivery = job is not None and job["payload"]["kind"] == "delivery"
        return f"{head}: {'SXCTL_DELIVER_CMD is not set' if delivery else 'its target is not a SCORPIOX inbox'}"
    if outcome.get("kind") == "pre_dispatch_failure" and stage in _STAGE_REASONS:
        return f"{head}: {_STAGE_REASONS[stage]}"
    if outcome.get("kind") == "unsettled":
        return f"{head}: the pass running it stopped; whether it was delivered is not known"
    delivery = outcome.get("delivery")
    delivery_status = delivery.get("status") if isinstance(delivery, dict) else None
    if outcome.get("kind") == "delivery_only" and delivery_status:
        return f"{head}: SXCTL_DELIVER_CMD {delivery_status.replace('_', ' ')}"
    return head


def last_failures(store: dict[str, Any], runs: list[dict[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """The jobs of `store` whose last run in `runs` (`project_run` rows, newest first) failed —
    `unknown` ones are named on their own (`cron runs NAME --evidence`) — each with why and the
    command that shows the run. A run recorded after `now_ms` (a clock that ran ahead, which
    `cron repair --clock` acknowledged) is no job's last run: its time says nothing of its order."""
    jobs = {job["id"]: job for job in store["jobs"]}
    seen: set[str] = set()
    failures = []
    for run in runs:
        job = jobs.get(run["jobId"])
        if job is None or run["jobId"] in seen or (run.get("terminalAtMs") or run["startedAtMs"]) > now_ms:
            continue
        seen.add(run["jobId"])
        if run["status"] in FAILED_STATUSES and run["status"] != "unknown":
            failures.append({"name": job["name"], "jobId": job["id"], "executionId": run["executionId"],
                             "startedAtMs": run["startedAtMs"], "reason": failure_reason(job, run),
                             "command": f"sxctl cron runs {job['name']}"})
    return failures


def failed_one_shots(store: dict[str, Any], ledger: Ledger | None) -> dict[str, dict[str, Any]]:
    """Finished one-shots whose run did not succeed (id -> `{executionId, reason}`): `cron list`
    shows them `failed`, not `done`."""
    failed = {}
    for job in store["jobs"]:
        life = job["lifecycle"]
        group = ledger.groups.get(life["terminalExecutionId"]) if ledger is not None and \
            life["status"] == "one_shot_terminal" else None
        if group is not None and group.start is not None:
            run = project_run(group)
            if run["status"] in FAILED_STATUSES:
                failed[job["id"]] = {"executionId": run["executionId"], "reason": failure_reason(job, run)}
    return failed


def failed_one_shots_of(ws: Workspace, store: dict[str, Any], max_log_bytes: int) -> dict[str, dict[str, Any]]:
    """`failed_one_shots` with the workspace's ledger, the one rule for "a one-shot that failed"
    (`cron list`, `status`): the ledger is read only when there is a finished one-shot, and an
    invalid one (`cron validate` names it) leaves them `done`."""
    if not any(job["lifecycle"]["status"] == "one_shot_terminal" for job in store["jobs"]):
        return {}
    try:
        return failed_one_shots(store, scan_ledger(ws.ledger, max_log_bytes=max_log_bytes))
    except InvalidDataError:
        return {}


def apply_dependency_rule(job: dict[str, Any], outcome: dict[str, Any]) -> None:
    """comis's counter: success -> 0, dependency error -> +1 (pause at the limit), else unchanged.
    Every outcome sxctl writes is neutral; only comis's own execution outcomes count."""
    if outcome["kind"] not in ("agent_turn", "internal_action", "heartbeat_event"):
        return
    life = job["lifecycle"]
    execution: dict[str, Any] = outcome["execution"] if isinstance(outcome.get("execution"), dict) else {}
    if outcome["kind"] == "heartbeat_event" or execution.get("status") == "completed":
        life["consecutiveDependencyErrors"] = 0
    elif execution.get("errorKind") == "dependency":
        life["consecutiveDependencyErrors"] += 1
        limit = job.get("maxConsecutiveDependencyErrors")
        if limit and life["consecutiveDependencyErrors"] >= limit and life["status"] == "scheduled":
            job["lifecycle"] = {**life, "status": "paused", "reason": "dependency_errors"}

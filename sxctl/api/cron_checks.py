"""Cron use cases that check and wake: the workspace's status, a job's runs (with the evidence of
where their messages went), validation of the store, policy file and ledger, and a wake (spec
cron-store.md, cron-ledger.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.policy.overlap import mark_replaced
from ..cron.run import file_checks
from ..cron.run.ledger import recent_runs, run_evidence
from ..cron.run.receipts import describe_consumption, run_consumption  # noqa: F401 - the CLI shows runs with it
from ..cron.spend.ledger import run_tokens
from ..cron.spend.rules import is_guarded
from ..cron.store.file import find_job, refuse_if_daemon_owns, refuse_if_reset_pending
from ..cron.store.targets import holds_project, run_target_project
from ..cron.timeline import views
from ..errors import ErrorCode, InvalidDataError, UsageError
from ..inbox.manage import evidence_for_key
from ..inbox.request import SendRequest
from ..inbox.sending import send
from ..project import list_sessions, resolve_target_session
from ..record import record
from ..report import Reporter
from .jobs import ledger_ceiling, store_or_empty
from .scope import find_workspace, reporter, target_project

if TYPE_CHECKING:
    from ..cron.run.file_checks import Problem
    from ..cron.store.workspace import Workspace

#: a sent run of a guarded job without a spend record: its tokens still count toward its day
NO_RECORD = ("no record of its tokens: the spend history keeps the newest runs, and a pass killed between the "
             "spend file and its history can lose one (its tokens still count toward the day)")

# --- status / runs / validate / wake ---------------------------------------------------------------

@record
class CronStatus:
    """`cron status`: offline evidence about the workspace (cron-store.md §8)."""

    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.document


def cron_status(*, max_log_bytes: int | None = None, workspace=None, project=None, session: str | None = None,
                environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK) -> CronStatus:
    """Files and digests, locks, daemon ownership, claims and problems, read without locking."""
    ws = find_workspace(workspace, project=project, session=session)
    return CronStatus(views.workspace_status(ws, environ, clock, target_project(ws, project, session=session),
                                             ledger_ceiling(max_log_bytes, environ)))


@record
class RunList:
    """`cron runs`: executions newest first, projected as in cron-ledger.md §4, each with its
    receipt (`consumption`: did the agent read what it dispatched?); with a job name, the
    occurrences its policy skipped too."""

    name: str | None
    job_id: str | None
    limit: int
    exact: bool
    runs: list[dict[str, Any]]
    job_names: dict[str, str]
    skipped: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "jobName": self.name, "jobId": self.job_id, "limit": self.limit, "exact": self.exact,
                "runs": self.runs, "skipped": self.skipped}


def job_runs(
    name: str | None = None,
    *,
    limit: int = 20,
    exact: bool = False,
    evidence: bool = False,
    max_log_bytes: int | None = None,
    workspace=None,
    project=None,
    session: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> RunList:
    """The newest `limit` runs of job `name` (all jobs when None); only the tail of a large
    ledger is read (`exact` scans it all). Every inbox-dispatch run carries its `consumption`
    (`read`, `pending`, `retracted` — with `replacedBy` when an `--overlap replace` run retracted
    it —, `lost`). With `evidence`, each `unknown` inbox-dispatch run
    says where its message is now (found through its idempotency key). `tokens`: the tokens
    attributed to a run (an attribution from the agent's counters, not a bill; None with
    `tokensNote` saying why; no key for a run never attributed: no guard and no counters)."""
    ws = find_workspace(workspace, project=project, session=session)
    store = store_or_empty(ws)
    job = find_job(store, name) if name is not None else None
    found = recent_runs(ws.ledger, limit, job_id=job["id"] if job else None,
                        max_log_bytes=ledger_ceiling(max_log_bytes), exact=exact)
    jobs = {j["id"]: j for j in store["jobs"]}
    default_project = target_project(ws, project, session=session)
    attributed = run_tokens(ws.scheduler)  # the tokens of guarded runs (cron/spend/ledger.py)
    policy = read_policy(ws)
    guarded = {job_id for job_id in jobs if is_guarded(policy["jobs"].get(job_id, {}), policy.get("budget"))}
    for run in found:
        receipt = run_consumption(run, jobs.get(run["jobId"]), default_project, clock, workspace=ws.root)
        if receipt is not None:
            run["consumption"] = receipt
        record = attributed.get(run["executionId"])
        if record is not None:  # a run of a guarded job: its tokens, or why it has none
            run["tokens"] = record.get("tokens")
        if record is not None and record["state"] != "attributed":
            run["tokensNote"] = record.get("why") or "not attributed yet: its message is not read with the agent idle"
        if record is None and receipt is not None and run["jobId"] in guarded:
            run["tokens"], run["tokensNote"] = None, NO_RECORD
    mark_replaced(found)  # a message retracted by --overlap replace: which run replaced it
    if evidence:
        _add_evidence(found, jobs, default_project, ws, clock)
    names = {j["id"]: j["name"] for j in store["jobs"]} if name is None else {}
    skipped = policy["jobs"].get(job["id"], {}).get("skips", {}).get("recent", []) if job else []
    return RunList(name, job["id"] if job else None, limit, exact, found, names, list(reversed(skipped)))


def _add_evidence(found: list[dict[str, Any]], jobs: dict[str, dict[str, Any]], default_project, ws: Workspace,
                  clock: Clock) -> None:
    """Where each `unknown` run's message is now, looked for by its key in the project the run
    sent to (`run_target_project`)."""
    sessions: dict[Any, list] = {}
    for run in found:
        if not run_evidence(run):
            continue
        root = run_target_project(jobs.get(run["jobId"]), default_project, workspace=ws.root)
        if not holds_project(root):
            continue
        if root not in sessions:
            sessions[root] = list_sessions(root, clock)
        run["evidence"] = evidence_for_key(root, sessions[root], run["executionId"])


@record
class Validation:
    """`cron validate`: every problem of the store, sxctl's policy file and the ledger, and the
    cross-checks of the store and the ledger."""

    workspace: Workspace
    problems: list[Problem]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace.root), "problems": []}

    def raise_if_invalid(self) -> None:
        """InvalidDataError (exit 5) naming the first problem, carrying them all."""
        if self.problems:
            first = self.problems[0]
            raise InvalidDataError(first.file, f"{len(self.problems)} problem(s); first: {first.message}",
                                   details={"problems": [p.to_json() for p in self.problems]})


def validate_workspace(*, max_log_bytes: int | None = None, workspace=None, project=None,
                       session: str | None = None, clock: Clock = SYSTEM_CLOCK) -> Validation:
    """Check the store, the policy file and the ledger completely; `raise_if_invalid()` turns
    problems into exit 5 (a file the system refuses to read is exit 8)."""
    ws = find_workspace(workspace, project=project, session=session)
    return Validation(ws, file_checks.validate_workspace(ws, clock, ledger_ceiling(max_log_bytes)))


@record
class Wake:
    """`cron wake`: the scheduler-wake message dropped into the target session."""

    stem: str
    session_id: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "status": "accepted", "disposition": "new_occurrence", "correlationId": self.stem,
                "lane": "agent", "retainedReason": None, "stem": self.stem, "session": self.session_id}


def wake_agent(text: str = "Scheduler wake: check pending scheduled work.", *, target: str = "agent",
               to: str = "live", workspace=None, project=None, session: str | None = None,
               environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK,
               report: Reporter | None = None) -> Wake:
    """Wake the agent now: a scheduler-wake message (mode auto) into `to` (a session id or
    `live`). Refused next to a comis daemon that owns the workspace."""
    if target == "monitoring":
        raise UsageError("--target monitoring has no file protocol; only the agent can be woken",
                         code=ErrorCode.UNSUPPORTED)
    ws = find_workspace(workspace, project=project, session=session)
    refuse_if_daemon_owns(ws, environ, reporter(report))
    refuse_if_reset_pending(ws)
    chosen = resolve_target_session(target_project(ws, project, session=session), to, clock=clock)
    result = send(chosen, SendRequest(text, mode="auto", no_wait=True), clock=clock, report=report)
    return Wake(result.stem, chosen.id)


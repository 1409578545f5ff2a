"""Every scheduler pass sweeps message lifetimes (inbox/lifetimes.py): it withdraws the unread
messages whose `--expires` passed, notes read deadlines that passed, and tells the monitors of its
jobs that ping on read (`cron add --ping-on read`) — success when a pass first sees the agent read a
run's message, `/fail` with the reason when its deadline passes or it expires first.

It sweeps the pass's default project and the target of every job that gives its messages a
lifetime. Only the pass whose store holds a run's job pings for it and settles its record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...errors import SxctlError
from ...report import Reporter
from ..store.targets import holds_project, run_target_project
from .pings import Pinger

#: the policy keys that give a job's messages a lifetime
LIFETIME_KEYS = ("expiresMs", "readWithinMs", "pingOn")


def run_lifetime(entry: dict[str, Any], job_id: str, execution_id: str, now_ms: int) -> dict[str, Any] | None:
    """The lifetime of one run's message, from its job's policy `entry` (None: it has none)."""
    if not any(key in entry for key in LIFETIME_KEYS):
        return None
    return {"sent_ms": now_ms,
            "expires_ms": now_ms + entry["expiresMs"] if "expiresMs" in entry else None,
            "read_by_ms": now_ms + entry["readWithinMs"] if "readWithinMs" in entry else None,
            "run": {"jobId": job_id, "executionId": execution_id, "pingOn": entry.get("pingOn", "written")}}


def _one_per_target(store: dict[str, Any]) -> list[dict[str, Any]]:
    """One job per distinct target (a run's message may still wait there after the job changed)."""
    seen: dict[Any, dict[str, Any]] = {}
    for job in store["jobs"]:
        endpoint = ((job.get("deliveryTarget") or {}).get("destinationEndpoint") or {})
        seen.setdefault((endpoint.get("channelType"), endpoint.get("channelInstanceId")), job)
    return list(seen.values())


def sweep_for_pass(store: dict[str, Any], policy: dict[str, Any], groups: Mapping[str, Any], project: Path,
                   workspace: Path, clock: Clock, pinger: Pinger, report: Reporter, *,
                   dry_run: bool) -> list[dict[str, Any]]:
    """What the pass's sweep did, as the rows of `cron tick --json`'s `lifetimes`. `groups`: the
    ledger's runs; a record pings only for a run the ledger started for that job."""
    from ...inbox.expiry import sweep_project
    from ...inbox.manage import evidence_for_key
    from ...project import list_sessions

    names = {job["id"]: job["name"] for job in store["jobs"]}
    projects = {project} | {run_target_project(job, project, workspace=workspace) for job in _one_per_target(store)}
    runs = {eid: group.start["jobId"] for eid, group in groups.items() if group.start is not None}
    oldest = min((group.start["startedAtMs"] for group in groups.values() if group.start is not None), default=None)

    sessions: dict[Path, list[Any]] = {}

    def owns(run: dict[str, Any], record: dict[str, Any], session: Any) -> bool:
        """A run its ledger started for that job (or, trimmed from it since, one of its jobs' sent
        before the oldest run kept), and the record is of the message that run sent, wherever
        `inbox forward` took it: its idempotency key (the execution id) says where it is now."""
        started = runs.get(run["executionId"])
        if started is None:
            if not (run["jobId"] in names and oldest is not None and (record.get("sent_ms") or oldest) < oldest):
                return False
        elif started != run["jobId"]:
            return False
        known = sessions.get(session.project) or list_sessions(session.project, clock)
        where = evidence_for_key(session.project, known, run["executionId"])
        return bool(where["key_record"]) and (where["session"], where["stem"]) == (session.id, record["stem"])

    def ping(run: dict[str, Any], kind: str, reason: str) -> None:
        url = policy["jobs"].get(run["jobId"], {}).get("pingUrl")
        if url:
            pinger.ping(url, kind, run["executionId"], f"{names.get(run['jobId'], run['jobId'])}: {reason}")

    rows: list[dict[str, Any]] = []
    for target in sorted(projects):
        if not holds_project(target):
            continue
        try:
            sessions[target] = list_sessions(target, clock)  # once a pass: the sweep and `owns` read it
            events = sweep_project(target, clock.now_ms(), clock, sessions[target], owns=owns, ping=ping,
                                   dry_run=dry_run)
        except (SxctlError, OSError) as error:  # a lifetime never stops the runs of a pass
            report.warn(f"message lifetimes in {target} were not swept: {getattr(error, 'message', error)}")
            continue
        for event in events:
            if event.event == "refused":
                report.warn(f"message lifetimes of session {event.session} were not swept: {event.why}")
        rows += [{**event.to_json(), "project": str(target)} for event in events if event.event != "refused"]
    return rows

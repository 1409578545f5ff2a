"""Read-only views of a workspace: job states and targets, the `next` timeline and `status`
evidence (the store/ledger checks they share with `validate` and `tick`: cron/run/file_checks.py)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...clock import Clock
from ...errors import InvalidDataError, SxctlError
from ...fsio import read_data_file
from ...timeparse import LATEST_SCHEDULABLE_MS, format_ms, shown_time
from ..policy.file import FILE_CAP, read_policy
from ..policy.listing import describe_job
from ..run.file_checks import check_files, history_problem, settled_cross_check
from ..run.ledger import DEFAULT_MAX_LOG_BYTES
from ..run.pings import mask_url
from ..store.file import STORE_CAP, daemon_locks, find_job
from ..store.targets import INBOX_CHANNEL, run_target_project
from ..store.workspace import Workspace
from .fate import end_mark, next_text
from .previews import job_previews
from .schedule import job_zone_name, next_run, schedule_computable

if TYPE_CHECKING:
    from .fate import Preview

STATE_BY_STATUS = {"scheduled": "scheduled", "one_shot_claimed": "running", "one_shot_terminal": "done"}


def job_state(job: dict[str, Any], policy_entry: dict[str, Any] | None = None) -> str:
    """`scheduled`, `running`, `done`, or `paused:<why>` — comis's reason, or the sxctl limit
    that paused it (`paused:max_unconsumed`, `paused:expired`)."""
    life = job["lifecycle"]
    if life["status"] == "paused":
        paused_by = (policy_entry or {}).get("paused")
        return f"paused:{paused_by['reason'] if paused_by else life['reason']}"
    return STATE_BY_STATUS[life["status"]]


def paused_by_sxctl(store: dict[str, Any], policy_jobs: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs sxctl paused (expired, or at a limit): `{name, reason, atMs, message}` each, for
    `status` and `doctor` alike."""
    return [{"name": job["name"], **policy_jobs[job["id"]]["paused"]} for job in store["jobs"]
            if job["lifecycle"]["status"] == "paused" and policy_jobs.get(job["id"], {}).get("paused")]


def job_kind_label(job: dict[str, Any]) -> str:
    if job["source"] == "built_in":
        return "built-in"
    return {"heartbeat_event": "heartbeat", "delivery": "delivery", "agent_turn": "agent-turn"}[job["payload"]["kind"]]


def job_target(job: dict[str, Any], workspace: Path) -> dict[str, Any] | None:
    """`{project, conversation}` of a job with a target of its own: the project as the pass
    resolves it (`targets.run_target_project`, an absolute path however it is stored)."""
    target = job.get("deliveryTarget")
    if target is None:
        return None
    endpoint = target["destinationEndpoint"]
    project = str(run_target_project(job, workspace, workspace=workspace)) \
        if endpoint["channelType"] == INBOX_CHANNEL else endpoint["channelInstanceId"]
    return {"project": project, "conversation": endpoint["conversationId"]}


def target_label(target: dict[str, Any] | None) -> str:
    """The TARGET cell of `cron list` for a row's `target` (`job_target`)."""
    if target is None:
        return "-"
    if target["conversation"] == "live":
        return f"live@{target['project']}"
    return target["conversation"]


def job_row(job: dict[str, Any], policy: dict[str, Any] | None = None, *, workspace: Path,
            full: bool = False, failure: dict[str, Any] | None = None, preview: Preview | None = None
            ) -> dict[str, Any]:
    """The `cron list`/`show` row: the stored object plus sxctl's state, next run, target (its
    project resolved against `workspace`) and policy (`policy` is the policy file's document). A
    job with no policy entry has `"policy": null` in a listing (every default; 10,000 jobs need
    not repeat them); `full` fills them in. With the job's `preview` (`fate.preview_runs`), the
    next run is the next one the pass will make (None when it expires or pauses first) and
    `next_note` says what waits before it, or why there is none."""
    entry = (policy or {"jobs": {}})["jobs"].get(job["id"], {})
    life = job["lifecycle"]
    row: dict[str, Any] = {
        "job": job, "state": "failed" if failure else job_state(job, entry), "next_run_ms": life.get("nextRunAtMs"),
        "target": job_target(job, workspace), "policy": describe_job(job["id"], entry) if entry or full else None,
        "tz": job_zone_name(job, entry), "next_note": None, "next_mark": None}
    if preview is not None:
        row["next_run_ms"] = preview.runs[0]["at_ms"] if preview.runs else None
        row["next_note"] = next_text(preview)
        hold = preview.runs[0]["fate"].hold if preview.runs else None
        row["waiting"] = hold.to_json() if hold is not None else None  # its next run waits (cron next says so too)
        row["next_mark"] = preview.runs[0]["mark"] if preview.runs else end_mark(preview)
    elif life["status"] == "paused" and entry.get("paused"):  # why, not a run it will not make
        row["next_run_ms"], row["next_note"] = None, entry["paused"]["message"]
    if life["status"] == "paused":
        row["next_mark"] = "paused"  # as `cron next --include-paused` and `next` mark it
    if failure:
        row["failure"] = failure  # a finished one-shot whose run did not succeed: why, and which run
    return row


# --- next ----------------------------------------------------------------------------------------

def local_iso(ms: int, zone) -> str:
    return format_ms(ms, zone=zone)


def series(schedule: dict[str, Any], first_ms: int, count: int, first_dst: bool = False) -> list[tuple[int, bool]]:
    """`count` occurrences starting at `first_ms`, each later one `next(schedule, previous)`,
    none from `LATEST_SCHEDULABLE_MS` on (9999-01-01, past what sxctl can schedule)."""
    out = [(first_ms, first_dst)] if first_ms < LATEST_SCHEDULABLE_MS else []
    while out and len(out) < count:
        found = next_run(schedule, out[-1][0])
        if found is None or found[0] >= LATEST_SCHEDULABLE_MS:
            break
        out.append(found)
    return out


def timeline(store: dict[str, Any], now_ms: int, count: int, zone, *, name: str | None = None,
             include_paused: bool = False, previews: dict[str, Preview] | None = None,
             policy: dict[str, Any] | None = None, after: int | None = None) -> list[dict[str, Any]]:
    """Merged, time-ordered fires of the store's jobs (cron-store.md §10), shown in `zone` (the
    display zone, whatever the job's own). A job in `previews` (id ->
    `fate.preview_runs`) shows only the runs the pass will make, each with the `note` of what it
    skipped before it and whether it is held (`waiting`); a job paused by sxctl says why
    (`note`, from `policy`). `after`: the fires from then on (`--from`; the previews start there too)."""
    fires: list[dict[str, Any]] = []
    for job in store["jobs"]:
        if name is not None and job["name"] != name:
            continue
        life = job["lifecycle"]
        status = life["status"]
        if status == "one_shot_terminal" or not schedule_computable(job["schedule"]):
            continue
        if status == "one_shot_claimed":
            fires.append({**_fire(job, life["scheduledForMs"], zone, now_ms, running=True), "mark": "running"})
            continue
        preview = (previews or {}).get(job["id"])
        if preview is not None:
            for index, run in enumerate(preview.runs):
                fire = _fire(job, run["at_ms"], zone, now_ms, dst=run["dst"],
                             due=index == 0 and run["at_ms"] <= now_ms, overdue=run["mark"] == "overdue")
                hold = run["fate"].hold
                fire.update(note=run["note"], skipped_before=run["skipped"], waiting=hold.to_json() if hold else None,
                            mark=run["mark"])
                fires.append(fire)
            continue
        paused = status == "paused"
        first = (life["nextRunAtMs"], False)
        if after is not None and after > first[0]:
            first = next_run(job["schedule"], after - 1) or first
        occurrences = series(job["schedule"], first[0], count if (not paused or include_paused) else 1, first[1])
        why = ((policy or {"jobs": {}})["jobs"].get(job["id"]) or {}).get("paused")
        for index, (at_ms, dst) in enumerate(occurrences):
            due = index == 0 and at_ms <= now_ms and not paused
            fire = _fire(job, at_ms, zone, now_ms, paused=paused and (index == 0 or include_paused), dst=dst,
                         due=due, overdue=due)
            fire.update(note=why["message"] if why and paused else None, skipped_before=0, waiting=None,
                        mark="paused" if fire["paused"] else None)
            fires.append(fire)
    entries = (policy or {"jobs": {}})["jobs"]
    for fire in fires:  # a job pinned to a host (--host) runs only from that host's passes; --ping-url masked
        entry = entries.get(fire["jobId"]) or {}
        fire["host"] = entry.get("host")
        fire["pingUrl"] = mask_url(entry["pingUrl"]) if entry.get("pingUrl") else None
    fires.sort(key=lambda f: (f["at_ms"], f["name"] or ""))
    return fires[:count]


def _fire(job: dict[str, Any] | None, at_ms: int, zone, now_ms: int, *, paused: bool = False, dst: bool = False,
          due: bool = False, overdue: bool = False, running: bool = False) -> dict[str, Any]:
    """A run of `cron next`: `due` when its time came, `overdue` when the passes missed it (status's rule)."""
    fire: dict[str, Any] = {"jobId": job["id"] if job else None, "name": job["name"] if job else None, "at_ms": at_ms,
                            "at_local": local_iso(at_ms, zone), "due": due, "overdue": overdue, "paused": paused,
                            "dst": dst}
    if running:
        fire["running"] = True
    return fire


def adhoc_timeline(schedule: dict[str, Any], bound_ms: int, count: int, zone, now_ms: int) -> list[dict[str, Any]]:
    """`cron next --cron/--every/--at …`: the first `count` occurrences strictly after `bound_ms`."""
    first = next_run(schedule, bound_ms)
    if first is None:
        return []
    return [_fire(None, at, zone, now_ms, dst=dst) for at, dst in series(schedule, first[0], count, first[1])]


# --- status --------------------------------------------------------------------------------------

def _evidence(path: Path, cap: int) -> dict[str, Any]:
    """`{exists, bytes, digest}` of a file (bytes and digest null when it is no data file at all)."""
    try:
        raw = read_data_file(path, cap)
    except InvalidDataError:
        return {"exists": True, "bytes": None, "digest": None}
    if raw is None:
        return {"exists": False, "bytes": None, "digest": None}
    return {"exists": True, "bytes": len(raw), "digest": hashlib.sha256(raw).hexdigest()}


def _lock_age_ms(lockdir) -> int | None:
    try:
        return int((time.time() - os.stat(lockdir).st_mtime) * 1000)
    except OSError:
        return None


def workspace_status(ws: Workspace, environ, clock: Clock, project: Path,
                     max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> dict[str, Any]:
    """Offline evidence about a workspace, read without locking (cron-store.md §8 status); its
    next due time and overdue jobs from the jobs' timelines (`project`: where a job without a
    target of its own sends)."""
    now_ms = clock.now_ms()
    store, ledger, found = check_files(ws, max_log_bytes)
    invalid = {problem.file for problem in found}
    if store is not None and ledger is not None:
        found += settled_cross_check(ws, store, ledger, clock, max_log_bytes)
    found += [problem for problem in (history_problem(ws),) if problem is not None]  # only `cron runs` stops
    problems = [problem.to_json() for problem in found]
    intent: dict[str, Any] = {"status": "none"}
    if os.path.lexists(ws.reset_intent):
        try:
            intent = {"status": "pending", **json.loads(read_data_file(ws.reset_intent, 65_536) or b"")}
        except (SxctlError, ValueError, TypeError, RecursionError):
            intent = {"status": "invalid"}
    daemons = daemon_locks(ws, environ)
    owner_daemon = next((d for d in daemons if d.owns_workspace), None)
    store_lockdir = f"{os.path.realpath(ws.store_sentinel)}.lock"
    ledger_lockdir = f"{os.path.realpath(ws.ledger_sentinel)}.lock"
    store_held = os.path.isdir(store_lockdir)
    owner = "none"
    if owner_daemon is not None:
        owner = "comis-daemon"
    elif store_held:
        try:
            note = json.loads(read_data_file(Path(f"{ws.store_sentinel}.owner"), 4096) or b"")
            if str(note.get("bootId", "")).startswith("sxctl-") and note.get("host") == socket.gethostname():
                owner = "sxctl-tick"
        except (SxctlError, ValueError, AttributeError, RecursionError):
            pass
    strays = sorted(name for name in (os.listdir(ws.scheduler) if ws.scheduler.is_dir() else [])
                    if name.endswith(".tmp"))
    for name in strays:
        problems.append({"file": str(ws.scheduler / name), "line": None, "code": "stray_temp",
                         "message": f"stray temp file {name} (left by a crashed writer; not deleted)"})
    jobs = store["jobs"] if store else []
    try:
        policy = read_policy(ws)  # a job's --jitter and a maintenance window move when it is overdue
    except SxctlError:  # named among the problems above
        policy = None
    timeline = job_previews(ws, store, policy, project, clock, 1, max_log_bytes=max_log_bytes) \
        if store is not None and policy is not None else None
    for name in timeline.overdue(now_ms) if timeline and not store_held else []:
        job = find_job(store, name)  # type: ignore[arg-type]
        message = f"job {name} is overdue since {shown_time(job['lifecycle']['nextRunAtMs'])}; is a tick running?"
        problems.append({"file": str(ws.store), "line": None, "code": "overdue", "message": message})
    due = timeline.next_due() if timeline else None
    return {
        "ok": True, "workspace": str(ws.root),
        "store": _evidence(ws.store, STORE_CAP), "ledger": _evidence(ws.ledger, max_log_bytes),
        "policy": _evidence(ws.policy, FILE_CAP), "intent": intent,
        "strictAuthoritiesValid": not invalid & {str(ws.store), str(ws.ledger)},
        "policyValid": str(ws.policy) not in invalid, "jobCount": len(jobs),
        "activeClaimCount": len(store["activeClaims"]) if store else 0,
        "daemon": (owner_daemon or daemons[0]).to_json() if daemons else None,
        "locks": {"store_held": store_held, "ledger_held": os.path.isdir(ledger_lockdir),
                  "store_age_ms": _lock_age_ms(store_lockdir)},
        "built_in_jobs": [j["name"] for j in jobs if j["source"] == "built_in"],
        "next_due_ms": due["at_ms"] if due else None, "next_due_job": due["job"] if due else None,
        "next_due_mark": due["mark"] if due else None, "owner": owner, "problems": problems,
    }

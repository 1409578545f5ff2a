"""`status`: liveness, timers, inbox, cron and the problems found, for one session and its
workspace. Read-only: nothing here takes a lock or writes."""

from __future__ import annotations

import os
from typing import Any

from ..callbacks.table import CAPACITY, doc_paused, doc_rev, doc_slots, is_active, unpublished_edit, view_table
from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.policy.maintenance import maintenance_message, open_windows
from ..cron.run.failures import failed_one_shots_of, last_failures
from ..cron.run.ledger import recent_runs
from ..cron.run.receipts import run_consumption
from ..cron.spend.file import read_book
from ..cron.store.clock_repair import REPAIR_HINT, acknowledged
from ..cron.store.file import read_store
from ..cron.store.transaction import clock_behind, clock_behind_error
from ..cron.timeline.previews import job_previews
from ..cron.timeline.views import job_state, paused_by_sxctl
from ..errors import InvalidDataError, SystemRefusedError
from ..inbox.expiry import lifetime_problems, survey
from ..inbox.folder import count_since, list_messages
from ..project import NO_SESSION, Session, list_sessions, live_sessions, several_live_warning
from .spend_view import guard_problems, guard_states, session_usage
from .stranded import stranded_problem, stranded_sessions

#: consumed messages kept in done/ beyond which `status` (and `doctor`) suggest pruning
LARGE_HISTORY = 10_000


def read_timers(session: Session, now_ms: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    try:
        view = view_table(session)
    except InvalidDataError as error:
        return {"file_exists": True, "active": None, "capacity": CAPACITY, "paused": None, "next_fire_ms": None,
                "invalid": error.reason}, None
    doc = view.winner.doc if view.winner else {}
    active = [s for s in doc_slots(doc).values() if is_active(s)]
    edit = unpublished_edit(session, view)  # a change the live agent ignores
    return {"file_exists": view.exists, "rev": doc_rev(doc), "active": len(active), "capacity": CAPACITY,
            "paused": doc_paused(doc), "next_fire_ms": min((s["fire_at_ms"] for s in active), default=None),
            "unpublished_edit": {**edit.to_json(), "message": edit.message, "fix": edit.fix} if edit else None,
            }, doc


def _inbox(session: Session, now_ms: int) -> dict[str, Any]:
    pending = list_messages(session, ("pending",))
    last_hour, kept = count_since(session, "consumed", now_ms - 3_600_000)  # no file in done/ is read
    return {
        "pending": len(pending),
        "oldest_pending_age_ms": max((now_ms - r.mtime_ms for r in pending), default=None),
        "consumed_last_hour": last_hour, "consumed_kept": kept,
    }


def _cron(ws, now_ms: int, max_log_bytes: int, project, clock: Clock) -> dict[str, Any]:
    store = read_store(ws)
    if store is None:
        return {"store_exists": False, "jobs_by_state": {}, "active_claims": 0, "next_due_ms": None,
                "next_due_job": None, "next_due_mark": None, "last_runs": [], "unknown_runs": [],
                "tick_running": False, "waiting": [], "never_run": [], "paused_by_sxctl": [], "failed": [],
                "maintenance": []}
    full_policy = read_policy(ws)
    read_book(ws.scheduler)  # a damaged spend file stops every pass too: the cron part says so
    policy = full_policy["jobs"]
    jobs = {job["id"]: job for job in store["jobs"]}
    runs = recent_runs(ws.ledger, 50, max_log_bytes=max_log_bytes)
    failed = last_failures(store, runs, now_ms)
    failed_ids = failed_one_shots_of(ws, store, max_log_bytes)
    by_state: dict[str, int] = {}
    for job in store["jobs"]:
        state = job_state(job, policy.get(job["id"]))
        if state == "done" and job["id"] in failed_ids:
            state = "failed"  # a one-shot whose run failed, as `cron list` shows it
        by_state[state] = by_state.get(state, 0) + 1
    brief = [{"name": jobs[r["jobId"]]["name"] if r["jobId"] in jobs else None, "jobId": r["jobId"],
              "executionId": r["executionId"], "status": r["status"], "startedAtMs": r["startedAtMs"],
              "trigger": r["trigger"]} for r in runs]
    for row, run in zip(brief[:5], runs, strict=False):
        row["consumption"] = run_consumption(run, jobs.get(run["jobId"]), project, clock, workspace=ws.root)
    timeline = job_previews(ws, store, full_policy, project, clock, 1, max_log_bytes=max_log_bytes)
    # the rule every pass and edit applies: while it holds, each stops
    latest = clock_behind(store, runs, clock.now_ms(), acknowledged(full_policy))  # after the reads: a pass
    # that wrote a row since `now_ms` is not ahead
    behind = clock_behind_error(ws, now_ms, latest).message if latest is not None else None
    due = timeline.next_due()
    guards = guard_states(ws, store, full_policy, project, clock, timeline)  # the spend guards (observe/spend_view.py)
    return {
        "store_exists": True, "jobs_by_state": by_state, "active_claims": len(store["activeClaims"]),
        "next_due_ms": (due or {}).get("at_ms"), "next_due_job": (due or {}).get("job"),
        "next_due_mark": (due or {}).get("mark"), "clock_behind": behind,
        "last_runs": brief[:5], "unknown_runs": [r for r in brief if r["status"] == "unknown"],
        "tick_running": os.path.isdir(f"{os.path.realpath(ws.store_sentinel)}.lock"),
        "overdue": timeline.overdue(now_ms),
        "waiting": timeline.held(now_ms),
        "never_run": timeline.never_run(),  # no time of theirs will ever run (docs/timeline.md)
        "guards": guards,
        "failed": failed,  # jobs whose last run failed: why, and `cron runs NAME`
        "paused_by_sxctl": paused_by_sxctl(store, policy),
        "maintenance": open_windows(full_policy, store, now_ms),  # skipping now, or to come
        # jobs changed by hand since the last `cron apply` (None: no apply made here)
        "schedule_drift": _drift(store, full_policy, ws) if "applied" in full_policy else None,
    }


def status(session: Session | None, ws, *, clock: Clock = SYSTEM_CLOCK,
           max_log_bytes: int = 2_000_000) -> dict[str, Any]:
    """Liveness, timers, inbox, cron and the problems found, for one session (None: the project
    has no session folder yet, and the cron part still counts) and workspace."""
    now = clock.now_ms()
    if session is None:
        return _status_without_session(ws, now, max_log_bytes, clock)
    timers, _ = read_timers(session, now)
    inbox = _inbox(session, now)
    cron = _cron_status(ws, now, max_log_bytes, session.project, clock)
    infos = list_sessions(session.project, clock)
    stranded = stranded_sessions(session.project, clock, infos)
    problems = []
    several = several_live_warning(infos)
    if several is not None:
        problems.append({"code": "several_live_sessions", "message": several,
                         "sessions": [info.id for info in live_sessions(infos)]})
    problems += [stranded_problem(entry) for entry in stranded]
    if session.state == "stopped" and inbox["pending"] and session.id not in {e.id for e in stranded}:
        problems.append({"code": "stopped_session_with_pending",
                         "message": f"session {session.id} is stopped: no agent is running, and {inbox['pending']} "
                                    "message(s) wait in it"})
    elif session.state != "live" and inbox["pending"] and session.id not in {e.id for e in stranded}:
        problems.append({"code": "stale_session_with_pending",
                         "message": f"session {session.id} is {session.state} and {inbox['pending']} message(s) "
                                    "are waiting; the agent may have rotated to a new folder"})
    if (inbox["consumed_kept"] or 0) > LARGE_HISTORY:
        problems.append({"code": "inbox_history_large",
                         "message": f"{inbox['consumed_kept']} consumed messages are kept in inbox/done/; "
                                    "`sxctl inbox prune --older-than 30d --keep 1000` trims them"})
    if "invalid" in timers:
        problems.append({"code": "timer_table_unreadable",
                         "message": f"callbacks.json cannot be read ({timers['invalid']}); the agent keeps its last "
                                    "good table and stops firing"})
    if timers.get("unpublished_edit"):
        edit = timers["unpublished_edit"]
        problems.append({"code": "timer_edit_not_adopted", "message": f"{edit['message']}; fix: {edit['fix']}"})
    problems += _cron_problems(cron)
    lifetimes = survey(session.project, now, clock, infos)  # messages with --expires / --read-within
    inbox["lifetimes"] = lifetimes.to_json()
    problems += [{"code": problem["code"], "message": f"{problem['message']}; fix: {problem['fix']}"}
                 for problem in lifetime_problems(lifetimes)]
    return {
        "ok": True, **session.to_json(), "now_ms": now,
        "liveness": {"state": session.state, "updated_ms": session.liveness.updated_ms,
                     "stats_age_ms": session.liveness.age_ms},
        "timers": timers, "inbox": inbox, "cron": cron, "stranded": [entry.to_json() for entry in stranded],
        "usage": session_usage(session.stats), "problems": problems,
    }


def _cron_status(ws, now: int, max_log_bytes: int, project, clock: Clock) -> dict[str, Any]:
    """The cron part of `status`; when the store, the policy file or the ledger cannot be read
    or is invalid, which file it is (`invalid_file`) and why, instead."""
    try:
        return _cron(ws, now, max_log_bytes, project, clock)
    except (InvalidDataError, SystemRefusedError) as error:
        return {"store_exists": None, "invalid": error.message, "invalid_file": error.file,
                "refused": isinstance(error, SystemRefusedError)}


#: the name of each cron file every pass reads, in the codes of its problems and in `metrics`
CRON_FILES = {"cron-jobs.json": "store", "cron-executions.jsonl": "ledger", "sxctl-policy.json": "policy",
              "sxctl-spend.json": "spend"}


def _cron_problems(cron: dict[str, Any]) -> list[dict[str, Any]]:
    problems = []
    if "invalid" in cron:
        part = CRON_FILES.get(os.path.basename(cron["invalid_file"] or ""), "store")
        problems.append({"code": f"cron_{part}_{'unreadable' if cron['refused'] else 'invalid'}",
                         "message": cron["invalid"], "file": cron["invalid_file"]})
    for name in cron.get("overdue", []) if not cron.get("tick_running") else []:
        problems.append({"code": "cron_overdue", "message": f"cron job {name} is overdue and no tick is running; "
                                                            "is `sxctl cron tick` in your crontab?"})
    if cron.get("clock_behind"):
        problems.append({"code": "cron_clock_behind", "message": f"every pass stops: {cron['clock_behind']}; "
                                                                 f"{REPAIR_HINT}"})
    problems += guard_problems(cron.get("guards", []))
    for job in cron.get("never_run", []):
        problems.append({"code": "cron_never_runs",
                         "message": f"cron job {job['name']} has no run ahead: {job['why']}"})
    for name in cron.get("waiting", []):
        problems.append({"code": "cron_waiting_for_agent",
                         "message": f"cron job {name} is due and waits for a live agent (see its --hold-max)"})
    for paused in cron.get("paused_by_sxctl", []):
        code = "cron_expired" if paused["reason"] == "expired" else "cron_paused_by_limit"
        problems.append({"code": code, "message": f"cron job {paused['name']}: {paused['message']}"})
    for window in cron.get("maintenance", []):
        problems.append({"code": "cron_maintenance", "message": maintenance_message(window)})
    drift = cron.get("schedule_drift")
    for job in (drift or {}).get("jobs", []):
        problems.append({"code": "cron_schedule_drift", "message": f"cron job {job['name']}: {job['change']} by hand "
                         "since the last `cron apply`; `sxctl cron plan` shows how"})
    for failed in cron.get("failed", []):
        problems.append({"code": "cron_run_failed",
                         "message": f"cron job {failed['name']}: its last run failed: {failed['reason']}; "
                                    f"see `{failed['command']}`"})
    for run in cron.get("unknown_runs", []):
        if run["name"] is not None:
            what, check = f"of {run['name']}", f"sxctl cron runs {run['name']} --evidence"
        else:  # its job was removed since
            what, check = f"of removed job {run['jobId']}", "sxctl cron runs --all-jobs --evidence"
        problems.append({"code": "cron_unknown_run",
                         "message": f"run {run['executionId']} {what} ended unknown; check it with `{check}`"})
    return problems


def _drift(store: dict[str, Any], policy: dict[str, Any], ws) -> dict[str, Any]:
    """The drift from the last `cron apply` (loaded only where one was made)."""
    from ..cron.schedule_file.drift import drift_of

    return drift_of(store, policy, ws.root).to_json()


def _status_without_session(ws, now: int, max_log_bytes: int, clock: Clock) -> dict[str, Any]:
    cron = _cron_status(ws, now, max_log_bytes, ws.root, clock)
    problems = [{"code": "no_session", "message": "no session folder yet: is the agent running in this project?"}]
    return {
        "ok": True, **NO_SESSION, "now_ms": now,
        "liveness": {"state": "none", "updated_ms": None, "stats_age_ms": None},
        "timers": None, "inbox": None, "cron": cron, "stranded": [], "usage": None,
        "problems": problems + _cron_problems(cron),
    }

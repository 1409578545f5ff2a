"""`sxctl cron …`: edit, validate and preview a comis scheduler store offline."""

from __future__ import annotations

import os
import sys

import click

from ..errors import UsageError
from .cron_options import _default_project, _job_options, _job_spec, _schedule_options, _workspace
from .output import (
    DURATION,
    Group,
    completing,
    current_project,
    emit,
    reporter,
    say,
    settings,
    table,
)


@click.group("cron", cls=Group)
def cron() -> None:
    """Durable scheduled jobs in the comis store (<workspace>/.scheduler/cron-jobs.json).

    \b
    Examples:
      sxctl cron add nightly --cron "0 2 * * *" --tz Europe/Berlin --payload agent-turn --text "run the nightly audit"
      sxctl cron list
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
    """


def _max_log_bytes(value: int | None) -> int:
    from ..cron.ledger import DEFAULT_MAX_LOG_BYTES, MAX_MAX_LOG_BYTES

    if value is None:
        env = os.environ.get("SXCTL_MAX_LOG_BYTES")
        if env:
            if not env.isdigit():
                raise UsageError(f"invalid SXCTL_MAX_LOG_BYTES {env!r}: a number of bytes")
            value = int(env)
    value = DEFAULT_MAX_LOG_BYTES if value is None else value
    if not 1 <= value <= MAX_MAX_LOG_BYTES:
        raise UsageError(f"--max-log-bytes must be between 1 and {MAX_MAX_LOG_BYTES}")
    return value


def _max_log_option(command):
    return click.option("--max-log-bytes", type=int, metavar="N",
                        help="Ledger byte ceiling (default 2,000,000; SXCTL_MAX_LOG_BYTES).")(command)


def _lock_wait_option(command):
    return click.option("--lock-wait", "lock_wait_ms", type=DURATION, default="10", show_default=True,
                        metavar="SECONDS", help="How long to wait for the store lock (then exit 4).")(command)


def _zone(name: str | None):
    from ..timeparse import load_zone

    if name is None:

        from ..timeparse import local_zone

        return local_zone()
    return load_zone(name)


def _when(ms: int | None, zone=None) -> str:
    if ms is None:
        return "-"

    from ..timeparse import format_ms, format_relative_ms

    local = format_ms(ms, "%Y-%m-%d %H:%M:%S %Z", zone or _zone(None))
    return f"{local} ({format_relative_ms(ms, settings().clock.now_ms())})"


# --- init / add / update / pause / resume / remove ----------------------------------------------

@cron.command("init", mutating=True)
def init() -> None:
    """Create .scheduler/ (0700), the lock sentinels, an empty store and an empty ledger.

    Nothing that exists is overwritten.

    \b
    Example:
      sxctl --workspace ~/myapp cron init
    """
    from ..cron.store import init_workspace, refuse_if_daemon_owns, refuse_if_reset_pending

    report = reporter()
    ws = _workspace()
    refuse_if_daemon_owns(ws, os.environ, report)
    refuse_if_reset_pending(ws)
    created = init_workspace(ws)
    emit({"ok": True, "workspace": str(ws.root), "created": created},
         lambda: say("\n".join(f"created {p}" for p in created) or f"{ws.scheduler} is already initialised"))


@cron.command("add", mutating=True)
@click.argument("name")
@_schedule_options
@_job_options
@click.option("--session-strategy", type=click.Choice(["fresh", "rolling"]), help="Agent turn (default fresh).")
@click.option("--max-history-turns", type=int, help="With rolling: 1-20.")
@click.option("--continuation", type=click.Choice(["none", "heartbeat-excerpt", "origin-history"]),
              help="Agent turn (default none).")
@click.option("--paused", is_flag=True, help="Add the job paused.")
@click.option("--max-jobs", type=click.IntRange(1), default=100, show_default=True, help="Authored job capacity.")
@_lock_wait_option
def add(name, max_jobs, lock_wait_ms, **kw) -> None:
    """Add a job NAME with one schedule (--cron, --every, --at or --in) and a payload.

    \b
    Examples:
      sxctl cron add standup --cron "0 9 * * 1-5" --tz America/New_York --payload agent-turn --text "plan the day"
      sxctl cron add ping --in 10m --payload heartbeat-event --text "check the build"
      sxctl cron add stretch --at "2026-12-01 15:00" --tz Europe/Berlin --payload delivery --text "stretch"
    """
    from ..api import add_job

    spec = _job_spec(kw)
    result = add_job(name, workspace=_workspace(), project=str(_default_project()), agent=settings().agent,
                     spec=spec, max_jobs=max_jobs, lock_wait=lock_wait_ms / 1000, clock=settings().clock,
                     report=reporter())
    emit({"ok": True, **result}, lambda: say(f"added {name} ({result['jobId']})"))


@cron.command("update", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@click.option("--name", "new_name", metavar="NEW", help="Rename the job.")
@_schedule_options
@_job_options
@click.option("--session-strategy", hidden=True)
@click.option("--max-history-turns", type=int, hidden=True)
@click.option("--continuation", hidden=True)
@click.option("--no-wake-gate", is_flag=True, help="Remove the wake gate.")
@click.option("--paused", is_flag=True, help="Pause the job.")
@click.option("--resumed", is_flag=True, help="Resume the job.")
@_lock_wait_option
def update(name, lock_wait_ms, **kw) -> None:
    """Change a job: a schedule flag replaces the schedule, --payload the whole payload.

    \b
    Examples:
      sxctl cron update nightly --cron "30 2 * * *" --tz Europe/Berlin
      sxctl cron update ping --text "check the build and the docs"
    """
    from ..cron.jobs import update_job
    from ..cron.store import mutate_store

    report = reporter()
    spec = _job_spec(kw)
    notes: list[str] = []
    project = str(_default_project())
    result = mutate_store(
        _workspace(),
        lambda store, now: update_job(store, name, spec, default_project=project, now_ms=now, report=report,
                                      notes=notes),
        clock=settings().clock, report=report, lock_wait_s=lock_wait_ms / 1000,
    ).outcome
    for note in notes:
        report.note(note)
    emit({"ok": True, **result, **({"notes": notes} if notes else {})}, lambda: say(f"updated {result['jobName']}"))


def _pause(name: str, paused: bool, lock_wait_ms: int) -> None:
    from ..cron.jobs import set_job_paused
    from ..cron.store import mutate_store

    result = mutate_store(_workspace(), lambda store, now: set_job_paused(store, name, paused),
                          clock=settings().clock, report=reporter(), lock_wait_s=lock_wait_ms / 1000).outcome
    emit({"ok": True, **result}, lambda: say(f"{'paused' if paused else 'resumed'} {name}"))


@cron.command("pause", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@_lock_wait_option
def pause(name, lock_wait_ms) -> None:
    """Pause a job; its next run time and error counter are kept.

    \b
    Example:
      sxctl cron pause nightly
    """
    _pause(name, True, lock_wait_ms)


@cron.command("resume", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@_lock_wait_option
def resume(name, lock_wait_ms) -> None:
    """Resume a paused job; if its run time has passed it runs as a catch-up at the next tick.

    \b
    Example:
      sxctl cron resume nightly
    """
    _pause(name, False, lock_wait_ms)


@cron.command("remove", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@click.option("--yes", is_flag=True, help="Do not ask (required when stdin is not a terminal).")
@_lock_wait_option
def remove(name, yes, lock_wait_ms) -> None:
    """Remove a job (asks on a terminal; needs --yes otherwise).

    \b
    Example:
      sxctl cron remove nightly --yes
    """
    from ..cron.jobs import remove_job
    from ..cron.store import mutate_store

    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("refusing to remove without confirmation: pass --yes")
        if not click.confirm(f"Remove cron job {name}?", err=True):
            raise UsageError("not removed")
    result = mutate_store(_workspace(), lambda store, now: remove_job(store, name),
                          clock=settings().clock, report=reporter(), lock_wait_s=lock_wait_ms / 1000).outcome
    emit({"ok": True, **result}, lambda: say(f"removed {name}"))


# --- list / show / next ---------------------------------------------------------------------------

def _read(ws):
    from ..cron.store import read_store

    store = read_store(ws)
    return store if store is not None else {"jobs": [], "activeClaims": []}


@cron.command("list")
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Show times in this zone (default: local).")
def list_(tz) -> None:
    """List the jobs: kind, schedule, state, next run and target (no payload text).

    \b
    Examples:
      sxctl cron list
      sxctl cron list --json | jq -r '.jobs[] | select(.state=="scheduled") | .job.name'
    """
    from ..cron.schedule import describe_schedule
    from ..cron.store import default_agent_id
    from ..cron.views import job_kind_label, job_row, schedule_computable, target_label

    ws = _workspace()
    store = _read(ws)
    zone = _zone(tz)
    rows = [job_row(job) for job in store["jobs"]]

    def human() -> None:
        if not rows:
            say(f"no cron jobs in {ws.store}")
            return
        table(["NAME", "KIND", "SCHEDULE", "STATE", "NEXT", "TARGET"], [
            [r["job"]["name"], job_kind_label(r["job"]),
             describe_schedule(r["job"]["schedule"]) if schedule_computable(r["job"]["schedule"]) else "?",
             r["state"], _when(r["next_run_ms"], zone) if r["state"] not in ("done",) else "-",
             target_label(r["job"])]
            for r in rows
        ])

    emit({"ok": True, "workspace": str(ws.root), "agentId": default_agent_id(store, settings().agent, os.environ),
          "jobs": rows}, human)


@cron.command("show")
@click.argument("name", shell_complete=completing("job_names"))
def show(name) -> None:
    """Show one job in full.

    \b
    Example:
      sxctl cron show nightly --json
    """
    import json

    from ..cron.store import find_job
    from ..cron.views import job_row

    row = job_row(find_job(_read(_workspace()), name))

    def human() -> None:
        say(f"{name}: {row['state']}, next {_when(row['next_run_ms'])}")
        say(json.dumps(row["job"], indent=2, ensure_ascii=False))

    emit({"ok": True, **row}, human)


@cron.command("next")
@click.argument("name", required=False, shell_complete=completing("job_names"))
@click.option("-n", "count", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Display zone (and the zone of an ad-hoc --cron).")
@click.option("--from", "from_time", metavar="TIME", help="Start after this time (default now).")
@click.option("--include-paused", is_flag=True, help="Continue the series of paused jobs.")
@click.option("--cron", "cron_expr", metavar="EXPR", help="Preview this expression instead of the store.")
@click.option("--every", metavar="DURATION", help="Preview a fixed period.")
@click.option("--anchor", metavar="TIME", help="Phase of --every.")
@click.option("--at", "at_time", metavar="TIME", help="Preview a one-shot time.")
@click.option("--fold", type=click.Choice(["earlier", "later"]))
def next_(name, count, tz, from_time, include_paused, cron_expr, every, anchor, at_time, fold) -> None:
    """Preview the next fire times of the store's jobs, or of an ad-hoc schedule (no store needed).

    \b
    Examples:
      sxctl cron next -n 10
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
      sxctl cron next --every 90m --anchor 2026-12-01T00:00Z
    """
    from ..cron.schedule import ScheduleInput, resolve_schedule
    from ..cron.views import adhoc_timeline, timeline
    from ..timeparse import parse_time_ms

    now = settings().clock.now_ms()
    bound = now if from_time is None else parse_time_ms(from_time, tz=None if from_time[-1:] in "zZ" else tz)[0]
    adhoc = ScheduleInput(cron=cron_expr, every=every, at=at_time, tz=tz, fold=fold, anchor=anchor)
    if adhoc.given:
        if name is not None:
            raise UsageError("give a job NAME or an ad-hoc schedule, not both")
        schedule = resolve_schedule(adhoc, min(now, bound) - 1 if at_time is None else -1)
        zone = _zone(tz if cron_expr is None or tz else "UTC")
        fires = adhoc_timeline(schedule, bound, count, zone, now)
        zone_name = tz or (schedule.get("tz") if cron_expr else None)
    else:
        zone = _zone(tz)
        store = _read(_workspace())
        if name is not None:
            from ..cron.store import find_job

            find_job(store, name)
        fires = timeline(store, bound, count, zone, name=name, include_paused=include_paused)
        zone_name = tz
    shown_zone = zone_name or str(zone)

    def human() -> None:
        if not fires:
            say("no upcoming fires")
            return
        from ..timeparse import format_relative_ms

        table(["WHEN", "IN", "JOB", "NOTE"], [
            [f["at_local"], format_relative_ms(f["at_ms"], now), f["name"] or "-",
             ", ".join(n for n, on in (("overdue — runs as catchup at the next pass", f["overdue"]),
                                        ("paused", f["paused"]), ("running", f.get("running")),
                                        ("dst", f["dst"])) if on)]
            for f in fires
        ])

    emit({"ok": True, "tz": shown_zone, "now_ms": now, "fires": fires}, human)


# --- status / runs / validate / wake ---------------------------------------------------------------

@cron.command("status")
@_max_log_option
def status(max_log_bytes) -> None:
    """Offline evidence: files and digests, locks, daemon ownership, claims, problems.

    \b
    Example:
      sxctl cron status --json | jq .problems
    """
    from ..cron.views import workspace_status

    ws = _workspace()
    doc = workspace_status(ws, os.environ, settings().clock.now_ms(), _max_log_bytes(max_log_bytes))

    def size(evidence: dict) -> str:
        return f"{evidence['bytes']} bytes" if evidence["exists"] else "missing"

    def human() -> None:
        say(f"workspace   {doc['workspace']}")
        say(f"store       {size(doc['store'])}, {doc['jobCount']} job(s), {doc['activeClaimCount']} active claim(s)")
        say(f"ledger      {size(doc['ledger'])}")
        say(f"valid       {'yes' if doc['strictAuthoritiesValid'] else 'NO'}")
        say(f"owner       {doc['owner']}")
        say(f"next due    {_when(doc['next_due_ms'])}")
        for problem in doc["problems"]:
            say(f"problem     {problem['code']}: {problem['message']}")

    emit(doc, human)


@cron.command("runs")
@click.argument("name", required=False, shell_complete=completing("job_names"))
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--all-jobs", is_flag=True, help="Runs of every job.")
@click.option("--exact", is_flag=True, help="Scan the whole ledger instead of its tail.")
@click.option("--evidence", is_flag=True, help="For unknown runs: was their inbox message written?")
@_max_log_option
def runs(name, limit, all_jobs, exact, evidence, max_log_bytes) -> None:
    """Recent executions of a job, newest first (reads only the tail of the ledger).

    \b
    Examples:
      sxctl cron runs nightly --limit 5
      sxctl cron runs --all-jobs --json | jq '.runs[] | select(.status=="unknown")'
    """
    from ..api import job_runs
    from ..cron.store import find_job

    if (name is None) == (not all_jobs):
        raise UsageError("give a job NAME or --all-jobs")
    ws = _workspace()
    job = find_job(_read(ws), name) if name is not None else None
    found = job_runs(name, limit=limit, workspace=ws, exact=exact, max_log_bytes=_max_log_bytes(max_log_bytes))
    if evidence:
        _add_evidence(found)

    names = {j["id"]: j["name"] for j in (_read(ws) or {"jobs": []})["jobs"]} if all_jobs else {}

    def human() -> None:
        if not found:
            say("no runs")
            return
        headers = ["STARTED", "STATUS", "DELIVERY", "TRIGGER", "WORK", "ERROR", "COUNTERS", "EXECUTION ID"]
        rows = [[_when(r["startedAtMs"]), r["status"], r["deliveryStatus"], r["trigger"], r["workKind"],
                 r.get("errorKind"), ", ".join(f"{c['name']}={c['value']}" for c in r.get("counters", [])) or None,
                 r["executionId"] + _dispatch_note(r)] for r in found]
        if all_jobs:  # which job each run belongs to (by id once the job is gone)
            headers.insert(0, "JOB")
            for row, r in zip(rows, found, strict=True):
                row.insert(0, names.get(r["jobId"]) or r["jobId"])
        if evidence:
            headers.append("EVIDENCE")
            for row, r in zip(rows, found, strict=True):
                row.append(_evidence_text(r.get("evidence")))
        table(headers, rows)

    emit({"ok": True, "jobName": name, "jobId": job["id"] if job else None, "limit": limit, "exact": exact,
          "runs": found}, human)


def _dispatch_note(run: dict) -> str:
    outcome = run.get("outcome") or {}
    if outcome.get("kind") == "inbox_dispatch":
        return f" → {outcome['sessionId']}/{outcome['stem']} ({outcome['mode']})"
    return ""


def _evidence_text(evidence: dict | None) -> str | None:
    """One cell: where an unknown run's message is now, found through its key record."""
    if evidence is None:
        return None
    if not evidence.get("key_record"):
        return "no message was written"
    return f"message {evidence['stem']} {evidence['state']} in {evidence['session']}"


def _add_evidence(found: list[dict]) -> None:
    """Unknown inbox-dispatch runs: look for the message through its key (= execution id)."""
    from ..cron.ledger import run_evidence
    from ..errors import NotFoundError
    from ..inbox import evidence_for_key
    from ..project import list_sessions

    try:
        project = current_project()
    except NotFoundError:
        return
    sessions = list_sessions(project, settings().clock)
    for run in found:
        if run_evidence(run):
            run["evidence"] = evidence_for_key(project, sessions, run["executionId"])


@cron.command("validate")
@_max_log_option
def validate(max_log_bytes) -> None:
    """Check the store and the ledger completely, plus their cross-checks; exit 5 on any problem.

    \b
    Example:
      sxctl cron validate && echo "store and ledger are sound"
    """
    from ..cron.views import validate_workspace
    from ..errors import InvalidDataError

    ws = _workspace()
    problems = validate_workspace(ws, settings().clock.now_ms(), _max_log_bytes(max_log_bytes))
    if problems:
        for problem in problems if not settings().json else []:
            where = f":{problem.line}" if problem.line is not None else ""
            say(f"{problem.file}{where}: {problem.code}: {problem.message}", err=True)
        first = problems[0]
        raise InvalidDataError(first.file, f"{len(problems)} problem(s); first: {first.message}",
                               details={"problems": [p.to_json() for p in problems]})
    emit({"ok": True, "workspace": str(ws.root), "problems": []}, lambda: say(f"{ws.scheduler}: valid"))


@cron.command("wake", mutating=True)
@click.option("--target", type=click.Choice(["agent", "monitoring"]), default="agent", show_default=True)
@click.option("--to", "to", metavar="SESSION|live", default="live", show_default=True)
@click.option("--text", default="Scheduler wake: check pending scheduled work.", show_default=True)
def wake(target, to, text) -> None:
    """Wake the agent now: drop a scheduler-wake message (mode auto) into the target session.

    \b
    Example:
      sxctl cron wake --to live
    """
    from ..cron.store import refuse_if_daemon_owns, refuse_if_reset_pending
    from ..inbox import SendRequest, send
    from ..project import resolve_target_session

    if target == "monitoring":
        raise UsageError("--target monitoring has no file protocol; only the agent can be woken", code="unsupported")
    report = reporter()
    ws = _workspace()
    refuse_if_daemon_owns(ws, os.environ, report)
    refuse_if_reset_pending(ws)
    session = resolve_target_session(_default_project(), to, clock=settings().clock)
    result = send(session, SendRequest(text, mode="auto", no_wait=True), clock=settings().clock, report=report)
    emit({"ok": True, "status": "accepted", "disposition": "new_occurrence", "correlationId": result.stem,
          "lane": "agent", "retainedReason": None, "stem": result.stem, "session": session.id},
         lambda: say(f"woke {session.id} ({result.stem})"))


from . import cron_tick  # noqa: E402,F401 - registers `tick` and `run` on the group

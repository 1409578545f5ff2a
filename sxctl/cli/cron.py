"""`sxctl cron …`: edit, validate and preview a comis scheduler store offline."""

from __future__ import annotations

import os
import sys

import click

from ..errors import UsageError
from .cron_options import _job_options, _job_spec, _policy_options, _schedule_options
from .output import DURATION, Group, completing, emit, in_workspace, printable, reporter, say, settings, table


@click.group("cron", cls=Group)
def cron() -> None:
    """Durable scheduled jobs in the comis store (<workspace>/.scheduler/cron-jobs.json).

    \b
    Examples:
      sxctl cron add nightly --cron "0 2 * * *" --tz Europe/Berlin --payload agent-turn --text "run the nightly audit"
      sxctl cron list
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
    """


def _max_log_option(command):
    return click.option("--max-log-bytes", type=int, metavar="N",
                        help="Ledger byte ceiling (default 2,000,000; SXCTL_MAX_LOG_BYTES).")(command)


def _lock_wait_option(command):
    return click.option("--lock-wait", "lock_wait_s", type=DURATION, default="10", show_default=True,
                        metavar="SECONDS", help="How long to wait for the store lock (then exit 4).")(command)


def _when(ms: int | None, zone=None) -> str:
    if ms is None:
        return "-"

    from ..timeparse import format_ms, format_relative_ms, local_zone

    local = format_ms(ms, "%Y-%m-%d %H:%M:%S %Z", zone or local_zone())
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
    from ..api import init_workspace

    result = init_workspace(report=reporter(), **in_workspace())

    def human() -> None:
        for path in result.created:
            say(f"created {path}")
        if not result.created:
            say(f"{result.workspace.scheduler} is already initialised")

    emit(result.to_json(), human)


@cron.command("add", mutating=True)
@click.argument("name")
@_schedule_options
@_job_options
@_policy_options
@click.option("--session-strategy", type=click.Choice(["fresh", "rolling"]), help="Agent turn (default fresh).")
@click.option("--max-history-turns", type=int, help="With rolling: 1-20.")
@click.option("--continuation", type=click.Choice(["none", "heartbeat-excerpt", "origin-history"]),
              help="Agent turn (default none).")
@click.option("--paused", is_flag=True, help="Add the job paused.")
@click.option("--max-jobs", type=click.IntRange(1), default=100, show_default=True, help="Authored job capacity.")
@_lock_wait_option
def add(name, max_jobs, lock_wait_s, **kw) -> None:
    """Add a job NAME with one schedule (--cron, --every, --at or --in) and a payload.

    \b
    Examples:
      sxctl cron add standup --cron "0 9 * * 1-5" --tz America/New_York --payload agent-turn --text "plan the day"
      sxctl cron add ping --in 10m --payload heartbeat-event --text "check the build"
      sxctl cron add stretch --at "2026-12-01 15:00" --tz Europe/Berlin --payload delivery --text "stretch"
    """
    from ..api import add_job

    result = add_job(name, spec=_job_spec(kw), agent=settings().agent, max_jobs=max_jobs, lock_wait=lock_wait_s,
                     clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"added {name} ({result.outcome['jobId']})"))


@cron.command("update", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@click.option("--name", "new_name", metavar="NEW", help="Rename the job.")
@_schedule_options
@_job_options
@_policy_options
@click.option("--session-strategy", hidden=True)
@click.option("--max-history-turns", type=int, hidden=True)
@click.option("--continuation", hidden=True)
@click.option("--no-wake-gate", is_flag=True, help="Remove the wake gate.")
@click.option("--paused", is_flag=True, help="Pause the job.")
@click.option("--resumed", is_flag=True, help="Resume the job.")
@_lock_wait_option
def update(name, lock_wait_s, **kw) -> None:
    """Change a job: a schedule flag replaces the schedule, --payload the whole payload.

    \b
    Examples:
      sxctl cron update nightly --cron "30 2 * * *" --tz Europe/Berlin
      sxctl cron update ping --text "check the build and the docs"
    """
    from ..api import update_job

    result = update_job(name, _job_spec(kw), lock_wait=lock_wait_s, clock=settings().clock, report=reporter(),
                        **in_workspace())
    emit(result.to_json(), lambda: say(f"updated {result.outcome['jobName']}"))


def _pause(name: str, paused: bool, lock_wait_s: float) -> None:
    from ..api import pause_job

    result = pause_job(name, paused, lock_wait=lock_wait_s, clock=settings().clock, report=reporter(),
                       **in_workspace())
    emit(result.to_json(), lambda: say(f"{'paused' if paused else 'resumed'} {name}"))


@cron.command("pause", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@_lock_wait_option
def pause(name, lock_wait_s) -> None:
    """Pause a job; its next run time and error counter are kept.

    \b
    Example:
      sxctl cron pause nightly
    """
    _pause(name, True, lock_wait_s)


@cron.command("resume", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@_lock_wait_option
def resume(name, lock_wait_s) -> None:
    """Resume a paused job; if its run time has passed it runs as a catch-up at the next tick.

    \b
    Example:
      sxctl cron resume nightly
    """
    _pause(name, False, lock_wait_s)


@cron.command("remove", mutating=True)
@click.argument("name", shell_complete=completing("job_names"))
@click.option("--yes", is_flag=True, help="Do not ask (required when stdin is not a terminal).")
@_lock_wait_option
def remove(name, yes, lock_wait_s) -> None:
    """Remove a job (asks on a terminal; needs --yes otherwise).

    \b
    Example:
      sxctl cron remove nightly --yes
    """
    from ..api import remove_job

    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("refusing to remove without confirmation: pass --yes")
        if not click.confirm(f"Remove cron job {printable(name)}?", err=True):
            raise UsageError("not removed")
    result = remove_job(name, lock_wait=lock_wait_s, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"removed {name}"))


# --- list / show / next ---------------------------------------------------------------------------

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
    from ..api import list_jobs
    from ..cron.schedule import describe_schedule
    from ..cron.views import job_kind_label, schedule_computable, target_label

    result = list_jobs(tz=tz, agent=settings().agent, **in_workspace())
    rows, zone = result.rows, result.zone

    def human() -> None:
        if not rows:
            say(f"no cron jobs in {result.workspace.store}")
            return
        table(["NAME", "KIND", "SCHEDULE", "STATE", "NEXT", "TARGET"], [
            [r["job"]["name"], job_kind_label(r["job"]),
             describe_schedule(r["job"]["schedule"]) if schedule_computable(r["job"]["schedule"]) else "?",
             r["state"], _when(r["next_run_ms"], zone) if r["state"] not in ("done",) else "-",
             target_label(r["target"])]
            for r in rows
        ])

    emit(result.to_json(), human)


@cron.command("show")
@click.argument("name", shell_complete=completing("job_names"))
def show(name) -> None:
    """Show one job in full.

    \b
    Example:
      sxctl cron show nightly --json
    """
    import json

    from ..api import show_job

    result = show_job(name, **in_workspace())
    row = result.row

    def human() -> None:
        from ..cron.views import target_label

        target = f", target {target_label(row['target'])}" if row["target"] else ""
        say(f"{name}: {row['state']}, next {_when(row['next_run_ms'])}{target}")
        say(json.dumps(row["job"], indent=2, ensure_ascii=False), lines=True)

    emit(result.to_json(), human)


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
    from ..api import next_fires

    result = next_fires(name, count=count, tz=tz, after=from_time, include_paused=include_paused, cron=cron_expr,
                        every=every, anchor=anchor, at=at_time, fold=fold, clock=settings().clock, **in_workspace())
    fires, now = result.fires, result.now_ms

    def human() -> None:
        if not fires:
            say("no upcoming fires")
            return
        from ..timeparse import format_relative_ms

        def overdue(fire: dict) -> str:
            from ..timeparse import format_ms

            held = fire.get("waiting")
            if held is None:
                return "overdue — due at the next pass"
            if held["status"] == "waiting":
                until = format_ms(held["giveUpAtMs"], "%Y-%m-%d %H:%M", result.zone)
                return f"due — waits for a live agent until {until}"
            return "overdue — no live agent past its --hold-max: given up at the next pass"

        table(["WHEN", "IN", "JOB", "NOTE"], [
            [f["at_local"], format_relative_ms(f["at_ms"], now), f["name"] or "-",
             ", ".join(n for n, on in ((overdue(f), f["overdue"]),
                                        ("paused", f["paused"]), ("running", f.get("running")),
                                        ("dst", f["dst"])) if on)]
            for f in fires
        ])

    emit(result.to_json(), human)


# --- status / runs / validate / wake ---------------------------------------------------------------

@cron.command("status")
@_max_log_option
def status(max_log_bytes) -> None:
    """Offline evidence: files and digests, locks, daemon ownership, claims, problems.

    \b
    Example:
      sxctl cron status --json | jq .problems
    """
    from ..api import cron_status

    doc = cron_status(max_log_bytes=max_log_bytes, clock=settings().clock, **in_workspace()).to_json()

    def size(evidence: dict) -> str:
        return f"{evidence['bytes']} bytes" if evidence["exists"] else "missing"

    def human() -> None:
        say(f"workspace   {doc['workspace']}")
        say(f"store       {size(doc['store'])}, {doc['jobCount']} job(s), {doc['activeClaimCount']} active claim(s)")
        say(f"ledger      {size(doc['ledger'])}")
        say(f"policy      {size(doc['policy'])}")
        invalid = ", ".join(dict.fromkeys(os.path.basename(p["file"]) for p in doc["problems"]
                                          if p["code"] == "invalid_data"))
        say(f"valid       {'yes' if doc['strictAuthoritiesValid'] and doc['policyValid'] else f'NO ({invalid})'}")
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

    if (name is None) == (not all_jobs):
        raise UsageError("give a job NAME or --all-jobs")
    result = job_runs(name, limit=limit, exact=exact, evidence=evidence, max_log_bytes=max_log_bytes,
                      clock=settings().clock, **in_workspace())
    found, names = result.runs, result.job_names
    from ..cron.receipts import describe_consumption

    def human() -> None:
        for skip in result.skipped:
            say(f"skipped {skip['count']} occurrence(s) {_when(skip['scheduledForMs'])} "
                f"to {_when(skip['lastMs'])}: {skip['reason'].replace('_', ' ')}")
        if not found:
            say("no runs")
            return
        headers = ["STARTED", "STATUS", "READ", "DELIVERY", "TRIGGER", "WORK", "ERROR", "COUNTERS", "EXECUTION ID"]
        rows = [[_when(r["startedAtMs"]), r["status"], describe_consumption(r.get("consumption")),
                 r["deliveryStatus"], r["trigger"], r["workKind"], r.get("errorKind"),
                 ", ".join(f"{c['name']}={c['value']}" for c in r.get("counters", [])) or None,
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

    emit(result.to_json(), human)


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


@cron.command("validate")
@_max_log_option
def validate(max_log_bytes) -> None:
    """Check the store, sxctl's policy file and the ledger completely, plus their cross-checks;
    exit 5 on any problem, naming its file.

    \b
    Example:
      sxctl cron validate && echo "store, policy file and ledger are sound"
    """
    from ..api import validate_workspace

    result = validate_workspace(max_log_bytes=max_log_bytes, clock=settings().clock, **in_workspace())
    for problem in result.problems if not settings().json else []:
        where = f":{problem.line}" if problem.line is not None else ""
        say(f"{problem.file}{where}: {problem.code}: {problem.message}", err=True)
    result.raise_if_invalid()
    emit(result.to_json(), lambda: say(f"{result.workspace.scheduler}: valid"))


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
    from ..api import wake_agent

    result = wake_agent(text, target=target, to=to, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"woke {result.session_id} ({result.stem})"))


from . import cron_engines, cron_tick  # noqa: E402,F401 - register `tick`, `run`, `export`, `handoff`

"""`sxctl cron tick` and `cron run`: the scheduler pass, as the cron group's commands (registered
by importing this module, which `sxctl.cli.cron` does)."""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from .cron import _max_log_bytes, _max_log_option, cron
from .cron_options import _default_project, _workspace
from .output import (
    DURATION,
    completing,
    emit,
    reporter,
    say,
    settings,
)


def _pass_options(command):
    options = [
        click.option("--max-runs", type=click.IntRange(1), default=3, show_default=True,
                     help="At most N due jobs per pass; the rest are deferred."),
        click.option("--to", "to", metavar="SESSION|live", default="live", show_default=True,
                     help="Target of jobs without a delivery target."),
        click.option("--turn-mode", type=click.Choice(["auto", "interrupt", "queue"]), default="queue",
                     show_default=True, help="Inbox mode for agent turns."),
        click.option("--catchup-after", "catchup_ms", type=DURATION, default="90", show_default=True,
                     metavar="SECONDS", help="Later than this is a catch-up."),
        click.option("--deliver-timeout", "deliver_ms", type=DURATION, default="60", show_default=True,
                     metavar="SECONDS", help="Time limit of SXCTL_DELIVER_CMD."),
        click.option("--no-gates", is_flag=True, help="Do not run wake gates (turns run as if ungated)."),
        click.option("--force", is_flag=True, help="Run even next to a comis daemon or built-in jobs (loud)."),
        click.option("--lock-wait", "lock_wait_ms", type=DURATION, default="0", show_default=True, metavar="SECONDS"),
        click.option("--busy-ok", is_flag=True, help="Exit 0 when another pass holds the lock."),
        click.option("--terminalize-orphans", is_flag=True, help="Record orphan starts as unknown and go on."),
        click.option("--retain-executions", type=click.IntRange(1), default=1000, show_default=True),
        click.option("--dry-run", is_flag=True, help="Take no lock, write nothing: show what would happen."),
    ]
    for option in reversed(options):
        command = option(command)
    return _max_log_option(command)


def _scheduler_pass(kw: dict):
    from ..cron.runner import SchedulerPass, TickOptions

    options = TickOptions(
        project=_default_project(), max_runs=kw["max_runs"], to=kw["to"], turn_mode=kw["turn_mode"],
        catchup_after_ms=kw["catchup_ms"], deliver_timeout_s=kw["deliver_ms"] / 1000, no_gates=kw["no_gates"],
        force=kw["force"], lock_wait_s=kw["lock_wait_ms"] / 1000, busy_ok=kw["busy_ok"],
        terminalize_orphans=kw["terminalize_orphans"], retain_executions=kw["retain_executions"],
        max_log_bytes=_max_log_bytes(kw["max_log_bytes"]), dry_run=kw["dry_run"],
    )
    return SchedulerPass(_workspace(), options, clock=settings().clock, report=reporter())


def _pass_lines(result) -> list[str]:
    lines = []
    rec = result.reconciled
    if rec["executionIds"]:
        lines.append(f"reconciled {len(rec['executionIds'])} claim(s): {rec['recoveredBeforeStart']} recovered "
                     f"before start, {rec['ownerLostAfterStart']} owner lost after start, "
                     f"{rec['settledFromTerminal']} settled from terminal")
    for run in result.runs:
        detail = run.get("errorKind") or ""
        outcome = run.get("outcome") or {}
        if outcome.get("kind") == "inbox_dispatch":
            detail = f"→ {outcome['sessionId']}/{outcome['stem']} ({outcome['mode']})"
        lines.append(f"ran {run['name']} ({run['trigger']}): {run['status']} {detail}".rstrip())
        if run.get("skipped_occurrences"):
            lines.append(f"skipped {run['skipped_occurrences']} missed occurrence(s) of {run['name']}")
    for job in result.deferred:
        lines.append(f"deferred {job['name']} (more than --max-runs due)")
    return lines


def _pass_notes(scheduler, result) -> None:
    """Why nothing happened goes to stderr as a note, so `-q` prints nothing at all then."""
    if result.skipped:
        scheduler.report.note(f"skipped this pass: {result.skipped} (another pass holds the store lock)")
    if not result.store_exists:
        scheduler.report.note(f"no cron store at {scheduler.ws.store}: nothing to do")


@cron.command("tick", mutating=True)
@_pass_options
def tick(**kw) -> None:
    """One scheduler pass: reconcile dead claims, run due jobs into the agent's inbox, settle.

    Meant for system cron, a systemd timer or a CI schedule; nothing claimed is ever run twice.

    \b
    Examples:
      * * * * * cd ~/myapp && python3 -m sxctl cron tick --busy-ok -q
      sxctl cron tick --dry-run --json
    """
    scheduler = _scheduler_pass(kw)
    result = scheduler.run()
    _pass_notes(scheduler, result)
    emit(result.to_json(scheduler.report.warnings), lambda: _say_lines(_pass_lines(result)))


@cron.command("run", mutating=True)
@click.argument("name", required=False, shell_complete=completing("job_names"))
@click.option("--mode", type=click.Choice(["force", "due"]), default="force", show_default=True,
              help="force: run NAME once now (manual); due: one full pass, like tick.")
@_pass_options
def run(name, mode, **kw) -> None:
    """Run a job now (--mode force, trigger manual), or run one full pass (--mode due).

    \b
    Examples:
      sxctl cron run nightly
      sxctl cron run --mode due --json
    """
    from ..cron.store import default_agent_id, read_store

    if mode == "force" and name is None:
        raise UsageError("cron run --mode force needs a job NAME")
    scheduler = _scheduler_pass(kw)
    result = scheduler.run_forced(name) if mode == "force" else scheduler.run()
    _pass_notes(scheduler, result)
    agent = default_agent_id(read_store(scheduler.ws), settings().agent, os.environ)
    doc = {"ok": True, "triggered": bool(result.runs), "mode": mode, "resolvedAgentId": agent}
    if mode == "force":
        run_entry = result.runs[0] if result.runs else None
        doc.update(jobName=name, executionId=run_entry["executionId"] if run_entry else None, run=run_entry)
    else:
        doc["executionIds"] = [r["executionId"] for r in result.runs]
    doc["report"] = result.to_json(scheduler.report.warnings)
    emit(doc, lambda: _say_lines(_pass_lines(result)))


def _say_lines(lines: list[str]) -> None:
    for line in lines:
        say(line)

"""`sxctl cron tick` and `cron run`: the scheduler pass (added to the cron group by `sxctl.cli.cron`)."""

from __future__ import annotations

import io
import sys

import click

from ...api import run_job, tick
from ...api.scheduler import tick_log
from ...api.times import format_ms
from ..output import DURATION, Command, completing, emit, in_workspace, reporter, say, settings
from .options import max_log_option


def _pass_options(command):
    options = [
        click.option("--max-runs", type=click.IntRange(1), default=3, show_default=True,
                     help="At most N due jobs per pass; the rest are deferred."),
        click.option("--to", "to", metavar="SESSION|live", default="live", show_default=True,
                     help="Target of jobs without a delivery target."),
        click.option("--turn-mode", type=click.Choice(["auto", "interrupt", "queue"]), default="queue",
                     show_default=True, help="Inbox mode for agent turns."),
        click.option("--catchup-after", "catchup_after", type=DURATION, default="90", show_default=True,
                     metavar="DURATION", help="Later than this is a catch-up."),
        click.option("--deliver-timeout", "deliver_timeout", type=DURATION, default="60", show_default=True,
                     metavar="DURATION", help="Time limit of SXCTL_DELIVER_CMD."),
        click.option("--no-gates", is_flag=True, help="Do not run wake gates (turns run as if ungated)."),
        click.option("--force", is_flag=True, help="Run even next to a comis daemon or built-in jobs (loud)."),
        click.option("--lock-wait", "lock_wait", type=DURATION, default="0", show_default=True, metavar="DURATION"),
        click.option("--busy-ok", is_flag=True, help="Exit 0 when another pass holds the lock."),
        click.option("--terminalize-orphans", is_flag=True, help="Record orphan starts as unknown and go on."),
        click.option("--retain-executions", type=click.IntRange(1), default=1000, show_default=True),
        click.option("--dry-run", is_flag=True, help="Take no lock, write nothing: show what would happen."),
    ]
    for option in reversed(options):
        command = option(command)
    return max_log_option(command)


def _where() -> dict:
    return {"clock": settings().clock, "report": reporter(), **in_workspace()}


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
        if run.get("reason"):  # a run that did not succeed says why, with or without -q
            detail = run["reason"].removeprefix(f"{run['status']} ")
        lines.append(f"ran {run['name']} ({run['trigger']}): {run['status']} {detail}".rstrip())
        if run.get("skipped_occurrences"):
            lines.append(f"skipped {run['skipped_occurrences']} missed occurrence(s) of {run['name']}")
    for job in result.deferred:
        lines.append(f"deferred {job['name']} (more than --max-runs due)")
    for job in result.admission.waiting:
        lines.append(f"waiting {job['name']}: due since {_clock(job['dueSinceMs'])}, no live agent "
                     f"(gives up at {_clock(job['giveUpAtMs'])})")
    for skip in result.admission.skipped:
        lines.append(f"skipped {skip['count']} occurrence(s) of {skip['name']} ({skip['reason'].replace('_', ' ')})")
    for job in result.admission.paused:
        lines.append(f"paused {job['name']}: {job['message']}")
    return lines


@click.command("tick", cls=Command, mutating=True)
@_pass_options
@click.option("--log", "log", type=click.Path(dir_okay=False), metavar="FILE",
              help="Append what the pass prints (each line with its UTC time) to FILE, made with its folders if "
              "missing; before FILE would pass --log-max-kib it is moved to FILE.1.")
@click.option("--log-max-kib", "log_max", type=click.IntRange(1), default=1024, show_default=True,
              metavar="KIB",
              help="With --log: the size at which FILE is moved to FILE.1 (the two hold at most twice this).")
def tick_command(log, log_max, **kw) -> None:
    """One scheduler pass: reconcile dead claims, run due jobs into the agent's inbox, settle.

    Meant for system cron, a systemd timer or a CI schedule; nothing claimed is ever run twice.
    Cron and systemd run it with PATH=/usr/bin:/bin and no virtual environment: name the
    interpreter by its absolute path, as `sxctl cron export` does for you.

    \b
    Examples:
      sxctl cron export --target crontab --install   # the crontab line, with this installation's paths
      sxctl cron tick --dry-run --json
    """
    if log is not None:
        _log_to(log, log_max)
    result = tick(**_where(), **kw)
    emit(result.to_json(), lambda: _say_lines(_pass_lines(result.report)))


@click.command("run", cls=Command, mutating=True)
@click.argument("name", required=False, shell_complete=completing("jobs"))
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
    result = run_job(name, mode=mode, agent=settings().agent, **_where(), **kw)
    if not result.failed:
        emit(result.to_json(), lambda: _say_lines(_pass_lines(result.outcome.report)))
        return
    if not settings().json:
        _say_lines(_pass_lines(result.outcome.report))
    result.raise_if_failed()  # exit 10, the reason on stderr (or the JSON document, "ok": false)


def _log_to(path: str, max_kib: int) -> None:
    """From here on, everything this process prints (the pass's lines, its notes and its error)
    goes to the bounded log file instead (see `sxctl.api.tick_log`)."""
    sink = tick_log(path, max_kib * 1024, clock=settings().clock, fallback=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    sys.stdout = sys.stderr = io.TextIOWrapper(io.BufferedWriter(sink), encoding="utf-8", errors="backslashreplace",
                                               line_buffering=True, write_through=True)


def _clock(ms: int) -> str:
    return format_ms(ms, "%Y-%m-%d %H:%M:%S", None)


def _say_lines(lines: list[str]) -> None:
    for line in lines:
        say(line)

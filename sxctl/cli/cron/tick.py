"""`sxctl cron tick` and `cron run`: the scheduler pass (added to the cron group by `sxctl.cli.cron`)."""

from __future__ import annotations

import io
import sys

import click

from ...api import run_job, tick
from ...api.scheduler import tick_log
from ...errors import ExitStatus
from ..output import DURATION, Command, completing, emit, in_workspace, reporter, say, settings
from .options import max_log_option


def _pass_options(command):
    options = [
        click.option("--max-per-pass", "max_per_pass", type=click.IntRange(1), default=3, show_default=True,
                     metavar="N", help="At most N due jobs per pass; the rest are deferred to the next pass."),
        click.option("--max-catchup", "max_catchup", type=click.IntRange(0, 100_000), metavar="N",
                     help="At most N catch-up runs per pass (after an outage); the rest are deferred to the next "
                     "passes in due order (default: the workspace's, `cron defaults`; 0: no limit)."),
        # its old name, deprecated: on `cron add` --max-runs is a job's lifetime
        click.option("--max-runs", "max_runs_alias", type=click.IntRange(1), hidden=True),
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


def _where(kw: dict) -> dict:
    """The pass's clock, reporter and workspace; the deprecated `--max-runs N` taken as
    `--max-per-pass N`, with a warning (on stderr and in the JSON document's warnings)."""
    report = reporter()
    alias = kw.pop("max_runs_alias")
    if alias is not None:
        if click.get_current_context().get_parameter_source("max_per_pass") == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("--max-runs is the old name of --max-per-pass: give only --max-per-pass")
        kw["max_per_pass"] = alias
        report.warn("--max-runs on cron tick/run is deprecated: use --max-per-pass (on cron add, --max-runs is a "
                    "job's lifetime)")
    return {"clock": settings().clock, "report": report, **in_workspace()}


@click.command("tick", cls=Command, mutating=True)
@_pass_options
@click.option("--log", "log", type=click.Path(dir_okay=False), metavar="FILE",
              help="Append what the pass prints (each line with its local time and offset) to FILE, made with its "
              "folders if missing; before FILE would pass --log-max-kib it is moved to FILE.1. A FILE inside "
              ".scorpiox/ or .scheduler/ is refused (exit 2).")
@click.option("--log-max-kib", "log_max", type=click.IntRange(1), default=1024, show_default=True,
              metavar="KIB",
              help="With --log: the size at which FILE is moved to FILE.1 (the two hold at most twice this).")
@click.option("--metrics-file", "metrics_file", type=click.Path(readable=False), metavar="FILE",
              help="After the pass, replace FILE atomically with `sxctl metrics` (for node-exporter's textfile "
              "collector: name it *.prom); a failure to write it is a warning, never a failed pass. A FILE inside "
              ".scorpiox/ or .scheduler/ is refused before the pass (exit 2).")
@click.option("--ping-url", "ping_url", metavar="URL",
              help="Push monitoring (Healthchecks.io semantics): POST URL/start when the pass starts, URL when it "
              "ends well, URL/fail when it fails; a ping never fails the pass, and one that failed is sent again "
              "at the next pass.")
@click.option("--ping-timeout", "ping_timeout", type=DURATION, default="5", show_default=True, metavar="DURATION",
              help="Time limit of one ping (the pass spends at most 3 times this on pings in all).")
def tick_command(log, log_max, **kw) -> int:
    """One scheduler pass: reconcile dead claims, run due jobs into the agent's inbox, settle.

    Meant for system cron, a systemd timer or a CI schedule; nothing claimed is ever run twice.
    Cron and systemd run it with PATH=/usr/bin:/bin and no virtual environment: name the
    interpreter by its absolute path, as `sxctl cron export` does for you.

    \b
    Examples:
      sxctl cron export --target crontab --install   # the crontab line, with this installation's paths
      sxctl cron tick --dry-run --json
      sxctl cron tick --metrics-file /var/lib/node_exporter/textfile/myapp.prom
      sxctl cron tick --ping-url https://hc-ping.com/YOUR-UUID
    """
    if log is not None:
        _log_to(log, log_max)
    result = tick(**_where(kw), **kw)
    emit(result.to_json(), lambda: _say_lines(result.report.lines()))
    if result.interrupted:  # what it did is shown above (its --json says `"interrupted": true`)
        say(f"sxctl: interrupted: the pass finished the {len(result.report.runs)} run(s) it had started and began "
            "no other; the next pass takes the rest", err=True)
        return ExitStatus.INTERRUPTED
    return ExitStatus.OK


@click.command("run", cls=Command, mutating=True)
@click.argument("name", required=False, shell_complete=completing("jobs"))
@click.option("--mode", type=click.Choice(["force", "due"]), default="force", show_default=True,
              help="force: run NAME once now (manual); due: one full pass, like tick.")
@_pass_options
def run(name, mode, **kw) -> None:
    """Run a job now (--mode force, trigger manual), or run one full pass (--mode due).

    A manual run is what you asked for: the job's limits, active hours, maintenance window and
    spend guards do not hold it back, though its tokens count towards --max-tokens-per-day.

    \b
    Examples:
      sxctl cron run nightly
      sxctl cron run --mode due --json
    """
    result = run_job(name, mode=mode, agent=settings().agent, **_where(kw), **kw)
    if not result.failed:
        emit(result.to_json(), lambda: _say_lines(result.outcome.report.lines()))
        return
    if not settings().json:
        _say_lines(result.outcome.report.lines())
    result.raise_if_failed()  # exit 10, the reason on stderr (or the JSON document, "ok": false)


def _log_to(path: str, max_kib: int) -> None:
    """From here on, everything this process prints (the pass's lines, its notes and its error)
    goes to the bounded log file instead (see `sxctl.api.tick_log`)."""
    sink = tick_log(path, max_kib * 1024, clock=settings().clock, fallback=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    sys.stdout = sys.stderr = io.TextIOWrapper(io.BufferedWriter(sink), encoding="utf-8", errors="backslashreplace",
                                               line_buffering=True, write_through=True)


def _say_lines(lines: list[str]) -> None:
    for line in lines:
        say(line)

"""`sxctl cron init/add/update/pause/resume/remove`: the commands that change the store."""

from __future__ import annotations

import sys

import click

from ...api import add_job, init_workspace, job_spec, pause_job, remove_job, update_job, workspace_defaults
from ...api.times import shown_time
from ...errors import UsageError
from ..output import Command, completing, emit, in_workspace, printable, read_text_input, reporter, say, settings
from .options import job_options, lock_wait_option, policy_options, schedule_options


@click.command("init", cls=Command, mutating=True)
def init() -> None:
    """Create .scheduler/ (0700), the lock sentinels, an empty store and an empty ledger.

    Nothing that exists is overwritten.

    \b
    Example:
      sxctl --workspace ~/myapp cron init
    """
    result = init_workspace(report=reporter(), **in_workspace())

    def human() -> None:
        for path in result.created:
            say(f"created {path}")
        if not result.created:
            say(f"{result.workspace.scheduler} is already initialised")

    emit(result.to_json(), human)


@click.command("add", cls=Command, mutating=True)
@click.argument("name")
@schedule_options
@job_options
@policy_options
@click.option("--session-strategy", type=click.Choice(["fresh", "rolling"]), help="Agent turn (default fresh).")
@click.option("--max-history-turns", type=int, help="With rolling: 1-20.")
@click.option("--continuation", type=click.Choice(["none", "heartbeat-excerpt", "origin-history"]),
              help="Agent turn (default none).")
@click.option("--paused", is_flag=True, help="Add the job paused.")
@click.option("--max-jobs", type=click.IntRange(1), default=100, show_default=True, help="Authored job capacity.")
@lock_wait_option
def add(name, max_jobs, lock_wait_s, **kw) -> None:
    """Add a job NAME with one schedule (--cron, --every, --at or --in) and a payload.

    \b
    Examples:
      sxctl cron add standup --cron "0 9 * * 1-5" --tz America/New_York --payload agent-turn --text "plan the day"
      sxctl cron add ping --in 10m --payload heartbeat-event --text "check the build"
      sxctl cron add stretch --at "2026-12-01 15:00" --tz Europe/Berlin --payload delivery --text "stretch"
    """
    result = add_job(name, spec=spec_from_options(kw), agent=settings().agent, max_jobs=max_jobs, lock_wait=lock_wait_s,
                     clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"added {name} ({result.outcome['jobId']})"))


@click.command("update", cls=Command, mutating=True)
@click.argument("name", shell_complete=completing("jobs"))
@click.option("--name", "new_name", metavar="NEW", help="Rename the job.")
@schedule_options
@job_options
@policy_options
@click.option("--session-strategy", hidden=True)
@click.option("--max-history-turns", type=int, hidden=True)
@click.option("--continuation", hidden=True)
@click.option("--no-wake-gate", is_flag=True, help="Remove the wake gate.")
@click.option("--paused", is_flag=True, help="Pause the job.")
@click.option("--resumed", is_flag=True, help="Resume the job.")
@lock_wait_option
def update(name, lock_wait_s, **kw) -> None:
    """Change a job: a schedule flag replaces the schedule, --payload the whole payload.

    \b
    Examples:
      sxctl cron update nightly --cron "30 2 * * *" --tz Europe/Berlin
      sxctl cron update ping --text "check the build and the docs"
    """
    result = update_job(name, spec_from_options(kw), lock_wait=lock_wait_s, clock=settings().clock, report=reporter(),
                        **in_workspace())
    emit(result.to_json(), lambda: say(f"updated {result.outcome['jobName']}"))


def _pause(name: str | None, paused: bool, lock_wait_s: float, **window) -> None:
    result = pause_job(name, paused, lock_wait=lock_wait_s, clock=settings().clock, report=reporter(),
                       **window, **in_workspace())
    what = name if name is not None else "every job"
    opened = result.outcome.get("maintenance")

    def human() -> None:
        if opened:
            say(f"maintenance window for {what} until {shown_time(opened['untilMs'], None, '%Y-%m-%d %H:%M')}: "
                f"{opened['reason']}")
        elif "maintenance" in result.outcome:
            say(f"maintenance window of {what} ended" if name is not None else "the workspace's maintenance window "
                "ended (a job's own window stays: `sxctl cron resume NAME` ends it)")
        else:
            say(f"{'paused' if paused else 'resumed'} {name}")

    emit(result.to_json(), human)


@click.command("pause", cls=Command, mutating=True)
@click.argument("name", required=False, shell_complete=completing("jobs"))
@click.option("--all", "all_jobs", is_flag=True, help="With --until: a maintenance window for every job.")
@click.option("--until", metavar="TIME",
              help="A maintenance window until TIME (a naive one in this machine's zone) or for a DURATION from "
              "now (2h) instead of a pause: a recurring job's occurrences in it are skipped, never caught up; a "
              "one-shot due in it runs when it ends; the job(s) run again by themselves after it.")
@click.option("--reason", metavar="TEXT", help="With --until (required there): why, shown by status and doctor.")
@lock_wait_option
def pause(name, all_jobs, until, reason, lock_wait_s) -> None:
    """Pause a job; its next run time and error counter are kept. With --until, open a
    maintenance window instead (for NAME, or --all jobs), which ends by itself.

    \b
    Examples:
      sxctl cron pause nightly
      sxctl cron pause --all --until "2026-12-01 14:00" --reason "database migration"
    """
    _pause(name, True, lock_wait_s, all_jobs=all_jobs, until=until, reason=reason)


@click.command("resume", cls=Command, mutating=True)
@click.argument("name", required=False, shell_complete=completing("jobs"))
@click.option("--all", "all_jobs", is_flag=True,
              help="End the workspace's maintenance window (for every job) now; a job's own stays.")
@lock_wait_option
def resume(name, all_jobs, lock_wait_s) -> None:
    """Resume a paused job (and end its maintenance window); if its run time has passed it runs
    as a catch-up at the next tick. --all ends the workspace's window (`cron pause --all`); a job's
    own window ends with `cron resume NAME`.

    \b
    Examples:
      sxctl cron resume nightly
      sxctl cron resume --all
    """
    _pause(name, False, lock_wait_s, all_jobs=all_jobs)


@click.command("defaults", cls=Command, mutating=True)
@click.option("--max-catchup", "max_catchup", type=click.IntRange(0, 100_000), metavar="N",
              help="After an outage, at most N catch-up runs per pass (0: no limit); `cron tick --max-catchup` "
              "overrides it for one pass.")
@lock_wait_option
def defaults(max_catchup, lock_wait_s) -> None:
    """Show, or set, the workspace's defaults for every scheduler pass (kept in the policy file).

    \b
    Examples:
      sxctl cron defaults --max-catchup 5
      sxctl cron defaults --json
    """
    result = workspace_defaults(max_catchup=max_catchup, lock_wait=lock_wait_s, clock=settings().clock,
                                report=reporter(), **in_workspace())
    budget = result.defaults.get("maxCatchup")
    emit(result.to_json(), lambda: say(f"max-catchup: {budget} catch-up run(s) per pass" if budget
                                       else "max-catchup: none (every overdue job runs as soon as it can)"))


@click.command("remove", cls=Command, mutating=True)
@click.argument("name", shell_complete=completing("jobs"))
@click.option("--yes", is_flag=True, help="Do not ask (required when stdin is not a terminal).")
@lock_wait_option
def remove(name, yes, lock_wait_s) -> None:
    """Remove a job (asks on a terminal; needs --yes otherwise).

    \b
    Example:
      sxctl cron remove nightly --yes
    """
    if not yes:
        if sys.stdin is None or not sys.stdin.isatty():
            raise UsageError("refusing to remove without confirmation: pass --yes")
        if not click.confirm(f"Remove cron job {printable(name)}?", err=True):
            raise UsageError("not removed")
    result = remove_job(name, lock_wait=lock_wait_s, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"removed {name}"))


def spec_from_options(kw: dict):
    """The API's job spec from the options of `cron add` / `cron update` (their names as click
    gives them); the text of --text-file is read here, the rest is checked by the API."""
    text = kw.get("text")
    if kw.get("text_file") is not None:
        if text is not None:
            raise UsageError("give the text either with --text or with --text-file, not both")
        # a job's text is at most 64 KiB of characters; the read stops just past that in bytes
        text = read_text_input(kw["text_file"], 4 * 64 * 1024, "--text-file")
    return job_spec(
        cron=kw.get("cron_expr"), every=kw.get("every"), at=kw.get("at_time"), in_=kw.get("in_time"), tz=kw.get("tz"),
        fold=kw.get("fold"), anchor=kw.get("anchor"), payload=kw.get("payload"), text=text,
        wake_mode=kw.get("wake_mode"), session_strategy=kw.get("session_strategy"),
        max_history_turns=kw.get("max_history_turns"), continuation=kw.get("continuation"), model=kw.get("model"),
        timeout_seconds=kw.get("timeout_seconds"), wake_gate=kw.get("wake_gate"),
        wake_gate_language=kw.get("wake_gate_language"), wake_gate_timeout=kw.get("wake_gate_timeout"),
        no_wake_gate=kw.get("no_wake_gate", False), to=kw.get("to"), to_project=kw.get("to_project"),
        tenant=kw.get("tenant"), max_dependency_errors=kw.get("max_dependency_errors"),
        paused=kw.get("paused", False), resumed=kw.get("resumed", False), new_name=kw.get("new_name"),
        hold_max=kw.get("hold_max"), catch_up=kw.get("catch_up"), stale_after=kw.get("stale_after"),
        missed_note=kw.get("missed_note"), max_unconsumed=kw.get("max_unconsumed"),
        max_runs_per_day=kw.get("max_runs_per_day"), until=kw.get("until"), max_runs=kw.get("max_runs"),
        active_hours=kw.get("active_hours"), active_days=kw.get("active_days"), overlap=kw.get("overlap"),
        jitter=kw.get("jitter"), host=kw.get("host"), ping_url=kw.get("ping_url"), ping_on=kw.get("ping_on"),
        expires=kw.get("expires"), read_within=kw.get("read_within"),
        rate_limit_ceiling=kw.get("rate_limit_ceiling"), max_session_tokens=kw.get("max_session_tokens"),
        max_tokens_per_day=kw.get("max_tokens_per_day"), on_missing_usage=kw.get("on_missing_usage"),
    )

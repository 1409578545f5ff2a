"""`sxctl cron plan`, `cron apply` and `cron dump`: jobs as code, from a schedule file kept in git."""

from __future__ import annotations

from pathlib import Path

import click

from ...api import apply_schedule, dump_schedule, plan_schedule
from ...errors import ExitStatus
from ..output import Command, emit, in_workspace, printable, reporter, say, settings
from .options import lock_wait_option

_FILE = click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
                     help="The schedule file (default: sxctl.toml in the workspace folder).")
_PRUNE = click.option("--prune", is_flag=True,
                      help="Remove the jobs an earlier apply made that the file no longer has (jobs made by hand "
                           "are never touched).")
_SIGNS = {"add": "+", "update": "~", "remove": "-", "adopt": "=", "kept": "!", "passed": "?"}


def _say_plan(result, *, applied: bool) -> None:
    """The plan in words: one line per job that changes (each changed key below it), the jobs
    left alone, the workspace settings, the drift, a summary."""
    from ...api.schedule_file import value_text  # the words of each value

    def shown(key: str, value) -> str:
        return value if key == "ping-url" and value is not None else value_text(key, value)  # in words already

    doc = result.to_json()
    verbs = {"add": "add", "update": "update", "remove": "remove", "adopt": "adopt (made by hand, as declared)",
             "kept": "keep: managed (made or adopted by an apply), not in the file (--prune removes it)",
             "passed": "not added: its time has passed"}
    if applied:
        verbs.update(add="added", update="updated", remove="removed", adopt="adopted (made by hand, as declared)")
    for job in doc["jobs"]:
        if job["action"] in ("kept", "passed"):  # the name first: the reason is long
            verb, _, why = verbs[job["action"]].partition(": ")
            say(f"{_SIGNS[job['action']]} {verb} {printable(job['name'])}: {why}")
        elif job["action"] in _SIGNS:
            say(f"{_SIGNS[job['action']]} {verbs[job['action']]} {printable(job['name'])}")
            for key, change in job["changes"].items():
                if job["action"] == "add":
                    say(f"    {key}: {printable(shown(key, change['to']))}")
                else:
                    say(f"    {key}: {printable(shown(key, change['from']))} -> {printable(shown(key, change['to']))}")
    for key, change in doc["workspaceChanges"].items():
        say(f"~ workspace {key}: {printable(_compact(change['from']))} -> {printable(_compact(change['to']))}")
    unmanaged = [job["name"] for job in doc["jobs"] if job["action"] == "unmanaged"]
    if unmanaged:
        say(f"unmanaged (made by hand, never touched): {printable(', '.join(unmanaged))}")
    if result.drift.moved and not applied:
        say("drift since the last cron apply:")
        for line in result.drift.lines():
            say(f"  {printable(line)}")
    counts = doc["counts"]
    settings_changed = [f"{len(doc['workspaceChanges'])} workspace setting(s)"] if doc["workspaceChanges"] else []
    summary = ", ".join([*(f"{counts[action]} to {action}" for action in ("add", "update", "remove", "adopt")
                           if counts[action]), *settings_changed])
    if applied:
        say(f"applied {doc['file']}: {summary or 'the record of the last apply (no job changed)'}")
    elif doc["pending"]:
        say(f"plan for {doc['file']}: {summary or 'the record of the last apply changes'} "
            "(`sxctl cron apply` makes them)")
    else:
        say(f"no changes: the store matches {doc['file']}")


def _compact(value) -> str:
    """A workspace setting as one line of JSON (`null`: not set)."""
    import json

    return json.dumps(value, separators=(", ", ": "))


@click.command("plan", cls=Command)
@_FILE
@_PRUNE
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 11 when apply would change something, 0 when nothing (for CI gates; errors keep theirs).")
@click.option("--max-jobs", type=click.IntRange(1), default=100, show_default=True,
              help="Authored job capacity (as `cron apply --max-jobs`).")
def plan(file, prune, detailed_exitcode, max_jobs) -> int:
    """Show what `cron apply` would change, and write nothing.

    Jobs to add, to update (each key, old -> new) and to remove, the jobs made by hand (never
    touched), and the drift from the last apply (jobs edited or removed by hand).

    \b
    Examples:
      sxctl cron plan
      sxctl cron plan -f deploy/sxctl.toml --prune --detailed-exitcode
    """
    result = plan_schedule(file, prune=prune, agent=settings().agent, max_jobs=max_jobs, clock=settings().clock,
                           report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: _say_plan(result, applied=False))
    return ExitStatus.CHANGES_PENDING if detailed_exitcode and result.plan.pending else ExitStatus.OK


@click.command("apply", cls=Command, mutating=True)
@_FILE
@_PRUNE
@click.option("--dry-run", is_flag=True, help="Show the plan; write nothing.")
@click.option("--max-jobs", type=click.IntRange(1), default=100, show_default=True, help="Authored job capacity.")
@lock_wait_option
def apply(file, prune, dry_run, max_jobs, lock_wait_s) -> None:
    """Make the store match the schedule file: all of it in one transaction, or nothing.

    A job whose schedule did not change keeps its next run, claims, counts and history; a
    second apply changes no byte (and, with -q, prints nothing). Only jobs an apply made are
    managed: --prune removes those the file no longer has, and jobs made by hand are never touched.

    \b
    Examples:
      sxctl cron apply
      sxctl cron apply -f deploy/sxctl.toml --prune
    """
    result = apply_schedule(file, prune=prune, dry_run=dry_run, max_jobs=max_jobs, lock_wait=lock_wait_s,
                            agent=settings().agent, clock=settings().clock, report=reporter(), **in_workspace())
    if settings().quiet and not result.plan.pending and not settings().json:
        return  # -q: a run from cron that changed nothing prints nothing (and mails nothing)
    emit(result.to_json(), lambda: _say_plan(result, applied=result.applied))


@click.command("dump", cls=Command)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the schedule file here (atomically) instead of to standard output.")
def dump(output) -> None:
    """Write today's jobs as a schedule file that `cron apply` turns back into the same store.

    A ping URL is a secret: the file names an environment variable for it (set it before
    apply). Built-in jobs and jobs with targets `cron add` cannot make are left out, and said.

    \b
    Examples:
      sxctl cron dump > sxctl.toml
      sxctl cron dump -o deploy/sxctl.toml
    """
    result = dump_schedule(output, **in_workspace())
    for line in result.left_out:
        reporter().warn(f"left out {line}")
    for variable in result.variables:
        reporter().note(f"set {variable} to the job's ping URL before `sxctl cron apply`")

    def human() -> None:
        if result.output is None:
            click.echo(result.text, nl=False)
        else:
            say(f"wrote {result.output}")

    emit(result.to_json(), human)

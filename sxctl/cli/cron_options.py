"""The options of `cron add` and `cron update`, and the one place that turns them into a
`JobSpec`."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..errors import UsageError
from .output import completing, read_text_input


def _schedule_options(command):
    options = [
        click.option("--cron", "cron_expr", metavar="EXPR",
                     help="Cron expression: 5 fields, 6 (seconds first) or @daily…"),
        click.option("--every", metavar="DURATION", help="Fixed period, e.g. 30m (a bare number is seconds)."),
        click.option("--at", "at_time", metavar="TIME", help="One shot at an ISO 8601 time."),
        click.option("--in", "in_time", metavar="DURATION", help="One shot after this long."),
        click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
                     help="IANA zone for --cron (default UTC) and naive --at/--anchor times."),
        click.option("--fold", type=click.Choice(["earlier", "later"]), help="Which instant of an ambiguous --at."),
        click.option("--anchor", metavar="TIME", help="Phase of --every (default now)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _schedule_input(cron_expr, every, at_time, in_time, tz, fold, anchor):
    from ..cron.schedule import ScheduleInput

    return ScheduleInput(cron=cron_expr, every=every, at=at_time, in_=in_time, tz=tz, fold=fold, anchor=anchor)


def _job_options(command):
    options = [
        click.option("--payload", metavar="KIND", help="agent-turn, delivery or heartbeat-event."),
        click.option("--text", "--message", "text", metavar="TEXT", help="The message (for every kind)."),
        click.option("--text-file", type=click.Path(dir_okay=False, path_type=Path), help="Read the text from FILE."),
        click.option("--wake-mode", type=click.Choice(["now", "next-heartbeat"]), help="Heartbeat only (default now)."),
        click.option("--model", metavar="NAME", help="Agent turn only."),
        click.option("--timeout-seconds", type=int, help="Agent turn time limit (1-86400)."),
        click.option("--wake-gate", type=click.Path(dir_okay=False, path_type=Path),
                     help="Agent turn: a JS/TS script that decides whether the turn is needed."),
        click.option("--wake-gate-language", type=click.Choice(["js", "ts"])),
        click.option("--wake-gate-timeout", type=int, metavar="SECONDS", help="1-300 (default 30)."),
        click.option("--to", "to", metavar="SESSION|live",
                     help="Target session for agent turns and deliveries (default live; update: kept)."),
        click.option("--to-project", metavar="DIR", type=click.Path(file_okay=False, path_type=Path),
                     help="Target project (default this project; update: kept). Stored relative to the workspace "
                          "('.' for its own project), so a copied, moved or mounted workspace sends to its own "
                          "projects; a project outside the workspace stays absolute."),
        click.option("--tenant", help="conversationScope tenant (default 'default'; update: kept)."),
        click.option("--max-dependency-errors", type=click.IntRange(0), metavar="N"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _policy_options(command):
    """sxctl's own per-job settings (kept in .scheduler/sxctl-policy.json, beside the store)."""
    from .output import DURATION

    options = [
        click.option("--hold-max", "hold_max", type=DURATION, metavar="DURATION",
                     help="A due run waits this long for a live agent, then is given up (default 24h)."),
        click.option("--catch-up", "catch_up", type=click.Choice(["once", "skip"]),
                     help="Missed occurrences: once = one catch-up run (default); skip = skip stale ones."),
        click.option("--stale-after", "stale_after", type=DURATION, metavar="DURATION",
                     help="With --catch-up skip: an occurrence later than this is not run."),
        click.option("--missed-note/--no-missed-note", "missed_note", default=None,
                     help="End a catch-up run's message with what it stands for (default on)."),
        click.option("--max-unconsumed", type=click.IntRange(0, 1000), metavar="N",
                     help="Pause the job when its last N messages are all unread (0: no limit)."),
        click.option("--max-runs-per-day", type=click.IntRange(0, 100_000), metavar="N",
                     help="Skip runs beyond N a day, in the job's zone (0: no limit)."),
        click.option("--until", metavar="TIME|none", help="Recurring: pause (expired) after this time."),
        click.option("--max-runs", type=click.IntRange(0), metavar="N",
                     help="Recurring: pause (expired) after N runs (0: no limit)."),
        click.option("--active-hours", metavar="HH:MM-HH:MM|none",
                     help="Run only in these hours of the job's zone; others are skipped."),
        click.option("--active-days", metavar="DAYS|none", help="With --active-hours: e.g. mon-fri or sat,sun."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _job_spec(kw: dict):
    from ..cron.jobs import JobSpec, Target, WakeGate
    from ..cron.policy import PolicyOptions

    text = kw.get("text")
    if kw.get("text_file") is not None:
        if text is not None:
            raise UsageError("give the text either with --text or with --text-file, not both")
        # a job's text is at most 64 KiB of characters; the read stops just past that in bytes
        text = read_text_input(kw["text_file"], 4 * 64 * 1024 + 2, "--text-file")
    target = None
    if kw.get("to") is not None or kw.get("to_project") is not None or kw.get("tenant") is not None:
        project = os.path.realpath(kw["to_project"]) if kw.get("to_project") else None
        target = Target(project, kw.get("to"), kw.get("tenant"))  # None: kept on update, else the default
    gate = None
    if kw.get("wake_gate") is not None:
        gate = WakeGate.from_file(kw["wake_gate"], kw.get("wake_gate_language"), kw.get("wake_gate_timeout"))
    elif kw.get("wake_gate_language") or kw.get("wake_gate_timeout"):
        raise UsageError("--wake-gate-language and --wake-gate-timeout need --wake-gate FILE")
    return JobSpec(
        schedule=_schedule_input(kw.get("cron_expr"), kw.get("every"), kw.get("at_time"), kw.get("in_time"),
                                 kw.get("tz"), kw.get("fold"), kw.get("anchor")),
        payload=kw.get("payload"), text=text, wake_mode=kw.get("wake_mode"),
        session_strategy=kw.get("session_strategy"), max_history_turns=kw.get("max_history_turns"),
        continuation=kw.get("continuation"), model=kw.get("model"), timeout_seconds=kw.get("timeout_seconds"),
        wake_gate=gate, no_wake_gate=kw.get("no_wake_gate", False), target=target,
        max_dependency_errors=kw.get("max_dependency_errors"), paused=kw.get("paused", False),
        resumed=kw.get("resumed", False), new_name=kw.get("new_name"),
        policy=PolicyOptions(**{name: kw.get(name) for name in (
            "hold_max", "catch_up", "stale_after", "missed_note", "max_unconsumed", "max_runs_per_day", "until",
            "max_runs", "active_hours", "active_days")}),
    )

"""The options the cron commands share (`--lock-wait`, `--max-log-bytes`, the schedule, job and
policy options of `cron add` and `cron update`), and how a cron command shows a time."""

from __future__ import annotations

from pathlib import Path

import click

from ...api.times import format_relative_ms, shown_time
from ..output import DURATION, WHOLE_SECONDS, completing, settings


def schedule_options(command):
    options = [
        click.option("--cron", "cron_expr", metavar="EXPR",
                     help="Cron expression: 5 fields, 6 (seconds first) or @daily…"),
        click.option("--every", metavar="DURATION",
                     help="Fixed period, e.g. 30m (a bare number is seconds), counted from now unless --anchor."),
        click.option("--at", "at_time", metavar="TIME", help="One shot at an ISO 8601 time."),
        click.option("--in", "in_time", metavar="DURATION", help="One shot after this long."),
        click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
                     help="IANA zone for --cron (default UTC) and naive --at/--anchor times."),
        click.option("--fold", type=click.Choice(["earlier", "later"]), help="Which instant of an ambiguous --at."),
        click.option("--anchor", metavar="TIME", help="When --every counts from (default now, to the millisecond); "
                     "e.g. 2026-12-01T09:00 puts --every 15m on :00, :15, :30, :45."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def job_options(command):
    options = [
        click.option("--payload", metavar="KIND", help="agent-turn, delivery or heartbeat-event."),
        click.option("--text", "--message", "text", metavar="TEXT", help="The message (for every kind)."),
        click.option("--text-file", type=click.Path(dir_okay=False, path_type=Path), help="Read the text from FILE."),
        click.option("--wake-mode", type=click.Choice(["now", "next-heartbeat"]), help="Heartbeat only (default now)."),
        click.option("--model", metavar="NAME", help="Agent turn only."),
        click.option("--timeout-seconds", type=WHOLE_SECONDS, metavar="DURATION",
                     help="Agent turn time limit, whole seconds 1s-24h (e.g. 90, 10m)."),
        click.option("--wake-gate", type=click.Path(dir_okay=False, path_type=Path),
                     help="Agent turn: a JS/TS script that decides whether the turn is needed."),
        click.option("--wake-gate-language", type=click.Choice(["js", "ts"])),
        click.option("--wake-gate-timeout", type=WHOLE_SECONDS, metavar="DURATION",
                     help="Whole seconds 1s-5m (default 30s)."),
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


def policy_options(command):
    """sxctl's own per-job settings (kept in .scheduler/sxctl-policy.json, beside the store)."""
    options = [
        click.option("--hold-max", "hold_max", type=DURATION, metavar="DURATION",
                     help="A due run waits this long for a live agent, then is given up (default 24h), "
                     "counted from the latest occurrence it stands for: a job whose hold is longer than its "
                     "period waits while the agent is away, then sends one catch-up. 0 does not wait: with no "
                     "live agent the occurrence is given up at once (0 is no wait, not no limit)."),
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
        click.option("--until", metavar="TIME|none",
                     help="Recurring: pause (expired) after this time; nothing is sent after it, not a "
                     "catch-up either (a run --jitter would send later goes a minute before)."),
        click.option("--max-runs", type=click.IntRange(0), metavar="N",
                     help="Recurring: pause (expired) after N runs (0: no limit)."),
        click.option("--active-hours", metavar="HH:MM-HH:MM|none",
                     help="Run only in these hours of the job's zone: an occurrence outside them, or one a pass "
                     "would send outside them, is skipped (a run --jitter would send after its span ends "
                     "goes a minute before the end)."),
        click.option("--active-days", metavar="DAYS|none",
                     help="Days it may run, e.g. mon-fri or sat,sun (in the job's zone; all day without "
                     "--active-hours)."),
        click.option("--overlap", type=click.Choice(["skip", "queue", "replace"]),
                     help="When a run is due and the job's previous message is still unread: queue = send "
                     "anyway (default); skip = skip the run; replace = retract the unread one, send the new one."),
        click.option("--jitter", type=DURATION, metavar="DURATION",
                     help="Delay each run by a fixed offset in [0, DURATION) derived from the job id, so that "
                     "jobs due together do not start together (0: none). It must be shorter than the shortest "
                     "time between two runs over the coming year, DST changes included. A run it would move past "
                     "--until or the end of its occurrence's active span goes a minute before instead."),
        click.option("--host", metavar="NAME|any",
                     help="Run the job only from passes on this host (SXCTL_HOST, else the host name); "
                     "any (default): every host's pass may run it."),
        click.option("--ping-url", "ping_url", metavar="URL|none",
                     help="Push monitoring: POST URL/start when a run starts, URL when it succeeded, URL/fail "
                     "when it failed (Healthchecks.io semantics; http or https; shown masked)."),
        click.option("--ping-on", "ping_on", type=click.Choice(["written", "read"]),
                     help="When the success ping is sent: written = when the run wrote its message (default); read "
                     "= when a pass first sees the agent read it (URL/fail if its --read-within or --expires passes "
                     "first)."),
        click.option("--expires", type=DURATION, metavar="DURATION",
                     help="Withdraw each run's message if it is still unread this long after it was sent (by the "
                     "next pass; the run's receipt says expired). 0: never."),
        click.option("--read-within", "read_within", type=DURATION, metavar="DURATION",
                     help="Report each run's message unread this long after it was sent (status and doctor warn, "
                     "metrics; with --ping-on read, URL/fail). 0: no deadline."),
        *guard_options(job=True),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def guard_options(*, job: bool) -> list:
    """The spend guards' flags (`cron add/update` and `cron budget set`), read from the agent's own
    usage figures in its stats.json."""
    whose = "" if job else " (every job without its own)"
    return [
        click.option("--rate-limit-ceiling", type=click.FloatRange(0, 1), metavar="FRACTION",
                     help=f"Hold a due run while the live session's rl_5h or rl_7d is at or above this{whose} "
                     "(0: none)."),
        click.option("--max-session-tokens", type=click.IntRange(0), metavar="N",
                     help=f"Hold a due run while the session's usage.total_tokens is at or above N{whose} (0: none)."),
        click.option("--max-tokens-per-day", type=click.IntRange(0), metavar="N",
                     help=f"Skip runs once the tokens attributed to the job's runs reach N a day{whose} (0: none)."),
        click.option("--on-missing-usage", type=click.Choice(["run", "hold", "default"]),
                     help="When a guard's figure cannot be read: run (default) or hold."),
    ]


def max_log_option(command):
    return click.option("--max-log-bytes", type=int, metavar="N",
                        help="Ledger byte ceiling (default 2,000,000; SXCTL_MAX_LOG_BYTES).")(command)


def lock_wait_option(command):
    return click.option("--lock-wait", "lock_wait_s", type=DURATION, default="10", show_default=True,
                        metavar="DURATION", help="How long to wait for the store lock (then exit 4).")(command)


def when(ms: int | None, zone=None) -> str:
    """A time as a cron command shows it: in the display zone (`zone`, else local), labelled, and
    relative to now."""
    if ms is None:
        return "-"
    return f"{shown_time(ms, zone)} ({format_relative_ms(ms, settings().clock.now_ms())})"

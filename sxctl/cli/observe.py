"""`sxctl status`, `sxctl next` and `sxctl watch`: everything the agent will do, in one view."""

from __future__ import annotations

import os
import select
import signal
import sys
import termios
import time
import tty

import click

from ..api.times import format_duration_ms, format_relative_ms, shown_time
from .cron.options import max_log_option
from .output import DURATION, Command, completing, emit, in_session, markup, say, settings, table
from .render import json_line


def _where() -> dict:
    """The API keywords of the three views: the session and the workspace."""
    return {**in_session(), "workspace": settings().workspace}


def _when(ms: int | None) -> str:
    return "-" if ms is None else format_relative_ms(ms, settings().clock.now_ms())


@click.command("status", cls=Command)
def status() -> None:
    """One screen: session liveness, timers, inbox, cron jobs and runs, and the problems found
    (among them messages and timers stranded in a session no agent reads, with the fix).

    \b
    Examples:
      sxctl status
      sxctl status --json | jq '.problems[].message'
    """
    from ..api import project_status
    result = project_status(**_where())
    doc = result.to_json()

    def human() -> None:
        if result.session is None:
            say("session  none (no session folder yet)")
            _cron_lines(doc)
            return
        live = doc["liveness"]
        age = f"stats {format_duration_ms(live['stats_age_ms'])} old" if live["stats_age_ms"] is not None \
            else "no stats.json"
        say(f"session  {doc['session']}  {live['state']} ({age})")
        timers = doc["timers"]
        if "invalid" in timers:
            say(f"timers   callbacks.json unreadable: {timers['invalid']}")
        else:
            say(f"timers   {timers['active']}/{timers['capacity']} active"
                + (", PAUSED" if timers["paused"] else "")
                + (f", next fire {_when(timers['next_fire_ms'])}" if timers["next_fire_ms"] else "")
                + ("" if timers["file_exists"] else " (no callbacks.json)"))
        inbox = doc["inbox"]
        oldest = f", oldest {format_duration_ms(inbox['oldest_pending_age_ms'])}" \
            if inbox["oldest_pending_age_ms"] is not None else ""
        say(f"inbox    {inbox['pending']} pending{oldest}, {inbox['consumed_last_hour']} consumed in the last hour")
        say(f"usage    {doc['usage']['line']}")
        _cron_lines(doc)

    emit(doc, human)


def _due_job(cron: dict) -> str:
    """Which job is next due, and its mark (`waits for agent`, `overdue`, …) as `cron list` shows it."""
    if not cron.get("next_due_job"):
        return ""
    return f" ({cron['next_due_job']}{', ' + cron['next_due_mark'] if cron.get('next_due_mark') else ''})"


def _cron_lines(doc: dict) -> None:
    """The cron part of `status` and its problems."""
    from ..api.cron_checks import describe_consumption  # the cron part of the API loads with a cron section

    cron = doc["cron"]
    if cron.get("store_exists"):
        states = ", ".join(f"{n} {s}" + (f" ({len(cron['waiting'])} of them waiting for the agent)"
                                           if s == "scheduled" and cron.get("waiting") else "")
                           for s, n in sorted(cron["jobs_by_state"].items())) or "no jobs"
        due = _when(cron["next_due_ms"]) + _due_job(cron)
        say(f"cron     {states}; {cron['active_claims']} active claim(s); next due {due}")
        for run in cron["last_runs"]:
            read = describe_consumption(run.get("consumption"))
            say(f"         {run['name'] or run['executionId'][:8]}: {run['status']}{', ' + read if read else ''} "
                f"({run['trigger']}, {_when(run['startedAtMs'])})")
    elif "invalid" in cron:
        name = os.path.basename(cron["invalid_file"] or "store")
        say(f"cron     {name} {'unreadable' if cron['refused'] else 'invalid'}")
    else:
        say("cron     no store")
    shown: dict[str, int] = {}
    for problem in doc["problems"]:  # a few of each kind: 1,000 jobs waiting for the agent are not 1,000 lines
        shown[problem["code"]] = shown.get(problem["code"], 0) + 1
        if shown[problem["code"]] <= PROBLEMS_OF_A_KIND:
            say(f"problem  {problem['message']}")
    for code, count in shown.items():
        if count > PROBLEMS_OF_A_KIND:
            say(f"problem  … and {count - PROBLEMS_OF_A_KIND} more {code} (`sxctl status --json` lists every one)")


PROBLEMS_OF_A_KIND = 5  # the problems of one kind `status` prints; --json has them all


@click.command("metrics", cls=Command)
@max_log_option
def metrics(max_log_bytes: int | None) -> None:
    """The project's state in the Prometheus text format (0.0.4): jobs by state, the last pass's
    age per host, runs by status and receipt, pending and stranded messages, overdue jobs, limits
    hit, whether the agent is live. The numbers are those of `sxctl status`.

    \b
    Examples:
      sxctl metrics
      sxctl cron tick --metrics-file /var/lib/node_exporter/textfile/myapp.prom   # after each pass
    """
    from ..api import project_metrics
    result = project_metrics(max_log_bytes=max_log_bytes, **_where())
    emit(result.to_json(), lambda: say(result.text.removesuffix("\n"), lines=True))


@click.command("next", cls=Command)
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Show times in this zone (default: local).")
def next_(count: int, tz: str | None) -> None:
    """One time-ordered preview of what will happen: pending messages, timer fires, cron fires.

    Timer fires assume an idle agent; cron rows carry DST notes.

    \b
    Examples:
      sxctl next
      sxctl next -n 20 --json | jq -r '.rows[] | [.source, .at_ms] | @tsv'
    """

    from ..api import upcoming
    result = upcoming(count=count, tz=tz, **_where())
    rows, zone, now = result.rows, result.zone, result.now_ms

    def what(row: dict) -> str:
        if row["source"] == "inbox":
            return f"message {row['stem']} ({row['mode']}): {row['preview']}"
        if row["source"] == "callback":
            return f"timer [{row['slot']}] \"{row['message']}\" (fire {row['fire_no']})"
        return f"cron {row['name']}"

    def note(row: dict) -> str:
        notes = []
        if row["source"] == "inbox":
            notes.append("at the next poll" if row["agent_live"] else "when an agent runs (none is live)")
        if row.get("idle_only"):
            notes.append("if idle")
        if row.get("mark"):  # the job's timeline mark, as `cron list` and `cron next` show it
            notes.append(row["mark"])
        for flag in ("paused", "dst") if row["source"] == "cron" else ("overdue", "paused", "dst"):
            if row.get(flag) and flag != row.get("mark"):
                notes.append(flag)
        if row.get("held"):
            notes.append(row["held"])
        if row.get("note"):
            notes.append(f"after {row['note']}")
        return ", ".join(notes)

    def human() -> None:
        if not rows:
            say("nothing scheduled")
        else:
            table(["WHEN", "IN", "SOURCE", "WHAT", "NOTE"], [
                [shown_time(r["at_ms"], zone),
                 _when(r["at_ms"]) if r["at_ms"] > now or r["source"] == "cron"  # a late run: how late, as cron next
                 else ("now" if r.get("agent_live", True) else "-"),
                 r["source"], what(r), note(r)] for r in rows])
        for entry in result.stranded:  # what will not happen where it is
            say(f"stranded  {entry.describe()}; fix: {' && '.join(entry.fixes())}")

    emit(result.to_json(), human)


@click.command("watch", cls=Command, streams="always")
@click.option("--duration", "duration_s", type=DURATION, metavar="DURATION",
              help="Stop after this long (default: until interrupted).")
def watch_command(duration_s: float | None) -> None:
    """Watch timers count down, messages arrive and get consumed, and cron runs land.

    A live full-screen view on a terminal (q or Ctrl-C to quit); with --json, or when standard
    output is not a terminal (a pipe, a file), a stream of JSON Lines events for monitors, one
    per line (inotify where available, polling otherwise).

    \b
    Examples:
      sxctl watch
      sxctl watch --json | while read -r event; do echo "$event" | jq -c 'select(.event=="cron_run")'; done
    """
    from ..api import watch

    watching = watch(**_where())
    deadline = None if duration_s is None else time.monotonic() + duration_s
    if settings().json or not sys.stdout.isatty():
        _stream(watching, deadline)
    else:
        _live(watching, deadline)


def _stream(watching, deadline) -> None:
    try:
        for events in watching.events():
            for event in events:
                sys.stdout.write(json_line(event))
            sys.stdout.flush()
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass


def _live(watching, deadline) -> None:
    """The rich view, redrawn four times a second; it restores the terminal on every exit.

    Ctrl-C is held back (blocked) while the view sets the terminal up and while it restores it,
    and taken only inside the loop: an interrupt that lands in the middle of either would leave
    the terminal in the alternate screen, or the view running."""

    from rich.live import Live  # rich loads only to draw a live terminal view

    interrupt = {signal.SIGINT}
    log: list[str] = []
    current = watching.look()
    stdin = sys.stdin.fileno()
    saved = termios.tcgetattr(stdin) if sys.stdin.isatty() else None
    signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)
    try:
        if saved is not None:
            tty.setcbreak(stdin)
        live = Live(_render(watching, log), screen=True, auto_refresh=False)
        live.start(refresh=True)
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupt)  # a Ctrl-C held back arrives here
            while deadline is None or time.monotonic() < deadline:
                ready, _, _ = select.select([sys.stdin], [], [], 0.25)
                if ready and os.read(stdin, 1) in (b"q", b"Q"):
                    break
                later = watching.look(current)
                for event in watching.changes(current, later):
                    log.append(_event_line(event))
                current = later
                del log[:-8]
                live.update(_render(watching, log), refresh=True)
        except KeyboardInterrupt:
            pass
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)
            live.stop()
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        if signal.SIGINT in signal.sigpending():  # pressed again while quitting: already done
            signal.sigwait(interrupt)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupt)


def _event_line(event: dict) -> str:

    when = shown_time(event["ts_ms"], None, "%H:%M:%S")
    details = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "ts_ms"))
    return f"{when} {event['event']} {details}"


def _render(watching, log: list[str]):
    from rich.console import Group  # rich: see _live
    from rich.panel import Panel
    from rich.table import Table

    doc = watching.status()
    rows = watching.upcoming(8)
    live = doc["liveness"]
    header = (f"[bold]{markup(doc['session'])}[/bold]  {live['state']}  ·  timers {doc['timers'].get('active')}/8"
              f"  ·  inbox {doc['inbox']['pending']} pending  ·  press q to quit")
    upcoming = Table("IN", "SOURCE", "WHAT", box=None, expand=True)
    for row in rows:
        what = row.get("preview") or row.get("message") or row.get("name") or ""
        upcoming.add_row(_when(row["at_ms"]), row["source"], markup(str(what)))
    events = "\n".join(markup(line) for line in log) or "(no changes yet)"
    problems = "\n".join(markup(p["message"]) for p in doc["problems"]) or "none"
    return Group(Panel(header, title="sxctl watch"), Panel(upcoming, title="next"),
                 Panel(events, title="recent changes"), Panel(problems, title="problems"))

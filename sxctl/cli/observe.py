"""`sxctl status`, `sxctl next` and `sxctl watch`: everything the agent will do, in one view."""

from __future__ import annotations

import os
import sys
import time

import click

from .output import DURATION, Command, completing, emit, reporter, say, settings, table


def _context(session_optional: bool = False):
    """The session and workspace the three views look at (neither is ever created); with
    `session_optional`, a project without a session folder yet gives None."""
    from ..cron.store import find_workspace
    from ..errors import NotFoundError
    from .output import current_project, current_session

    try:
        session = current_session(reporter())
    except NotFoundError as error:
        if not session_optional or error.code != "session_not_found" or settings().session:
            raise
        session = None
    ws = find_workspace(settings().workspace, os.environ, current_project)
    return session, ws


def _when(ms: int | None) -> str:
    from ..timeparse import format_relative_ms

    return "-" if ms is None else format_relative_ms(ms, settings().clock.now_ms())


@click.command("status", cls=Command)
def status() -> None:
    """One screen: session liveness, timers, inbox, cron jobs and runs, and the problems found.

    \b
    Examples:
      sxctl status
      sxctl status --json | jq '.problems[].message'
    """
    from ..observe import status as build_status
    from ..timeparse import format_duration_ms

    session, ws = _context(session_optional=True)
    doc = build_status(session, ws, clock=settings().clock)

    def human() -> None:
        if session is None:
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
        _cron_lines(doc)

    emit(doc, human)


def _cron_lines(doc: dict) -> None:
    """The cron part of `status` and its problems."""
    cron = doc["cron"]
    if cron.get("store_exists"):
        states = ", ".join(f"{n} {s}" for s, n in sorted(cron["jobs_by_state"].items())) or "no jobs"
        say(f"cron     {states}; {cron['active_claims']} active claim(s); next due {_when(cron['next_due_ms'])}")
        for run in cron["last_runs"]:
            say(f"         {run['name'] or run['executionId'][:8]}: {run['status']} ({run['trigger']}, "
                f"{_when(run['startedAtMs'])})")
    elif "invalid" in cron:
        say("cron     store invalid")
    else:
        say("cron     no store")
    for problem in doc["problems"]:
        say(f"problem  {problem['message']}")


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

    from ..observe import merged_next
    from ..timeparse import format_ms, load_zone, local_zone

    session, ws = _context()
    zone = load_zone(tz) if tz else local_zone()
    rows = merged_next(session, ws, count, zone, clock=settings().clock)
    now = settings().clock.now_ms()

    def what(row: dict) -> str:
        if row["source"] == "inbox":
            return f"message {row['stem']} ({row['mode']}): {row['preview']}"
        if row["source"] == "callback":
            return f"timer [{row['slot']}] \"{row['message']}\" (fire {row['fire_no']})"
        return f"cron {row['name']}"

    def note(row: dict) -> str:
        notes = []
        if row["source"] == "inbox":
            notes.append("at the next poll")
        if row.get("idle_only"):
            notes.append("if idle")
        for flag in ("overdue", "paused", "dst"):
            if row.get(flag):
                notes.append(flag)
        return ", ".join(notes)

    def human() -> None:
        if not rows:
            say("nothing scheduled")
            return
        table(["WHEN", "IN", "SOURCE", "WHAT", "NOTE"], [
            [format_ms(r["at_ms"], "%Y-%m-%d %H:%M:%S", zone),
             _when(r["at_ms"]) if r["at_ms"] > now else "now", r["source"], what(r), note(r)] for r in rows])

    emit({"ok": True, **session.to_json(), "now_ms": now, "rows": rows}, human)


@click.command("watch", cls=Command)
@click.option("--duration", "duration_ms", type=DURATION, metavar="SECONDS",
              help="Stop after this long (default: until interrupted).")
def watch(duration_ms: int | None) -> None:
    """Watch timers count down, messages arrive and get consumed, and cron runs land.

    A live full-screen view on a terminal (q or Ctrl-C to quit); with --json, a stream of JSON
    Lines events for monitors (inotify where available, polling otherwise).

    \b
    Examples:
      sxctl watch
      sxctl watch --json | while read -r event; do echo "$event" | jq -c 'select(.event=="cron_run")'; done
    """
    session, ws = _context()
    deadline = None if duration_ms is None else time.monotonic() + duration_ms / 1000
    if settings().json or not sys.stdout.isatty():
        _stream(session, ws, deadline)
    else:
        _live(session, ws, deadline)


def _stream(session, ws, deadline) -> None:
    from ..observe import dumps, watch_events

    try:
        for events in watch_events(session, ws, clock=settings().clock):
            for event in events:
                sys.stdout.write(dumps(event) + "\n")
            sys.stdout.flush()
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass


def _live(session, ws, deadline) -> None:
    """The rich view, redrawn four times a second; it restores the terminal on every exit.

    Ctrl-C is held back (blocked) while the view sets the terminal up and while it restores it,
    and taken only inside the loop: an interrupt that lands in the middle of either would leave
    the terminal in the alternate screen, or the view running."""
    import select
    import signal
    import termios
    import tty

    from rich.live import Live

    from ..observe import diff, snapshot

    interrupt = {signal.SIGINT}
    log: list[str] = []
    current = snapshot(session, ws, settings().clock)
    stdin = sys.stdin.fileno()
    saved = termios.tcgetattr(stdin) if sys.stdin.isatty() else None
    signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)
    try:
        if saved is not None:
            tty.setcbreak(stdin)
        live = Live(_render(session, ws, log), screen=True, auto_refresh=False)
        live.start(refresh=True)
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupt)  # a Ctrl-C held back arrives here
            while deadline is None or time.monotonic() < deadline:
                ready, _, _ = select.select([sys.stdin], [], [], 0.25)
                if ready and os.read(stdin, 1) in (b"q", b"Q"):
                    break
                later = snapshot(session, ws, settings().clock, current)
                for event in diff(current, later, settings().clock.now_ms()):
                    log.append(_event_line(event))
                current = later
                del log[:-8]
                live.update(_render(session, ws, log), refresh=True)
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

    from ..timeparse import format_ms

    when = format_ms(event["ts_ms"], "%H:%M:%S", None)
    details = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "ts_ms"))
    return f"{when} {event['event']} {details}"


def _render(session, ws, log: list[str]):
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table

    from ..observe import status as build_status

    doc = build_status(session, ws, clock=settings().clock)
    rows = _upcoming(session, ws)
    live = doc["liveness"]
    header = (f"[bold]{doc['session']}[/bold]  {live['state']}  ·  timers {doc['timers'].get('active')}/8"
              f"  ·  inbox {doc['inbox']['pending']} pending  ·  press q to quit")
    upcoming = Table("IN", "SOURCE", "WHAT", box=None, expand=True)
    for row in rows:
        what = row.get("preview") or row.get("message") or row.get("name") or ""
        upcoming.add_row(_when(row["at_ms"]), row["source"], str(what))
    events = "\n".join(log) or "(no changes yet)"
    problems = "\n".join(p["message"] for p in doc["problems"]) or "none"
    return Group(Panel(header, title="sxctl watch"), Panel(upcoming, title="next"),
                 Panel(events, title="recent changes"), Panel(problems, title="problems"))


def _upcoming(session, ws) -> list[dict]:

    from ..observe import merged_next
    from ..timeparse import local_zone

    return merged_next(session, ws, 8, local_zone(), clock=settings().clock)



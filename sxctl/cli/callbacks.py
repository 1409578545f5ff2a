"""`sxctl callbacks` (alias `cb`): inspect and edit the agent's timer table, revision-safely."""

from __future__ import annotations

import click

from ..api.times import shown_time
from ..errors import UsageError
from .output import DURATION, Group, completing, emit, in_session, read_text_input, say, table


@click.group("callbacks", cls=Group)
def callbacks() -> None:
    """Schedule, inspect and cancel the agent's own timers (8 slots in callbacks.json).

    A timer's message becomes a new turn when it is due and the agent is idle.

    \b
    Examples:
      sxctl callbacks set "check the deploy job" --every 2m --repeat 30
      sxctl callbacks list
      sxctl cb cancel-all
      sxctl callbacks move          # after an agent restart: timers left in the old session
    """


@callbacks.command("list")
@click.option("--all", "all_", is_flag=True, help="Also show inactive (cancelled or retired) slots.")
def list_(all_: bool) -> None:
    """List the active timers, as the agent's /callbacks would.

    \b
    Examples:
      sxctl callbacks list
      sxctl cb list --all --json | jq '.slots[] | {id, message, fires_in_ms}'
    """
    from ..api import list_timers

    result = list_timers(include_inactive=all_, **in_session())
    emit(result.to_json(), lambda: say(result.text, lines=True))


def _verify_option(command):
    command = click.option("--no-verify", is_flag=True, help="Do not watch for a lost update after writing.")(command)
    command = click.option("--verify", "verify_s", type=DURATION, default="1", show_default=True, metavar="DURATION",
                           help="How long to watch a live agent's file for a lost update.")(command)
    return click.option("--expect-rev", type=click.IntRange(0), metavar="R",
                        help="Fail (exit 4) unless the table is at revision R.")(command)


def _write(expect_rev, verify_s, no_verify) -> dict:
    """The API keywords of a revision-safe write: the session, --expect-rev, the watch."""
    return {"expect_rev": expect_rev, "verify": None if no_verify else verify_s, **in_session()}


def _when(ms: int) -> str:
    return shown_time(ms, None, "%H:%M:%S")


@callbacks.command("set", mutating=True)
@click.argument("message")
@click.option("--every", "--delay", "every_s", type=DURATION, required=True, metavar="DURATION",
              help="Re-arm period, whole seconds 1-3600 (e.g. 30s, 2m, 1h).")
@click.option("--repeat", type=int, default=20, show_default=True,
              help="How many times it fires: 1-1000 (1 = once; 0 is taken as 1, as the agent's tool does), "
              "or -1 = forever.")
@click.option("--slot", "slot_id", type=int, help="Use this slot (0-7) instead of the lowest free one.",
              shell_complete=completing("slots"))
@click.option("--replace", is_flag=True, help="With --slot: overwrite an active timer.")
@click.option("--first-in", "first_in_s", type=DURATION, metavar="DURATION",
              help="First fire after this long (0-3600 s) instead of one period.")
@click.option("--follow", is_flag=True, help="A pinned session the agent left after a restart: "
              "set the timer in the newer live session instead (exit 4 without).")
@_verify_option
def set_(message, every_s, repeat, slot_id, replace, first_in_s, follow, expect_rev, verify_s, no_verify) -> None:
    """Arm a new timer: MESSAGE (or '-' for stdin) every DURATION, REPEAT times.

    \b
    Examples:
      sxctl callbacks set "remind me to rerun the tests" --every 20m --repeat 1
      sxctl callbacks set "poll the deploy; report when done" --every 2m --repeat 30 --first-in 0
    """
    from ..api import set_timer
    from ..api.callbacks import fires_in
    if message == "-":
        message = read_text_input(None, 4 * 2048, "the message")  # 2,048 characters at most
    result = set_timer(message, every_s, repeat=repeat, slot=slot_id, replace=replace, first_in=first_in_s,
                       follow=follow, **_write(expect_rev, verify_s, no_verify))
    slot = result.extra["slot"]

    def human() -> None:
        say(result.text, lines=True)
        say(f"  slot {slot['id']}, rev {result.rev}, first fire {_when(slot['fire_at_ms'])} "
            f"(in {fires_in(slot['fire_at_ms'], result.now_ms)})")

    emit(result.to_json(), human)


@callbacks.command("edit", mutating=True)
@click.argument("slot_id", metavar="ID", type=int, shell_complete=completing("slots"))
@click.option("--message", help="New message.")
@click.option("--every", "--delay", "every_s", type=DURATION, metavar="DURATION",
              help="New period; re-arms from now unless --first-in is given.")
@click.option("--repeat", type=int,
              help="How many fires are left, the next one included: 1-1000 (0 is taken as 1), or -1 = forever.")
@click.option("--first-in", "first_in_s", type=DURATION, metavar="DURATION", help="Next fire after this long.")
@_verify_option
def edit(slot_id, message, every_s, repeat, first_in_s, expect_rev, verify_s, no_verify) -> None:
    """Change an active timer; a message- or repeat-only edit keeps its next fire time.

    Exit 7 if the timer fired its last time (or was cancelled) while sxctl was writing.

    \b
    Examples:
      sxctl callbacks edit 0 --message "check the deploy and the smoke tests"
      sxctl callbacks edit 3 --every 5m --repeat -1
    """
    from ..api import edit_timer

    result = edit_timer(slot_id, message=message, every=every_s, repeat=repeat, first_in=first_in_s,
                        **_write(expect_rev, verify_s, no_verify))
    emit(result.to_json(), lambda: say(result.text, lines=True))


def _cancel(slot_id, expect_rev, verify_s, no_verify) -> None:
    from ..api import cancel_timers

    result = cancel_timers(slot_id, **_write(expect_rev, verify_s, no_verify))
    emit(result.to_json(), lambda: say(result.text, lines=True))


@callbacks.command("cancel", mutating=True)
@click.argument("slot_id", metavar="ID", type=int, shell_complete=completing("slots"))
@_verify_option
def cancel(slot_id, expect_rev, verify_s, no_verify) -> None:
    """Cancel one timer (it stays in the file, inactive).

    \b
    Example:
      sxctl callbacks cancel 0
    """
    _cancel(slot_id, expect_rev, verify_s, no_verify)


@callbacks.command("cancel-all", mutating=True)
@_verify_option
def cancel_all(expect_rev, verify_s, no_verify) -> None:
    """Cancel every active timer ("stop all timers before the release").

    \b
    Example:
      sxctl callbacks cancel-all --json
    """
    _cancel(None, expect_rev, verify_s, no_verify)


def _pause(paused: bool, expect_rev, verify_s, no_verify) -> None:
    from ..api import pause_timers

    result = pause_timers(paused, **_write(expect_rev, verify_s, no_verify))
    rebased = result.extra["rebased"]

    def human() -> None:
        say(result.text, lines=True)
        if paused:
            say("  nothing fires until `sxctl callbacks resume`; the agent forgets the pause when it restarts")
        elif rebased:
            say(f"  re-based overdue slot(s) {', '.join(map(str, rebased))} to now + their period")

    emit(result.to_json(), human)


@callbacks.command("pause", mutating=True)
@_verify_option
def pause(expect_rev, verify_s, no_verify) -> None:
    """Pause every timer (the agent forgets this when it restarts).

    \b
    Example:
      sxctl callbacks pause && ./release.sh && sxctl callbacks resume
    """
    _pause(True, expect_rev, verify_s, no_verify)


@callbacks.command("resume", mutating=True)
@_verify_option
def resume(expect_rev, verify_s, no_verify) -> None:
    """Resume timers; overdue ones are re-based to now + their period, as /callbacks resume does.

    \b
    Example:
      sxctl callbacks resume
    """
    _pause(False, expect_rev, verify_s, no_verify)


@callbacks.command("publish", mutating=True)
@_verify_option
def publish(expect_rev, verify_s, no_verify) -> None:
    """Write the table back as it is, with the next rev, so the running agent adopts a hand edit.

    The agent re-reads callbacks.json only when its rev changes: an edit that left rev alone is
    ignored (`callbacks list`, `status` and `doctor` say so) until this publishes it.

    \b
    Example:
      sxctl callbacks publish
    """
    from ..api import publish_timers

    result = publish_timers(**_write(expect_rev, verify_s, no_verify))
    emit(result.to_json(), lambda: say(result.text, lines=True))


@callbacks.command("move", mutating=True)
@click.option("--from", "sources", multiple=True, metavar="SESSION", shell_complete=completing("sessions"),
              help="Move only out of this session (repeatable). Default: every session of the project that is "
                   "not live.")
@click.option("--to", "to", default="live", show_default=True, metavar="live|SESSION",
              shell_complete=completing("sessions"),
              help="Into the live session, or this session (which need not be live).")
@click.option("--dry-run", is_flag=True, help="Only print what would move.")
@click.option("--verify", "verify_s", type=DURATION, default="1", show_default=True, metavar="DURATION",
              help="How long to watch a live agent's file for a lost update.")
@click.option("--no-verify", is_flag=True, help="Do not watch for a lost update after writing.")
def move(sources, to, dry_run, verify_s, no_verify) -> None:
    """Move active timers left in old sessions (an agent restart) into the live one.

    Each timer keeps its message, period, fires left and next fire time; it is added to the
    live session's table first, then cancelled in the old one (both under the revision
    protocol). Exit 4 with nothing written when they do not all fit in the 8 slots. A timer
    already there (same message and period) is not added twice.

    \b
    Examples:
      sxctl callbacks move --dry-run
      sxctl callbacks move --from 2026_09_20_cool_newton
    """
    from ..api import move_timers
    from ..api.callbacks import fires_in, list_preview

    kw = in_session()
    if kw["session"]:
        raise UsageError("--session names no session here: use --from SESSION and --to SESSION")
    result = move_timers(sources=sources, to=to, dry_run=dry_run, verify=None if no_verify else verify_s,
                         project=kw["project"], clock=kw["clock"], report=kw["report"])

    def human() -> None:
        for row in result.plan.moved:
            timer = row.timer
            left = "infinite" if timer.get("repeat_count") == -1 else f"{timer.get('repeat_count')} left"
            where = (f"already in slot {row.to_slot}" if row.action == "already_there"
                     else f"to slot {row.to_slot}")
            say(f'  [{row.slot}] "{list_preview(str(timer.get("message", "")))}" from {row.source} {where} - fires in '
                f"{fires_in(timer.get('fire_at_ms', result.now_ms), result.now_ms)} ({left})")
        say(result.text)

    emit(result.to_json(), human)


@callbacks.command("next")
@click.option("-n", "limit", type=click.IntRange(1, 10_000), default=10, show_default=True, help="How many fires.")
@click.option("--slot", "slot_id", type=int, help="Only this slot.", shell_complete=completing("slots"))
def next_(limit, slot_id) -> None:
    """Preview the next fires, assuming an idle agent and instant turns (nothing is written).

    \b
    Examples:
      sxctl callbacks next -n 5
      sxctl cb next --slot 0 --json
    """
    from ..api import preview_timers
    from ..api.callbacks import fires_in
    result = preview_timers(limit=limit, slot=slot_id, **in_session())
    fires = result.extra["fires"]

    def human() -> None:
        say(result.text + (" PAUSED" if result.paused and fires else ""), lines=True)
        if fires:
            table(
                ["SLOT", "AT", "IN", "FIRE", "LEFT", "NOTE"],
                [[f["slot"], _when(f["at_ms"]), fires_in(f["at_ms"], result.now_ms), f["fire_no"],
                  "inf" if f["remaining_after"] == -1 else f["remaining_after"],
                  "overdue: fires when idle" if f["overdue"] else ""] for f in fires],
            )

    emit(result.to_json(), human)

"""`sxctl callbacks` (alias `cb`): inspect and edit the agent's timer table, revision-safely."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from .output import (
    DURATION,
    Group,
    completing,
    current_session,
    emit,
    read_text_input,
    reporter,
    say,
    settings,
    table,
)


@click.group("callbacks", cls=Group)
def callbacks() -> None:
    """Schedule, inspect and cancel the agent's own timers (8 slots in callbacks.json).

    A timer's message becomes a new turn when it is due and the agent is idle.

    \b
    Examples:
      sxctl callbacks set "check the deploy job" --every 2m --repeat 30
      sxctl callbacks list
      sxctl cb cancel-all
    """


def _slot_json(slot: dict[str, Any], now_ms: int) -> dict[str, Any]:
    fire_at = slot.get("fire_at_ms")
    fires_in = max(0, fire_at - now_ms) if isinstance(fire_at, int) else None
    return {**slot, "fires_in_ms": fires_in}


def _document(session, doc: dict[str, Any] | None, path, exists: bool, text: str, **extra) -> dict[str, Any]:
    from ..callbacks import CAPACITY, active_ids

    doc = doc or {}
    return {
        "ok": True, **session.to_json(), "file": str(path), "file_exists": exists,
        "rev": doc.get("rev", 0), "paused": bool(doc.get("paused", False)), "capacity": CAPACITY,
        "active_count": len(active_ids(doc)) if doc else 0, **extra, "text": text,
    }


def _read_view(report):
    from ..callbacks import MISSING_FILE_WARNING, view_table

    session = current_session(report)
    view = view_table(session)
    if not view.exists:
        report.warn(MISSING_FILE_WARNING.format(id=session.id))
    return session, view


@callbacks.command("list")
@click.option("--all", "all_", is_flag=True, help="Also show inactive (cancelled or retired) slots.")
def list_(all_: bool) -> None:
    """List the active timers, as the agent's /callbacks would.

    \b
    Examples:
      sxctl callbacks list
      sxctl cb list --all --json | jq '.slots[] | {id, message, fires_in_ms}'
    """
    from ..callbacks import active_ids, doc_slots, list_text

    report = reporter()
    session, view = _read_view(report)
    now = settings().clock.now_ms()
    doc = view.winner.doc if view.winner else {}
    stats_count = ((session.stats or {}).get("callbacks") or {}).get("active_count")
    if isinstance(stats_count, int) and view.exists and stats_count != len(active_ids(doc)):
        report.note(f"stats.json reports {stats_count} active timers, callbacks.json has {len(active_ids(doc))}")
    slots = doc_slots(doc)
    shown = [slots[i] for i in sorted(slots) if all_ or i in active_ids(doc)]
    text = list_text(doc, now, include_inactive=all_)
    out = _document(session, doc, view.primary_path, view.exists, text,
                    slots=[_slot_json(s, now) for s in shown])
    emit(out, lambda: say(text))


def _verify_option(command):
    command = click.option("--no-verify", is_flag=True, help="Do not watch for a lost update after writing.")(command)
    command = click.option("--verify", "verify_s", type=DURATION, default="1", show_default=True, metavar="SECONDS",
                           help="How long to watch a live agent's file for a lost update.")(command)
    return click.option("--expect-rev", type=click.IntRange(0), metavar="R",
                        help="Fail (exit 4) unless the table is at revision R.")(command)


def _write_options(expect_rev, verify_s, no_verify, report):
    from ..callbacks import WriteOptions

    return WriteOptions(expect_rev, None if no_verify else verify_s / 1000, settings().clock, report)


def _when(ms: int) -> str:
    from ..timeparse import format_ms

    return format_ms(ms, "%H:%M:%S", None)


@callbacks.command("set", mutating=True)
@click.argument("message")
@click.option("--every", "--delay", "every_ms", type=DURATION, required=True, metavar="DURATION",
              help="Re-arm period, whole seconds 1-3600 (e.g. 30s, 2m, 1h).")
@click.option("--repeat", type=int, default=20, show_default=True, help="Number of fires; -1 = forever.")
@click.option("--slot", "slot_id", type=int, help="Use this slot (0-7) instead of the lowest free one.")
@click.option("--replace", is_flag=True, help="With --slot: overwrite an active timer.")
@click.option("--first-in", "first_in_ms", type=DURATION, metavar="DURATION",
              help="First fire after this long (0-3600 s) instead of one period.")
@_verify_option
def set_(message, every_ms, repeat, slot_id, replace, first_in_ms, expect_rev, verify_s, no_verify) -> None:
    """Arm a new timer: MESSAGE (or '-' for stdin) every DURATION, REPEAT times.

    \b
    Examples:
      sxctl callbacks set "remind me to rerun the tests" --every 20m --repeat 1
      sxctl callbacks set "poll the deploy; report when done" --every 2m --repeat 30 --first-in 0
    """
    from ..api import set_timer
    from ..callbacks import fires_in, scheduled_text

    if replace and slot_id is None:
        raise UsageError("--replace needs --slot N")
    if message == "-":
        message = read_text_input(None, 4 * 2048 + 2, "the message")  # 2,048 characters at most
    report = reporter()
    session = current_session(report)
    result = set_timer(
        message, every_ms / 1000, repeat=repeat, slot=slot_id, replace=replace,
        first_in=None if first_in_ms is None else first_in_ms / 1000, session=session, expect_rev=expect_rev,
        verify=None if no_verify else verify_s / 1000, clock=settings().clock, report=report,
    )
    slot = result.outcome
    now = result.doc["updated_ms"]
    text = scheduled_text(slot)
    out = _document(session, result.doc, result.path, True, text, action="set", verified=result.verified,
                    slot=_slot_json(slot, now))

    def human() -> None:
        say(text)
        say(f"  slot {slot['id']}, rev {result.rev}, first fire {_when(slot['fire_at_ms'])} "
            f"(in {fires_in(slot['fire_at_ms'], now)})")

    emit(out, human)


@callbacks.command("edit", mutating=True)
@click.argument("slot_id", metavar="ID", type=int, shell_complete=completing("timer_slots"))
@click.option("--message", help="New message.")
@click.option("--every", "--delay", "every_ms", type=DURATION, metavar="DURATION",
              help="New period; re-arms from now unless --first-in is given.")
@click.option("--repeat", type=int, help="New number of remaining fires; -1 = forever.")
@click.option("--first-in", "first_in_ms", type=DURATION, metavar="DURATION", help="Next fire after this long.")
@_verify_option
def edit(slot_id, message, every_ms, repeat, first_in_ms, expect_rev, verify_s, no_verify) -> None:
    """Change an active timer; a message- or repeat-only edit keeps its next fire time.

    Exit 7 if the timer fired its last time (or was cancelled) while sxctl was writing.

    \b
    Examples:
      sxctl callbacks edit 0 --message "check the deploy and the smoke tests"
      sxctl callbacks edit 3 --every 5m --repeat -1
    """
    from ..callbacks import edit_timer, fires_in

    report = reporter()
    session = current_session(report)
    result = edit_timer(
        session, slot_id, message=message, delay_ms=every_ms, repeat=repeat, first_in_ms=first_in_ms,
        options=_write_options(expect_rev, verify_s, no_verify, report),
    )
    before, after = result.outcome
    now = result.doc["updated_ms"]
    left = "infinite" if after["repeat_count"] == -1 else f"{after['repeat_count']} left"
    text = (f"Updated callback slot {slot_id}: fires every {after['delay_ms'] // 1000}s, next in "
            f"{fires_in(after['fire_at_ms'], now)} ({left}).")
    out = _document(session, result.doc, result.path, True, text, action="edit", verified=result.verified,
                    slot=_slot_json(after, now), before=before)
    emit(out, lambda: say(text))


def _cancel(slot_id, expect_rev, verify_s, no_verify) -> None:
    from ..callbacks import cancel_timers, cancelled_text, view_table

    report = reporter()
    session = current_session(report)
    if slot_id is None:
        view = view_table(session)
        if not (view.winner and view.winner.active_slots()):  # nothing to do: write nothing
            doc = view.winner.doc if view.winner else None
            out = _document(session, doc, view.primary_path, view.exists, "No active callbacks.",
                            action="cancel-all", cancelled=[])
            emit(out, lambda: say("No active callbacks."))
            return
    result = cancel_timers(session, slot_id, options=_write_options(expect_rev, verify_s, no_verify, report))
    text = cancelled_text(result.outcome, single=slot_id is not None)
    out = _document(session, result.doc, result.path, True, text,
                    action="cancel" if slot_id is not None else "cancel-all", verified=result.verified,
                    cancelled=[i for i, _ in result.outcome])
    emit(out, lambda: say(text))


@callbacks.command("cancel", mutating=True)
@click.argument("slot_id", metavar="ID", type=int, shell_complete=completing("timer_slots"))
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
    from ..callbacks import set_paused

    report = reporter()
    session = current_session(report)
    result = set_paused(session, paused, options=_write_options(expect_rev, verify_s, no_verify, report))
    if paused:
        text = "Callbacks paused."
        detail = "  nothing fires until `sxctl callbacks resume`; the agent forgets the pause when it restarts"
    else:
        text = "Callbacks resumed."
        detail = (f"  re-based overdue slot(s) {', '.join(map(str, result.outcome))} to now + their period"
                  if result.outcome else "")
    out = _document(session, result.doc, result.path, True, text, action="pause" if paused else "resume",
                    verified=result.verified, rebased=result.outcome)

    def human() -> None:
        say(text)
        if detail:
            say(detail)

    emit(out, human)


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


@callbacks.command("next")
@click.option("-n", "limit", type=click.IntRange(1, 10_000), default=10, show_default=True, help="How many fires.")
@click.option("--slot", "slot_id", type=int, help="Only this slot.")
def next_(limit, slot_id) -> None:
    """Preview the next fires, assuming an idle agent and instant turns (nothing is written).

    \b
    Examples:
      sxctl callbacks next -n 5
      sxctl cb next --slot 0 --json
    """
    from ..callbacks import check_slot_id, fires_in, preview_fires

    if slot_id is not None:
        check_slot_id(slot_id)
    report = reporter()
    session, view = _read_view(report)
    now = settings().clock.now_ms()
    doc = view.winner.doc if view.winner else {}
    fires = preview_fires(doc, now, limit, slot_id)
    paused = bool(doc.get("paused"))
    text = "No active callbacks." if not fires else f"Next {len(fires)} fire(s), if the agent is idle:"
    out = _document(session, doc, view.primary_path, view.exists, text, fires=fires)

    def human() -> None:
        say(text + (" PAUSED" if paused and fires else ""))
        if fires:
            table(
                ["SLOT", "AT", "IN", "FIRE", "LEFT", "NOTE"],
                [[f["slot"], _when(f["at_ms"]), fires_in(f["at_ms"], now), f["fire_no"],
                  "inf" if f["remaining_after"] == -1 else f["remaining_after"],
                  "overdue: fires when idle" if f["overdue"] else ""] for f in fires],
            )

    emit(out, human)



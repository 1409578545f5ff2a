"""`sxctl inbox send|list|show|wait|retract|forward|clean|prune`: drop messages into a running agent."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..api.inbox import MODES
from ..errors import UsageError
from .output import (
    DURATION,
    Group,
    completing,
    emit,
    emit_json,
    in_session,
    printable,
    read_text_input,
    say,
    settings,
    table,
)
from .plain_send import print_sent


@click.group("inbox", cls=Group)
def inbox() -> None:
    """Send messages to the agent's inbox and follow them until consumed.

    The agent reads one file per poll, in name order, and moves it to inbox/done/.

    \b
    Examples:
      sxctl inbox send "run the tests and report back" --wait 60
      sxctl inbox send --priority 3 --mode interrupt "stop: the release is frozen"
      sxctl inbox list
      sxctl inbox forward           # after an agent restart: what was sent meanwhile
    """


def _read_text(text: str | None, text_file: Path | None, has_image: bool) -> tuple[str | None, bool]:
    """(text, came from the command-line argument). `-` or a piped stdin reads stdin."""
    if text is not None and text_file is not None:
        raise UsageError("give the text either as an argument or with --text-file, not both")
    if text_file is not None:
        return read_text_input(text_file, TEXT_INPUT_LIMIT, "--text-file"), False
    if text == "-" or (text is None and not has_image and sys.stdin is not None and not sys.stdin.isatty()):
        return read_text_input(None, TEXT_INPUT_LIMIT, "the message"), False
    return text, text is not None


#: a message is at most 64,000 bytes as encoded (its text without the line break that ends it)
TEXT_INPUT_LIMIT = 64_000


@inbox.command("send", mutating=True)
@click.argument("text", required=False)
@click.option("--text-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the text from FILE ('-': stdin).")
@click.option("--mode", type=click.Choice(MODES),
              help="auto (default): interrupt if busy; interrupt: at the next tool call; "
                   "queue: after the turn. A leading '~' in TEXT means queue.")
@click.option("--image", type=click.Path(dir_okay=False, path_type=Path),
              help="Attach a png, jpg, gif or webp image (≤ 8,000,000 bytes).")
@click.option("--priority", type=click.IntRange(0, 9), help="Read before unprefixed messages, lower first.")
@click.option("--stem", help="Use this file name stem instead of the time-based one.")
@click.option("--key", help="Idempotency key: a repeat send with it returns the first message.")
@click.option("--wait", "wait_s", type=DURATION, metavar="DURATION",
              help="Wait until consumed; exit 6 if still pending then (0 = forever). Ctrl-C or SIGTERM: exit 130, "
                   "the message stays pending (`sxctl inbox retract STEM` withdraws it).")
@click.option("--no-wait", is_flag=True, help="Skip the soft 2 s wait for consumption.")
@click.option("--follow", is_flag=True, help="Follow the agent into a new session: a pinned session it left is "
              "replaced by the newer live one (exit 4 without), and with --wait the message is moved there if the "
              "agent restarts meanwhile.")
@click.option("--expires", metavar="DURATION|TIME",
              help="Withdraw the message if it is still unread then (by the next scheduler pass, `sxctl inbox "
                   "expire`, or a wait: exit 12). A message the agent took is never withdrawn.")
@click.option("--read-within", "read_within", type=DURATION, metavar="DURATION",
              help="Report the message if it is unread after this long (status and doctor warn; metrics).")
@click.option("--when-below", "when_below", metavar="PCT",
              help="Send only while the agent's rate-limit use (rl_5h, rl_7d) is below PCT (90%); above it, a "
                   "one-shot cron job holds the message and the first scheduler pass that sees the use below "
                   "PCT delivers it, once.")
def send(text, text_file, mode, image, priority, stem, key, wait_s, no_wait, follow, expires, read_within,
         when_below) -> int:
    """Drop one message (TEXT, '-' for stdin) into the session's inbox.

    Without --wait, sxctl waits up to 2 s for a live agent to consume it and exits 0 either way.

    \b
    Examples:
      sxctl inbox send "summarise the failing tests"
      sxctl inbox send "~also check the docs"          # queued after the current turn
      git log -1 --format=%B | sxctl inbox send - --key "$(git rev-parse HEAD)"
      sxctl inbox send "look at this" --image screenshot.png --wait 120 --json
      sxctl inbox send "build 812 failed: look" --expires 2h --read-within 15m
      sxctl inbox send "continue where you stopped" --when-below 90%
    """
    from ..api import send_message

    body, from_argument = _read_text(text, text_file, image is not None)
    # the `~` rule (applied by the API when no mode is given) is for text typed as an argument
    given_mode = mode if from_argument or when_below is not None else (mode or "auto")
    result = send_message(body, mode=given_mode, image=image, priority=priority, stem=stem, key=key, wait=wait_s,
                          soft_wait=not no_wait, follow=follow, expires=expires, read_within=read_within,
                          when_below=when_below, **in_session())
    if hasattr(result, "held"):  # --when-below
        return _print_gated(result)

    return print_sent(result, settings().json)


def _print_gated(result) -> int:
    if result.sent is not None:
        if not settings().json:
            return print_sent(result.sent, False)
        emit_json(result.to_json())
        return 0
    use = ", ".join(f"{name} {value:.0%}" for name, value in result.usage.items() if value is not None)
    emit(result.to_json(), lambda: say(f"held: the agent's rate-limit use is {use} (at or above {result.ceiling:.0%}); "
                                       f"cron job {result.job.outcome['name']} sends it once a pass sees it below"))
    return 0


@inbox.command("list")
@click.option("--done", is_flag=True, help="Also list consumed messages (inbox/done/): with --limit only the "
              "newest are read, without it every one (a full scan of the history).")
@click.option("--retracted", is_flag=True, help="Also list retracted messages (and expired ones: withdrawn unread "
              "when their --expires passed).")
@click.option("--all", "all_", is_flag=True, help="Pending, consumed and retracted.")
@click.option("--limit", type=click.IntRange(1), help="At most N rows.")
def list_(done, retracted, all_, limit) -> None:
    """List pending messages in the order the agent will read them.

    \b
    Examples:
      sxctl inbox list
      sxctl inbox list --all --limit 20 --json
    """
    from ..api import list_messages

    result = list_messages(consumed=done or all_, retracted=retracted or all_, limit=limit, **in_session())
    rows = result.rows

    def human() -> None:
        if not rows:
            say("no messages" if len(result.states) > 1 else "no pending messages")
            return
        table(
            ["STEM", "STATE", "MODE", "BYTES", "IMAGE", "COPY", "PREVIEW"],
            [
                [r.stem, result.state_text(r), r.message.mode if r.message else "?", r.size, r.image,
                 None if r.copy == "none" else r.copy,
                 f"(invalid: {r.invalid})" if r.invalid else r.preview.replace("\n", " ")]
                for r in rows
            ],
        )

    emit(result.to_json(), human)


@inbox.command("show")
@click.argument("stem", shell_complete=completing("stems"))
def show(stem: str) -> None:
    """Show one message: its text, mode, state and path.

    \b
    Example:
      sxctl inbox show 1789972202_061734902 --json
    """
    from ..api import show_message

    result = show_message(stem, **in_session())
    row = result.row

    def human() -> None:
        say(f"stem   {row.stem}")
        say(f"state  {result.state_text()}")
        say(f"mode   {row.message.mode if row.message else '-'}")
        say(f"path   {row.path}")
        if row.image:
            say(f"image  {row.image} sidecar")
        if row.invalid:
            say(f"invalid: {row.invalid}")
        elif row.message and row.message.text is not None:
            say("")
            say(row.message.text, lines=True)

    emit(result.to_json(), human)


@inbox.command("wait", streams="with --follow")
@click.argument("stem", required=False, shell_complete=completing("stems"))
@click.option("--key", help="Wait for the message sent with this idempotency key.")
@click.option("--timeout", "timeout_s", type=DURATION, default="60", show_default=True, metavar="DURATION",
              help="Give up after this long (exit 6); 0 waits forever.")
@click.option("--follow", is_flag=True, help="Re-home the message if the session rotates.")
def wait(stem, key, timeout_s, follow) -> None:
    """Wait until a message is consumed (exit 0), or time out (exit 6).

    Exit 4 if it was retracted meanwhile, exit 3 if no such message exists, exit 12 if its --expires
    passed unread (the wait withdraws it then, as a scheduler pass would).

    \b
    Examples:
      stem=$(sxctl inbox send "deploy" --no-wait --json | jq -r .stem)
      sxctl inbox wait "$stem" --timeout 5m
    """
    from ..api import wait_for_message

    streaming = follow and settings().json
    outcome = wait_for_message(stem, key=key, timeout=timeout_s, follow=follow,
                               on_event=emit_json if streaming else None, **in_session())
    outcome.raise_unless_consumed()
    if streaming:
        return  # the `done` event was the last line
    emit(outcome.to_json(), lambda: say(f"{outcome.stem}: consumed after {outcome.waited_ms / 1000:.1f}s"))


@inbox.command("retract", mutating=True)
@click.argument("stem", required=False, shell_complete=completing("stems"))
@click.option("--key", help="Retract the message sent with this idempotency key.")
def retract(stem, key) -> None:
    """Withdraw a message that the agent has not read yet (exit 7 if it already has).

    \b
    Examples:
      sxctl inbox retract 1789972202_061734902
      sxctl inbox retract --key nightly-2026-11-30
    """
    from ..api import retract_message

    result = retract_message(stem, key=key, **in_session())
    note = " (it was already retracted)" if result.already else ""
    emit(result.to_json(), lambda: say(f"retracted {result.stem}{note}"))


@inbox.command("expire", mutating=True)
@click.option("--dry-run", is_flag=True, help="Only print what would be withdrawn.")
def expire(dry_run) -> None:
    """Withdraw unread messages whose --expires passed, in every session of the project.

    Every scheduler pass (`sxctl cron tick`) does this; run it where none runs. A message the agent
    took is never withdrawn. It also notes messages unread past their --read-within.

    \b
    Example:
      sxctl inbox expire --dry-run
    """
    from ..api import expire_messages

    kw = in_session()
    if kw["session"]:
        raise UsageError("--session names no session here: `inbox expire` sweeps every session of the project")
    result = expire_messages(dry_run=dry_run, project=kw["project"], clock=kw["clock"], report=kw["report"])

    def human() -> None:
        verb = "would withdraw" if dry_run else "withdrew"
        for event in result.of("expired"):
            say(f"{verb} {event.stem} in {event.session}: expired unread")
        for event in result.of("missed"):
            say(f"{event.stem} in {event.session}: not read within its deadline")
        if not result.of("expired"):
            say("nothing has expired")

    emit(result.to_json(), human)


@inbox.command("clean", mutating=True)
@click.option("--older-than", "older_s", type=DURATION, default="1h", show_default=True,
              help="Only files older than this.")
@click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
def clean(older_s, dry_run) -> None:
    """Remove what crashed sxctl writers left: stray temps and orphan image sidecars.

    Only sxctl-pattern names are touched; every other file belongs to someone else.

    \b
    Example:
      sxctl inbox clean --older-than 10m --dry-run
    """
    from ..api import clean_inbox

    _print_removed(clean_inbox(older_than=older_s, dry_run=dry_run, **in_session()))


@inbox.command("prune", mutating=True)
@click.option("--older-than", "older_s", type=DURATION, default="7d", show_default=True,
              help="Only files older than this (by the time they were consumed).")
@click.option("--retracted", is_flag=True, help="Also prune inbox/retracted/.")
@click.option("--keys", is_flag=True, help="Also prune idempotency-key records.")
@click.option("--keep", type=click.IntRange(0), default=0, metavar="N",
              help="Keep the N most recently consumed messages, however old.")
@click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
def prune(older_s, retracted, keys, keep, dry_run) -> None:
    """Delete old consumed messages (never a pending one).

    A full scan of inbox/done/ (a stat per file): run it from a nightly job, not a loop.

    \b
    Examples:
      sxctl inbox prune --older-than 30d --retracted --keys
      sxctl inbox prune --older-than 0 --keep 1000     # the newest 1,000 stay
    """
    from ..api import prune_inbox

    _print_removed(prune_inbox(older_than=older_s, retracted=retracted, keys=keys, keep=keep, dry_run=dry_run,
                               **in_session()))


@inbox.command("forward", mutating=True)
@click.option("--from", "sources", multiple=True, metavar="SESSION", shell_complete=completing("sessions"),
              help="Forward only out of this session (repeatable). Default: every session of the project that "
                   "is not live.")
@click.option("--to", "to", default="live", show_default=True, metavar="live|SESSION",
              shell_complete=completing("sessions"),
              help="Into the live session, or this session (which need not be live).")
@click.option("--dry-run", is_flag=True, help="Only print what would move.")
def forward(sources, to, dry_run) -> None:
    """Move messages left pending in old sessions (an agent restart) into the live one.

    Each message moves whole, with its image and keys, in the order the agent reads them (its
    stem, priority prefix included, is kept), or not at all; a message the old agent read
    meanwhile is left alone. A forward killed at any point is finished (or undone) by the next
    one. Timers are moved with `sxctl callbacks move`.

    \b
    Examples:
      sxctl inbox forward --dry-run
      sxctl inbox forward --from 2026_09_20_cool_newton
      sxctl inbox forward --to 2026_09_21_quiet_euler --json
    """
    from ..api import forward_messages

    kw = in_session()
    if kw["session"]:
        raise UsageError("--session names no session here: use --from SESSION and --to SESSION")
    result = forward_messages(sources=sources, to=to, dry_run=dry_run, project=kw["project"], clock=kw["clock"],
                              report=kw["report"])
    result.raise_if_incomplete()

    def human() -> None:
        verb = "would forward" if dry_run else "forwarded"
        for done in result.plan.recovered:
            finished = "finished" if done.outcome == "completed" else "undid"
            say(f"{'would have ' + finished if dry_run else finished} an interrupted forward of {done.stem} "
                f"from {done.source}")
        for moved in result.forwarded:
            extra = [f"image {moved.image}"] if moved.image else []
            extra += [f"key {key}" for key in moved.keys]
            renamed = f" as {moved.to_stem}" if moved.to_stem not in (None, moved.stem) else ""
            say(f"{verb} {moved.stem}{renamed} from {moved.source} to {result.target.id}"
                + (f" ({', '.join(extra)})" if extra else ""))
        why = {"consumed": "read there meanwhile", "retracted": "retracted meanwhile", "missing": "gone meanwhile",
               "expired": "expired unread: withdrawn, not delivered late",
               "invalid_lifetime": "its lifetime record cannot be read (`sxctl doctor`)",
               "name_taken": f"its stem is taken in {result.target.id}", "not_regular": "not a regular file",
               "invalid_name": "not a stem sxctl accepts", "cross_device": "on another file system"}
        for moved in result.skipped:
            say(f"left {moved.stem} in {moved.source}: {why.get(moved.outcome, moved.outcome)}")
        if not result.plan.moves:
            say(f"nothing to forward: no pending message in a session other than {result.target.id}"
                + (" that is not live" if not sources else ""))
        else:
            count = len({m.source for m in result.forwarded})
            say(f"{verb} {len(result.forwarded)} message(s) from {count} session(s) to {result.target.id}"
                + (" (dry run: nothing moved)" if dry_run else ""))
        for session_id, active in result.plan.timers.items():
            say(f"session {session_id} also has {active} active timer(s): `sxctl callbacks move --from "
                f"{session_id}` moves them", err=True)

    emit(result.to_json(), human)


def _print_removed(result) -> None:
    def human() -> None:
        verb = "would remove" if result.dry_run else "removed"
        for path in result.removed:
            say(f"{verb} {printable(str(path))}")
        say(f"{verb} {len(result.removed)} file(s)" + (f", kept {result.kept}" if result.kept is not None else ""))

    emit(result.to_json(), human)

"""Signals while a command writes and waits. While it writes, Ctrl-C and SIGTERM are held until
the write is done (`deferred_interrupts`): a send or a timer change then writes nothing, or says
what it wrote (exit 130 naming it) — a script must never take a written message or an armed timer
for undone and do it again. While it waits, SIGTERM ends the wait as Ctrl-C does
(`sigterm_interrupts`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HELD = (signal.SIGINT, signal.SIGTERM)


class Held:
    """The first signal that came while a message was being written, if any."""

    def __init__(self) -> None:
        self.signal: int | None = None


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[Held]:
    """Hold SIGINT and SIGTERM for the block (in the main thread: elsewhere signals are not this
    code's; a signal the process was started ignoring stays ignored); `Held.signal` says whether
    one came. A second signal is not held: it interrupts at once, as without this block."""
    held = Held()

    def note(signum, frame) -> None:
        if held.signal is not None:  # a second one is not held: the user insists
            raise KeyboardInterrupt
        held.signal = signum

    previous = {}
    try:
        for signum in HELD:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, note)
    except ValueError:  # not the main thread
        pass
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Terminated(KeyboardInterrupt):
    """SIGTERM while waiting (a CI runner cancelling its step): handled like Ctrl-C."""


@contextlib.contextmanager
def sigterm_interrupts(*, hangup: bool = False) -> Iterator[None]:
    """While a command waits, SIGTERM ends the wait as Ctrl-C does — exit 130 with where the
    message is (and its JSON document) — instead of ending the process without a word. With
    `hangup`, SIGHUP (a closed terminal) too, for a command that must clean up after itself
    (`cron simulate`'s copy); a signal the process was started ignoring (nohup) stays ignored."""
    def terminated(signum, frame):
        raise _Terminated()

    previous = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP) if hangup else (signal.SIGTERM,):
            if signum == signal.SIGTERM or signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, terminated)
    except ValueError:  # not the main thread: signals are the main thread's
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

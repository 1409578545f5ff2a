"""Publishing a message into an inbox folder under a stem its writer holds (spec inbox.md §3-4):
picking a free stem, reserving it and writing the sidecar and the message.

The message temp `<stem>.json.tmp`, created with O_EXCL, is the stem's mutex: only its holder
may publish anything under that stem, so concurrent senders never collide or mix sidecars.
It is a module of its own, above `message` (the bytes and the stems) and `folder` (the inbox
folder and its states), because it needs both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import faults
from ..clock import Clock
from ..errors import ConflictError, ErrorCode
from ..fsio import PendingFile, atomic_write, remove_quietly
from .folder import InboxDir, is_real_dir
from .message import Image, default_stem


def first_stem(inbox: InboxDir, stem: str | None, priority: int | None, clock: Clock,
               take: Callable[[str], bool]) -> str:
    """The first candidate stem that `take` accepts: the user's `--stem` only, or the
    time-based stem bumped by 1 ns up to 100 times (inbox.md §3)."""
    if stem is not None:
        if take(stem):
            return stem
        holder = inbox.holder_of(stem)
        why = (": a send is writing it, or one that crashed left it (remove it once none runs)"
               if holder is not None and holder.endswith(".tmp") else "")
        raise ConflictError(f"stem {stem} is already taken in {inbox.path} by {holder or 'another writer'}{why}",
                            code=ErrorCode.NAME_TAKEN, file=holder or inbox.pending_file(stem))
    time_ns = clock.time_ns()
    for bump in range(101):
        candidate = default_stem(time_ns + bump, priority)
        if take(candidate):
            return candidate
    raise ConflictError(f"no free stem near {default_stem(time_ns)} in {inbox.path}", code=ErrorCode.NAME_TAKEN)


class StemTaken(Exception):
    """The stem turned out not to be free (taken after it was reserved); the caller picks another
    or re-checks."""


def reserve(inbox: InboxDir, stem: str) -> PendingFile | None:
    """Hold `stem` for one writer: its `<stem>.json.tmp`, created with O_EXCL (None if another
    writer holds it). While held, no other writer can publish under this stem."""
    folder = str(inbox.path)
    try:
        return PendingFile(f"{folder}/{stem}.json", f"{folder}/{stem}.json.tmp")
    except FileExistsError:
        return None


def publish(inbox: InboxDir, stem: str, data: bytes, image: Image | None,
            reservation: PendingFile | None = None, lifetime: dict[str, Any] | None = None) -> bool:
    """Write one message under `stem` (its lifetime record, sidecar, then the message). False if taken.

    Holding `<stem>.json.tmp` (O_EXCL) for the whole write makes the free-stem checks exact;
    a caller that reserved the stem earlier passes its reservation. `lifetime`: the message's
    expiry and read deadline (inbox/lifetimes.py), written before anything of the message.
    """
    reservation = reservation or reserve(inbox, stem)
    if reservation is None:
        return False
    own = {reservation.temp}
    sidecar: Path | None = None  # set only once this send has published it
    record: Path | None = None

    def check_free() -> None:
        if not inbox.stem_is_free(stem, frozenset(own)):
            raise StemTaken

    try:  # the free-stem check runs right before each rename (sidecar, then message)
        if lifetime is not None:  # only once the stem is this send's: a taken stem's record is another's
            from .lifetimes import write_open  # a send without a lifetime never loads it

            check_free()
            record = write_open(inbox, stem, {"stem": stem, **lifetime})
            faults.hit("after-lifetime")
        elif is_real_dir(inbox.lifetimes):  # a record a killed send left for this free stem is not this message's
            check_free()
            remove_quietly(inbox.lifetimes / f"{stem}.json")
        if image is not None:
            target = inbox.path / f"{stem}.{image.ext}"
            sidecar_temp = inbox.path / f"{stem}.{image.ext}.tmp"
            own.add(sidecar_temp)
            atomic_write(target, image.data, temp=sidecar_temp, precommit=check_free)
            sidecar = target
            own.add(sidecar)
            faults.hit("after-sidecar")
        reservation.write_all(data)

        def before_rename() -> None:
            faults.hit("before-rename")
            check_free()

        reservation.commit(before_rename)
    except (StemTaken, FileExistsError):
        remove_quietly(sidecar)
        remove_quietly(record)
        reservation.discard()
        return False
    except BaseException:
        remove_quietly(sidecar)
        remove_quietly(record)
        reservation.discard()
        raise
    return True

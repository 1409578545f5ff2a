"""A keyed send (spec inbox.md §6): the key step that makes a send with `--key` idempotent across
the sessions of one project. `sending.send` loads this module only for a keyed send."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from ..clock import Clock
from ..errors import ConflictError, ErrorCode, InvalidDataError
from ..fsio import PendingFile, ensure_private_dir, link_create, remove_if_abandoned
from ..jsondata import compact_json
from ..locks import flock_file
from ..project import Session
from .folder import InboxDir
from .keys import key_record_path, key_state, read_key_record
from .message import IMAGE_EXTS, KEY_TEMP_WAIT_S, POLL_S
from .places import find_key_elsewhere, place_of
from .publishing import first_stem, publish, reserve
from .request import SendRequest


def project_key_lock(session: Session, wait_s: float = 10.0):
    """A key names one message across the project's sessions, so two keyed sends into two
    sessions must not both find no record and both write (each session's create-if-absent record
    only excludes a sender of the same session): they take turns on one flock beside the
    session folders (`.scorpiox/sessions/.sxctl-keys.lock`), which a holder that dies releases.
    Exit 4 `lock_busy` after `wait_s`."""
    path = os.path.join(os.path.dirname(session.dir), ".sxctl-keys.lock")
    return flock_file(path, wait_s, f"another keyed send holds {path}")


def send_keyed(session: Session, inbox: InboxDir, request: SendRequest, clock: Clock,
               before_new: Callable[[], object] | None = None) -> tuple[str, str, bool, bool, Any]:
    """The key step (inbox.md §6): (stem, state, duplicate, completed_abandoned, where the
    message is when that is not this inbox as recorded: a `places.KeyPlace`, else None).

    The first sender of a key reserves its stem *before* it creates the key record, so a record
    only ever names a stem its own writer holds or has written: a concurrent sender with another
    key can never publish there (it gets another stem, or `name_taken` with `--stem`).

    A key identifies one message across the project's sessions: a key this session has no record
    of, whose message still exists in another session (left behind by a restart, or forwarded),
    is a duplicate of that message. `before_new` is called before a new message is written
    (it may refuse by raising: nothing is written then)."""
    assert request.key is not None
    ensure_private_dir(inbox.keys)
    record_path = key_record_path(inbox, request.key)
    looked_elsewhere = False
    for _ in range(100):
        record = read_key_record(record_path)
        if record is not None:
            if record["content_sha256"] != request.content_sha256:
                raise ConflictError(
                    "key reused with different content", code=ErrorCode.KEY_CONFLICT, file=record_path
                )
            return _settle_recorded(session, inbox, request, record, clock, before_new)
        if not looked_elsewhere:
            looked_elsewhere = True
            elsewhere = find_key_elsewhere(session, request.key)
            if elsewhere is not None:
                if elsewhere.record["content_sha256"] != request.content_sha256:
                    raise ConflictError(
                        f"key reused with different content (its message is in session {elsewhere.session.id})",
                        code=ErrorCode.KEY_CONFLICT, file=key_record_path(elsewhere.inbox, request.key),
                    )
                return elsewhere.stem, elsewhere.state, True, False, elsewhere
            if before_new is not None:
                before_new()
        reservation: PendingFile | None = None

        def take(stem: str) -> bool:
            nonlocal reservation
            held = reserve(inbox, stem)
            if held is not None and not inbox.stem_is_free(stem, frozenset({held.temp})):
                held.discard()
                held = None
            reservation = held
            return held is not None

        stem = first_stem(inbox, request.stem, request.priority, clock, take)
        assert reservation is not None
        body = {
            "key": request.key, "stem": stem, "content_sha256": request.content_sha256,
            "created_ms": clock.now_ms(),
        }
        try:
            link_create(record_path, compact_json(body))
        except FileExistsError:
            reservation.discard()  # another sender of this key was first: settle on its record
            continue
        except BaseException:
            reservation.discard()
            raise
        if not publish(inbox, stem, request.data, request.image, reservation, request.lifetime):
            raise ConflictError(f"stem {stem} was taken while reserved for key {request.key!r}",
                                code=ErrorCode.LOCK_BUSY, file=inbox.pending_file(stem))
        return stem, "pending", False, False, None
    raise ConflictError(f"could not settle key record {record_path}", code=ErrorCode.LOCK_BUSY)


def _settle_recorded(session: Session, inbox: InboxDir, request: SendRequest, record: dict[str, Any],
                     clock: Clock, before_new: Callable[[], object] | None) -> tuple[str, str, bool, bool, Any]:
    """A record exists: its message is written (a duplicate, wherever `inbox forward` moved it),
    being written (wait for its writer), or was never written because its writer crashed (write
    it now)."""
    stem = record["stem"]
    for _ in range(100):
        state = key_state(inbox, record)
        if state != "missing" and "moved_from" not in record:
            return stem, state, True, False, None
        place = place_of(session, inbox, record)  # a forwarded message, or one whose move has not arrived yet
        if place.state != "missing":
            return place.stem, place.state, True, False, place
        temp = inbox.temp_file(stem)
        if os.path.lexists(temp):  # its writer is writing it, or died doing so (then it is removed)
            deadline = clock.monotonic() + KEY_TEMP_WAIT_S
            while not remove_if_abandoned(temp, clock.now_ms()):
                if clock.monotonic() >= deadline:
                    raise ConflictError(f"another writer holds {temp} for key {request.key!r}",
                                        code=ErrorCode.LOCK_BUSY, file=temp)
                clock.sleep(POLL_S)
            continue
        assert request.key is not None
        elsewhere = find_key_elsewhere(session, request.key)  # written meanwhile in a newer session (a restart)
        if elsewhere is not None and elsewhere.record["content_sha256"] == request.content_sha256:
            return elsewhere.stem, elsewhere.state, True, False, elsewhere
        if before_new is not None:
            before_new()
        reservation = reserve(inbox, stem)
        if reservation is None:  # another sender of the key is completing it: see what it did
            continue
        _remove_orphan_sidecars(inbox, stem)
        if publish(inbox, stem, request.data, request.image, reservation, _first_lifetime(inbox, stem, request)):
            return stem, "pending", True, True, None
    raise ConflictError(f"could not settle stem {stem} for key {request.key!r}", code=ErrorCode.LOCK_BUSY)


def _first_lifetime(inbox: InboxDir, stem: str, request: SendRequest) -> dict[str, Any] | None:
    """The lifetime the first sender of the key gave its message (its record, written before it
    died), which the message keeps; else this send's."""
    if not os.path.isdir(inbox.lifetimes):
        return request.lifetime
    from .lifetimes import read_record  # a keyed send without lifetimes never loads it

    first = read_record(inbox.lifetimes / f"{stem}.json")
    return request.lifetime if first is None else {key: value for key, value in first.items() if key != "stem"}


def _remove_orphan_sidecars(inbox: InboxDir, stem: str) -> None:
    """The image a writer that died published (or half wrote) before its message: with the stem
    reserved by the caller, no live writer can own it, and it stood in the way of completing the
    key's message (`stem_is_free`). Only regular files go; anything else stays and is named."""
    for ext in IMAGE_EXTS:
        for name in (f"{stem}.{ext}", f"{stem}.{ext}.tmp"):
            path = inbox.path / name
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(mode):
                raise InvalidDataError(path, "not a regular file where the image of a message being written "
                                             "goes; remove it")
            os.unlink(path)

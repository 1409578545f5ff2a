"""Sending (spec inbox.md §4-6): publishing under a reserved stem, idempotency keys, the
configuration gate, and the soft or hard wait that follows.

The message temp `<stem>.json.tmp`, created with O_EXCL, is the stem's mutex: only its holder
may publish anything under that stem, so concurrent senders never collide or mix sidecars.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import faults
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (
    ConflictError,
    InvalidDataError,
    NotFoundError,
    SxctlError,
    UsageError,
)
from ..fsio import (
    PendingFile,
    atomic_write,
    ensure_private_dir,
    link_create,
    read_bytes_capped,
)
from ..project import (
    Session,
    check_rotation_after_write,
    resolve_config,
    warn_if_not_live,
)
from ..record import NoInit, record
from ..report import Reporter
from .folder import InboxDir, primary_inbox
from .message import KEY_TEMP_WAIT_S, POLL_S, SOFT_WAIT_S, Image, _compact_json, build_message, check_stem, default_stem

# --- publishing --------------------------------------------------------------------------------

class _StemTaken(Exception):
    """The stem turned out not to be free; the caller picks another or re-checks."""


def reserve(inbox: InboxDir, stem: str) -> PendingFile | None:
    """Hold `stem` for one writer: its `<stem>.json.tmp`, created with O_EXCL (None if another
    writer holds it). While held, no other writer can publish under this stem."""
    folder = str(inbox.path)
    try:
        return PendingFile(f"{folder}/{stem}.json", f"{folder}/{stem}.json.tmp")
    except FileExistsError:
        return None


def publish(inbox: InboxDir, stem: str, data: bytes, image: Image | None,
            reservation: PendingFile | None = None) -> bool:
    """Write one message under `stem` (sidecar first, then the message). False if taken.

    Holding `<stem>.json.tmp` (O_EXCL) for the whole write makes the free-stem checks exact;
    a caller that reserved the stem earlier passes its reservation.
    """
    reservation = reservation or reserve(inbox, stem)
    if reservation is None:
        return False
    own = {reservation.temp}
    sidecar: Path | None = None  # set only once this send has published it

    def check_free() -> None:
        if not inbox.stem_is_free(stem, frozenset(own)):
            raise _StemTaken

    try:  # the free-stem check runs right before each rename (sidecar, then message)
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
    except (_StemTaken, FileExistsError):
        _remove_quietly(sidecar)
        reservation.discard()
        return False
    except BaseException:
        _remove_quietly(sidecar)
        reservation.discard()
        raise
    return True


def _remove_quietly(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# --- idempotency keys --------------------------------------------------------------------------

def check_key(key: str) -> str:
    import unicodedata

    if not 1 <= len(key) <= 256 or any(unicodedata.category(c) == "Cc" for c in key):
        raise UsageError("invalid --key: 1-256 characters, no control characters")
    return key


def _key_record_path(inbox: InboxDir, key: str) -> Path:
    import hashlib

    return inbox.keys / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _read_key_record(path: Path) -> dict[str, Any] | None:
    try:
        raw = read_bytes_capped(path, 65_536)
    except FileNotFoundError:
        return None
    from .. import jsondata

    try:
        record = jsondata.loads(raw)
    except jsondata.JSONDataError as exc:
        raise InvalidDataError(str(path), str(exc)) from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("stem"), str)
        and isinstance(record.get("content_sha256"), str)
    ):
        raise InvalidDataError(str(path), "not an idempotency-key record")
    try:
        check_stem(record["stem"])
    except UsageError:
        raise InvalidDataError(str(path), f"unsafe stem {record['stem']!r}") from None
    return record


# --- send --------------------------------------------------------------------------------------

@record
class SendResult:
    """What `send` did; `to_json()` is the SCORPIOX BOT result shape plus sxctl's keys."""

    session: Session
    inbox: InboxDir
    stem: str
    mode: str
    state: str
    bytes: int
    image: str | None
    key: str | None
    duplicate: bool = False
    completed_abandoned: bool = False
    waited_ms: int = 0
    inbox_gate: str = "on"
    #: a keyed duplicate pending in a session no agent reads, while the session sent to is live
    stranded: bool = False
    #: a message `inbox forward` moved here: {"session", "stem"} it came from
    forwarded_from: dict[str, str] | None = None

    @property
    def consumed(self) -> bool:
        return self.state == "consumed"

    @property
    def path(self) -> Path:
        folder = self.inbox.folder_of(self.state) if self.state != "missing" else self.inbox.path
        return folder / f"{self.stem}.json"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ok": True, "inbox": True, "stem": self.stem, "mode": self.mode,
            "session": self.session.id, "consumed": self.consumed, "state": self.state,
            "project": str(self.session.project), "session_dir": str(self.session.dir),
            "path": str(self.path), "copy": self.inbox.copy, "bytes": self.bytes,
            "image": self.image, "duplicate": self.duplicate, "key": self.key,
            "waited_ms": self.waited_ms, "inbox_gate": self.inbox_gate,
            "session_source": self.session.source,
        }
        if self.completed_abandoned:
            doc["completed_abandoned"] = True
        if self.stranded:
            doc["stranded"] = True
        if self.forwarded_from is not None:
            doc["forwarded_from"] = self.forwarded_from
        return doc


@record
class SendRequest:
    """Everything `inbox send` needs besides the session."""

    text: str | None
    mode: str = "auto"
    image: Image | None = None
    stem: str | None = None
    priority: int | None = None
    key: str | None = None
    wait_s: float | None = None  # hard wait; None = soft wait (or none with no_wait)
    no_wait: bool = False
    follow: bool = False
    data: bytes = NoInit()  # type: ignore[assignment]

    def __post_init__(self) -> None:
        """Build and check the message bytes at once, before any session is looked up."""
        self.data = build_message(self.text, self.mode, self.image)

    @property
    def content_sha256(self) -> str:
        """What a key record remembers (hashlib is loaded only for keyed sends)."""
        import hashlib

        return hashlib.sha256(self.data + (self.image.data if self.image else b"")).hexdigest()


_GATE_TTL_S = 1.0
_gates: dict[tuple, tuple[float, Any]] = {}


def inbox_gate(session: Session, report: Reporter) -> str:
    """`off` when SCORPIOX_INBOX resolves to exactly 0 (sessions.md §8): warn, still write.
    A process that sends in a loop re-reads the configuration at most once a second."""
    import time

    env = os.environ
    cache_key = (str(session.project), env.get("HOME"), env.get("PATH"), env.get("SCORPIOX_INBOX"),
                 env.get("ACTIVE_PROFILE"))
    cached = _gates.get(cache_key)
    if cached is not None and time.monotonic() - cached[0] < _GATE_TTL_S:
        resolved = cached[1]
    else:
        resolved = resolve_config("SCORPIOX_INBOX", session.project, report=report)
        _gates[cache_key] = (time.monotonic(), resolved)
    if (resolved.value or "").strip() == "0":
        report.warn(
            f"SCORPIOX_INBOX=0 (from {resolved.source}): the agent does not poll its inbox; "
            "the message will wait"
        )
        return "off"
    return "on"


def send(
    session: Session,
    request: SendRequest,
    *,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> SendResult:
    """Drop one message into the session's inbox atomically, then (optionally) wait for it."""
    report = report or Reporter()
    inbox = primary_inbox(session)
    inbox.refuse_symlinks()
    if not _is_real_dir(inbox.path):  # one lstat when it exists (sends run in loops)
        if not session.dir.is_dir():
            raise NotFoundError(f"session folder {session.dir} not found", code="session_not_found")
        ensure_private_dir(inbox.path)
    gate = inbox_gate(session, report)
    warn_if_not_live(session, report)
    place: Any = None  # where a keyed duplicate's message is, when a move took it or left it elsewhere
    if request.key is not None:
        with _project_key_lock(session):
            stem, state, duplicate, abandoned, place = _send_keyed(session, inbox, request, clock)
    else:
        stem = _send_fresh(inbox, request, clock)
        state, duplicate, abandoned = "pending", False, False
    if not duplicate or abandoned:
        check_rotation_after_write(session, clock, report)

    result = SendResult(
        session, inbox, stem, request.mode, state, len(request.data),
        request.image.ext if request.image else None, request.key,
        duplicate=duplicate, completed_abandoned=abandoned, inbox_gate=gate,
    )
    if place is not None:
        result.session, result.inbox, result.forwarded_from = place.session, place.inbox, place.forwarded_from
        if place.session.id != session.id and state == "pending" and place.session.state != "live":
            where = f"the message of key {request.key!r} ({stem}) is pending in session {place.session.id}"
            if session.state == "live":  # left behind by a restart: say how to bring it here
                result.stranded = True
                report.warn(f"{where}, where no agent is live: `sxctl inbox forward --from {place.session.id}` "
                            f"moves it to the live session {session.id}")
            else:
                report.note(where)
    session, inbox = result.session, result.inbox
    if request.no_wait and request.wait_s is None:
        return result
    from .wait import WaitOutcome, _poll_state, wait_for  # a --no-wait send in a loop never loads it

    if state != "pending" and request.wait_s is not None:
        # a keyed duplicate: waiting for a message that was retracted must not report success
        WaitOutcome(session, inbox, stem, state, 0).raise_unless_consumed(result.to_json())
    if state == "pending":
        if request.wait_s is not None:
            try:
                outcome = wait_for(
                    session, inbox, stem, request.wait_s, follow=request.follow,
                    clock=clock, report=report,
                )
            except SxctlError as error:
                if error.code == "interrupted":  # the message was written: say where it is
                    result.state, result.waited_ms = error.details["state"], error.details["waited_ms"]
                    error.details = {**result.to_json(), "ok": False}
                raise
            result.session, result.inbox, result.stem = outcome.session, outcome.inbox, outcome.stem
            result.state, result.waited_ms = outcome.state, outcome.waited_ms
            outcome.raise_unless_consumed(result.to_json())
        elif not request.no_wait and session.state == "live":
            started = clock.monotonic()
            result.state = _poll_state(inbox, stem, clock, started + SOFT_WAIT_S)
            result.waited_ms = round((clock.monotonic() - started) * 1000)
    return result


def _is_real_dir(path: Path) -> bool:
    """A directory and not a symlink to one (sxctl never writes through a symlink)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _first_stem(
    inbox: InboxDir, request: SendRequest, clock: Clock, take: Callable[[str], bool]
) -> str:
    """The first candidate stem that `take` accepts: the user's `--stem` only, or the
    time-based stem bumped by 1 ns up to 100 times (inbox.md §3)."""
    if request.stem is not None:
        if take(request.stem):
            return request.stem
        raise ConflictError(
            f"stem {request.stem} is already taken in {inbox.path}", code="name_taken",
            file=inbox.pending_file(request.stem),
        )
    time_ns = clock.time_ns()
    for bump in range(101):
        stem = default_stem(time_ns + bump, request.priority)
        if take(stem):
            return stem
    raise ConflictError(f"no free stem near {default_stem(time_ns)} in {inbox.path}", code="name_taken")


def _send_fresh(inbox: InboxDir, request: SendRequest, clock: Clock) -> str:
    return _first_stem(inbox, request, clock, lambda stem: publish(inbox, stem, request.data, request.image))


@contextlib.contextmanager
def _project_key_lock(session: Session, wait_s: float = 10.0) -> Iterator[None]:
    """A key names one message across the project's sessions, so two keyed sends into two
    sessions must not both find no record and both write (each session's create-if-absent record
    only excludes a sender of the same session): they take turns on one flock beside the
    session folders (`.scorpiox/sessions/.sxctl-keys.lock`), which a holder that dies releases.
    Exit 4 `lock_busy` after `wait_s`."""
    import fcntl

    path = os.path.join(os.path.dirname(session.dir), ".sxctl-keys.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SxctlError(f"refusing to use {path}: it is a symbolic link", code="invalid_data",
                             file=path) from None
        raise
    import time  # an operating-system lock held by another process: waited for in real time

    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError(f"another keyed send holds {path}", code="lock_busy", file=path) from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)


def _send_keyed(session: Session, inbox: InboxDir, request: SendRequest, clock: Clock
                ) -> tuple[str, str, bool, bool, Any]:
    """The key step (inbox.md §6): (stem, state, duplicate, completed_abandoned, where the
    message is when that is not this inbox as recorded: a `forward.KeyPlace`, else None).

    The first sender of a key reserves its stem *before* it creates the key record, so a record
    only ever names a stem its own writer holds or has written: a concurrent sender with another
    key can never publish there (it gets another stem, or `name_taken` with `--stem`).

    A key identifies one message across the project's sessions: a key this session has no record
    of, whose message still exists in another session (left behind by a restart, or forwarded),
    is a duplicate of that message."""
    assert request.key is not None
    ensure_private_dir(inbox.keys)
    record_path = _key_record_path(inbox, request.key)
    looked_elsewhere = False
    for _ in range(100):
        record = _read_key_record(record_path)
        if record is not None:
            if record["content_sha256"] != request.content_sha256:
                raise ConflictError(
                    "key reused with different content", code="key_conflict", file=record_path
                )
            return _settle_recorded(session, inbox, request, record, clock)
        if not looked_elsewhere:
            looked_elsewhere = True
            from .forward import find_key_elsewhere

            elsewhere = find_key_elsewhere(session, request.key)
            if elsewhere is not None:
                if elsewhere.record["content_sha256"] != request.content_sha256:
                    raise ConflictError(
                        f"key reused with different content (its message is in session {elsewhere.session.id})",
                        code="key_conflict", file=_key_record_path(elsewhere.inbox, request.key),
                    )
                return elsewhere.stem, elsewhere.state, True, False, elsewhere
        reservation: PendingFile | None = None

        def take(stem: str) -> bool:
            nonlocal reservation
            held = reserve(inbox, stem)
            if held is not None and not inbox.stem_is_free(stem, frozenset({held.temp})):
                held.discard()
                held = None
            reservation = held
            return held is not None

        stem = _first_stem(inbox, request, clock, take)
        assert reservation is not None
        body = {
            "key": request.key, "stem": stem, "content_sha256": request.content_sha256,
            "created_ms": clock.now_ms(),
        }
        try:
            link_create(record_path, _compact_json(body))
        except FileExistsError:
            reservation.discard()  # another sender of this key was first: settle on its record
            continue
        except BaseException:
            reservation.discard()
            raise
        if not publish(inbox, stem, request.data, request.image, reservation):
            raise ConflictError(f"stem {stem} was taken while reserved for key {request.key!r}",
                                code="lock_busy", file=inbox.pending_file(stem))
        return stem, "pending", False, False, None
    raise ConflictError(f"could not settle key record {record_path}", code="lock_busy")


def _settle_recorded(session: Session, inbox: InboxDir, request: SendRequest, record: dict[str, Any],
                     clock: Clock) -> tuple[str, str, bool, bool, Any]:
    """A record exists: its message is written (a duplicate, wherever `inbox forward` moved it),
    being written (wait for its writer), or was never written because its writer crashed (write
    it now)."""
    stem = record["stem"]
    for _ in range(100):
        state = key_state(inbox, record)
        if state != "missing" and "moved_from" not in record:
            return stem, state, True, False, None
        from .forward import place_of  # a forwarded message, or one whose move has not arrived yet

        place = place_of(session, inbox, record)
        if place.state != "missing":
            return place.stem, place.state, True, False, place
        temp = inbox.temp_file(stem)
        if os.path.lexists(temp):
            deadline = clock.monotonic() + KEY_TEMP_WAIT_S
            while os.path.lexists(temp) and clock.monotonic() < deadline:
                clock.sleep(POLL_S)
            if os.path.lexists(temp):
                raise ConflictError(
                    f"another writer holds {temp} for key {request.key!r}; "
                    "if it crashed, `sxctl inbox clean` removes it after an hour",
                    code="lock_busy", file=temp,
                )
            continue
        if publish(inbox, stem, request.data, request.image):
            return stem, "pending", True, True, None
    raise ConflictError(f"could not settle stem {stem} for key {request.key!r}", code="lock_busy")


def key_state(inbox: InboxDir, record: dict[str, Any]) -> str:
    """Where the message of a key record is: its file's state, or, once `inbox prune` removed
    the file, the state the record kept (a consumed key stays consumed until `prune --keys`)."""
    state = inbox.state_of(record["stem"])
    if state == "missing" and record.get("pruned") in ("consumed", "retracted"):
        return record["pruned"]
    return state



"""The agent's drop-in inbox: message files, stems, and the send / wait / retract / list /
clean / prune protocols (spec inbox.md).

The message temp `<stem>.json.tmp`, created with O_EXCL, is the stem's mutex: only its holder
may publish anything under that stem, so concurrent senders never collide or mix sidecars.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import faults
from .clock import SYSTEM_CLOCK, Clock
from .errors import (
    ConflictError,
    InvalidDataError,
    NotFoundError,
    SxctlError,
    SystemRefusedError,
    TooLateError,
    UsageError,
    WaitTimeoutError,
)
from .fsio import (
    PendingFile,
    atomic_write,
    ensure_private_dir,
    fsync_dir,
    link_create,
    read_bytes_capped,
    refuse_symlinks_below,
)
from .project import (
    Session,
    as_session,
    check_rotation_after_write,
    date_prefix,
    list_sessions,
    resolve_config,
    session_info,
    warn_if_not_live,
)
from .record import Factory, NoInit, record
from .report import Reporter

MODES = ("auto", "interrupt", "queue")
MAX_MESSAGE_BYTES = 64_000
MAX_IMAGE_BYTES = 8_000_000
IMAGE_EXTS = ("png", "jpg", "jpeg", "gif", "webp")
SOFT_WAIT_S = 2.0
POLL_S = 0.1
KEY_TEMP_WAIT_S = 5.0
PREVIEW_CHARS = 60

_USER_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SXCTL_STEM = re.compile(r"(0[0-9]_)?[0-9]{10,}_[0-9]{9}")
_FORBIDDEN_STEM_ENDINGS = (".tmp", ".json", *(f".{ext}" for ext in IMAGE_EXTS))


# --- message model -----------------------------------------------------------------------------

def _compact_json(obj: dict[str, Any]) -> bytes:
    import json

    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _json_string(text: str) -> str:
    """One JSON string exactly as `json.dumps(text, ensure_ascii=False)` writes it, without
    importing the json package (a send need not pay for it at start-up)."""
    try:
        from _json import encode_basestring
    except ImportError:  # not CPython
        from json.encoder import py_encode_basestring as encode_basestring
    return encode_basestring(text)


@record
class InboxMessage:
    """One message file: `{"text":…,"mode":…}` (text omitted for an image-only message)."""

    text: str | None
    mode: str = "auto"

    def encode(self) -> bytes:
        """Compact UTF-8 JSON with a trailing newline; `mode` always written (inbox.md §1)."""
        text = "" if self.text is None else f'"text":{_json_string(self.text)},'
        return f'{{{text}"mode":{_json_string(self.mode)}}}\n'.encode()

    @classmethod
    def parse(cls, raw: bytes) -> tuple[InboxMessage | None, dict[str, Any] | None, str | None]:
        """(message, parsed object, reason-if-invalid) the way the agent would read it."""
        if not raw.strip():
            return None, None, "empty file"
        if len(raw) > MAX_MESSAGE_BYTES:
            return None, None, f"larger than {MAX_MESSAGE_BYTES} bytes"
        from . import jsondata

        try:
            obj = jsondata.loads(raw)
        except jsondata.JSONDataError as exc:
            return None, None, str(exc)
        if not isinstance(obj, dict):
            return None, None, "not a JSON object"
        text = obj.get("text")
        if not isinstance(text, str):
            text = obj.get("content") if isinstance(obj.get("content"), str) else None
        mode = obj.get("mode")
        return cls(text, mode if mode in MODES else "auto"), obj, None


@record
class Image:
    ext: str
    data: bytes


_MAGIC: dict[str, Callable[[bytes], bool]] = {
    "png": lambda b: b.startswith(b"\x89PNG\r\n\x1a\n"),
    "jpg": lambda b: b.startswith(b"\xff\xd8\xff"),
    "jpeg": lambda b: b.startswith(b"\xff\xd8\xff"),
    "gif": lambda b: b[:6] in (b"GIF87a", b"GIF89a"),
    "webp": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP",
}


def image_type_ok(ext: str, head: bytes) -> bool:
    """Do the first bytes match the type the extension claims (png, jpg/jpeg, gif, webp)?"""
    check = _MAGIC.get(ext.lower())
    return bool(check and check(head))


def load_image(path: Path) -> Image:
    """An image sidecar from a user file: known extension, matching magic bytes, ≤ 8,000,000."""
    ext = path.suffix.lower().lstrip(".")
    if ext not in _MAGIC:
        raise UsageError(
            f"image {path}: unsupported type {path.suffix or '(none)'!r}; use png, jpg, jpeg, gif or webp"
        )
    try:
        data = read_bytes_capped(path, MAX_IMAGE_BYTES)
    except FileNotFoundError:
        raise NotFoundError(f"image {path} not found", file=path) from None
    except OSError as exc:
        raise UsageError(f"image {path}: cannot read it ({exc.strerror})") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise UsageError(f"image {path} is larger than {MAX_IMAGE_BYTES} bytes")
    if not image_type_ok(ext, data):
        raise UsageError(f"image {path}: its content is not {ext.upper()} (magic bytes do not match)")
    return Image("jpg" if ext == "jpg" else ext, data)


def apply_tilde(text: str) -> tuple[str, bool]:
    """A leading `~` on argument text means `queue`: strip it and the spaces after it."""
    if text.startswith("~"):
        return text[1:].lstrip(" "), True
    return text, False


def build_message(text: str | None, mode: str, image: Image | None) -> bytes:
    """The message bytes, checked against the caps (exit 2 when too big or empty)."""
    if mode not in MODES:
        raise UsageError(f"invalid mode {mode!r}: use auto, interrupt or queue")
    if not text and image is None:
        raise UsageError("empty message: give text (argument, '-', --text-file) or --image")
    data = InboxMessage(text or None, mode).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise UsageError(
            f"message is {len(data)} bytes as encoded; the inbox limit is {MAX_MESSAGE_BYTES}"
        )
    return data


# --- stems -------------------------------------------------------------------------------------

def check_stem(stem: str) -> str:
    """A user-given stem (exit 2 unless safe: letters, digits, _ . -, ≤ 64, no `..`)."""
    if (
        not _USER_STEM.fullmatch(stem)
        or ".." in stem
        or stem.lower().endswith(_FORBIDDEN_STEM_ENDINGS)
    ):
        raise UsageError(
            f"invalid stem {stem!r}: 1-64 of letters, digits, '_', '.', '-', starting with a "
            "letter or digit, no '..', not ending in .tmp, .json or an image extension"
        )
    return stem


def stem_argument(text: str) -> str:
    """A stem named on the command line to look up; `NAME.json` is accepted for `NAME`."""
    return check_stem(text[:-5] if text.endswith(".json") and len(text) > 5 else text)


def default_stem(time_ns: int, priority: int | None = None) -> str:
    """`<epoch s>_<9-digit ns>`, optionally prefixed `0P_` so lower P is read first."""
    stem = f"{time_ns // 1_000_000_000}_{time_ns % 1_000_000_000:09d}"
    return stem if priority is None else f"0{priority}_{stem}"


# --- inbox folders and message states ----------------------------------------------------------

@record
class InboxDir:
    """One `inbox/` folder and its sub-folders."""

    path: Path
    copy: str = "none"

    @property
    def done(self) -> Path:
        return self.path / "done"

    @property
    def retracted(self) -> Path:
        return self.path / "retracted"

    @property
    def keys(self) -> Path:
        return self.path / ".keys"

    def pending_file(self, stem: str) -> Path:
        return self.path / f"{stem}.json"

    def temp_file(self, stem: str) -> Path:
        return self.path / f"{stem}.json.tmp"

    def refuse_symlinks(self, *folders: Path) -> None:
        """Before deleting, moving or creating anything under `folders` (default: the inbox):
        exit 5 if a symbolic link lies on the way down from the project folder."""
        root = self.path.parents[3]  # <root>/.scorpiox/sessions/<id>/inbox
        for folder in folders or (self.path,):
            refuse_symlinks_below(root, folder)

    def folder_of(self, state: str) -> Path:
        return {"pending": self.path, "consumed": self.done, "retracted": self.retracted}[state]

    def state_of(self, stem: str) -> str:
        """pending → consumed → retracted → missing, in that order: files only move forward,
        so checking in this order is race-free (inbox.md §7)."""
        name = f"{stem}.json"
        for state in ("pending", "consumed", "retracted"):
            if _exists(self.folder_of(state) / name):
                return state
        return "missing"

    def stem_is_free(self, stem: str, own: frozenset[Path] = frozenset()) -> bool:
        """No message, temp or sidecar of `stem` anywhere but `own` (inbox.md §3)."""
        folder = str(self.path)
        names = [f"{stem}.json", f"{stem}.json.tmp"]
        for ext in IMAGE_EXTS:
            names += [f"{stem}.{ext}", f"{stem}.{ext}.tmp"]
        taken = [f"{folder}/{name}" for name in names]
        taken += [f"{folder}/done/{stem}.json", f"{folder}/retracted/{stem}.json"]
        mine = {os.fspath(path) for path in own}
        return not any(path not in mine and _exists(path) for path in taken)

    def sidecar_of(self, folder: Path, stem: str) -> Path | None:
        for ext in IMAGE_EXTS:
            candidate = folder / f"{stem}.{ext}"
            if os.path.lexists(candidate):
                return candidate
        return None


def _exists(path: str | os.PathLike) -> bool:
    """Whether a name exists (a symlink counts). Unknown is not absent: a folder sxctl may not
    read (EACCES) is exit 8, never taken for "no such message" or "this stem is free"."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        raise SystemRefusedError.from_os_error(error, "cannot tell whether a message exists:") from None
    return True


def inbox_dirs(session: Session) -> list[InboxDir]:
    """The session's inbox copies, the worktree copy first (sessions.md §7)."""
    copies = session.worktree_copies()
    return [InboxDir(folder / "inbox", label) for label, folder in copies.labelled(session.dir)]


def primary_inbox(session: Session) -> InboxDir:
    """Where new messages go: the inbox of the copy the agent runs from."""
    copies = session.worktree_copies()
    label = "worktree" if copies.role != "none" else "none"
    return InboxDir(copies.primary(session.dir) / "inbox", label)


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
    from . import jsondata

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
    if request.key is not None:
        stem, state, duplicate, abandoned = _send_keyed(inbox, request, clock)
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
                    result.state = error.details["state"]
                    error.details = {**result.to_json(), "ok": False}
                raise
            result.session, result.inbox = outcome.session, outcome.inbox
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


def _send_keyed(inbox: InboxDir, request: SendRequest, clock: Clock) -> tuple[str, str, bool, bool]:
    """The key step (inbox.md §6): (stem, state, duplicate, completed_abandoned).

    The first sender of a key reserves its stem *before* it creates the key record, so a record
    only ever names a stem its own writer holds or has written: a concurrent sender with another
    key can never publish there (it gets another stem, or `name_taken` with `--stem`)."""
    assert request.key is not None
    ensure_private_dir(inbox.keys)
    record_path = _key_record_path(inbox, request.key)
    for _ in range(100):
        record = _read_key_record(record_path)
        if record is not None:
            if record["content_sha256"] != request.content_sha256:
                raise ConflictError(
                    "key reused with different content", code="key_conflict", file=record_path
                )
            return _settle_recorded(inbox, request, record, clock)
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
        return stem, "pending", False, False
    raise ConflictError(f"could not settle key record {record_path}", code="lock_busy")


def _settle_recorded(inbox: InboxDir, request: SendRequest, record: dict[str, Any],
                     clock: Clock) -> tuple[str, str, bool, bool]:
    """A record exists: its message is written (a duplicate), being written (wait for its
    writer), or was never written because its writer crashed (write it now)."""
    stem = record["stem"]
    for _ in range(100):
        state = key_state(inbox, record)
        if state != "missing":
            return stem, state, True, False
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
            return stem, "pending", True, True
    raise ConflictError(f"could not settle stem {stem} for key {request.key!r}", code="lock_busy")


def key_state(inbox: InboxDir, record: dict[str, Any]) -> str:
    """Where the message of a key record is: its file's state, or, once `inbox prune` removed
    the file, the state the record kept (a consumed key stays consumed until `prune --keys`)."""
    state = inbox.state_of(record["stem"])
    if state == "missing" and record.get("pruned") in ("consumed", "retracted"):
        return record["pruned"]
    return state


# --- waiting -----------------------------------------------------------------------------------

def _poll_state(inbox: InboxDir, stem: str, clock: Clock, deadline: float) -> str:
    while True:
        state = inbox.state_of(stem)
        if state != "pending" or clock.monotonic() >= deadline:
            return state
        clock.sleep(POLL_S)


@record
class WaitOutcome:
    session: Session
    inbox: InboxDir
    stem: str
    state: str
    waited_ms: int
    events: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]

    def raise_unless_consumed(self, details: dict[str, Any]) -> None:
        """Map the final state to the spec's exit codes (inbox.md §8)."""
        details = {**details, "ok": False, "state": self.state, "consumed": False}
        where = f"{self.stem} in {self.inbox.path}"
        if self.state == "pending":
            raise WaitTimeoutError(
                f"timed out after {self.waited_ms / 1000:g}s: {where} is still pending",
                details=details,
            )
        if self.state == "retracted":
            raise ConflictError(f"{where} was retracted", code="retracted", details=details)
        if self.state == "missing":
            raise NotFoundError(f"{where} not found", code="stem_not_found", details=details)


def wait_for(
    session: Session,
    inbox: InboxDir,
    stem: str,
    timeout_s: float,
    *,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> WaitOutcome:
    """Poll until `stem` leaves `pending` or the deadline (0 = none) passes.

    With `follow`, a message left behind by a session rotation is re-homed into the new live
    session (sessions.md §9); without it, one warning is given.
    """
    report = report or Reporter()
    emit = on_event or (lambda event: None)
    started = clock.monotonic()
    deadline = None if timeout_s == 0 else started + timeout_s
    emit({"event": "waiting", "ts_ms": clock.now_ms(), "stem": stem, "inbox": str(inbox.path)})
    where = [session, inbox]  # where the message is now (a rotation may re-home it)
    try:
        report.detail(f"waiting for {stem} to be consumed" + (f" (up to {timeout_s:g}s)" if timeout_s else ""))
        state = _wait_loop(where, stem, deadline, follow, clock, report, emit)
    except KeyboardInterrupt:
        session, inbox = where
        state = inbox.state_of(stem)
        raise SxctlError(f"interrupted while waiting: {stem} is {state} in {inbox.path}", code="interrupted",
                         details={"stem": stem, "state": state, "session": session.id}) from None
    session, inbox = where
    waited = round((clock.monotonic() - started) * 1000)
    emit({"event": "done", "ts_ms": clock.now_ms(), "stem": stem, "state": state, "waited_ms": waited})
    return WaitOutcome(session, inbox, stem, state, waited)


def _wait_loop(where: list, stem: str, deadline: float | None, follow: bool, clock: Clock,
               report: Reporter, emit: Callable[[dict[str, Any]], None]) -> str:
    """Poll until `stem` leaves `pending` or the deadline passes; `where` ([session, inbox]) is
    kept up to date when a rotation re-homes the message."""
    session, inbox = where
    next_liveness_check = clock.monotonic()
    warned_stale = False
    while True:
        state = inbox.state_of(stem)
        now = clock.monotonic()
        if state != "pending" or (deadline is not None and now >= deadline):
            break
        if now >= next_liveness_check:
            next_liveness_check = now + 1.0
            current = session_info(session.dir, clock)
            if current.state != "live":
                target = rotation_target(session, clock) if follow else None
                if target is not None:
                    moved = rehome(inbox, stem, target)
                    if moved is not None:
                        emit({"event": "rehomed", "ts_ms": clock.now_ms(), "stem": stem,
                              "from": str(inbox.path), "to": str(moved.path), "session": target.id})
                        report.note(f"re-homed {stem} from {session.id} to {target.id}")
                        session, inbox = where[:] = [target, moved]
                        continue
                elif not follow and not warned_stale and session.state == "live":
                    warned_stale = True
                    report.warn(
                        f"session {session.id} turned {current.state} while {stem} is pending; "
                        "use --follow to re-home it after a rotation"
                    )
        clock.sleep(POLL_S)
    return state


def rotation_target(session: Session, clock: Clock) -> Session | None:
    """Exactly one other live session whose date-prefixed id is not older, or None.

    Rotation usually happens within a day and the id words are random, so the same date
    counts as newer."""
    own_date = date_prefix(session.id) or ""
    candidates = [
        info for info in list_sessions(session.project, clock)
        if info.state == "live" and info.id != session.id
        and (date_prefix(info.id) or "") >= own_date and date_prefix(info.id)
    ]
    if len(candidates) != 1:
        return None
    info = candidates[0]
    return as_session(info, session.project, "live")


def rehome(inbox: InboxDir, stem: str, target: Session) -> InboxDir | None:
    """Move a pending message (sidecar first) into `target`'s inbox; None if it was consumed
    meanwhile or the new inbox already has that stem."""
    new_inbox = primary_inbox(target)
    inbox.refuse_symlinks()
    new_inbox.refuse_symlinks()
    ensure_private_dir(new_inbox.path)
    try:
        reservation = PendingFile(new_inbox.pending_file(stem), new_inbox.temp_file(stem))
    except FileExistsError:
        return None
    try:
        if not new_inbox.stem_is_free(stem, frozenset({reservation.temp})):
            return None
        sidecar = inbox.sidecar_of(inbox.path, stem)
        moved_sidecar = None
        if sidecar is not None:
            moved_sidecar = new_inbox.path / sidecar.name
            os.rename(sidecar, moved_sidecar)
        try:
            os.rename(inbox.pending_file(stem), new_inbox.pending_file(stem))
        except FileNotFoundError:
            if moved_sidecar is not None:
                os.rename(moved_sidecar, sidecar)
            return None
        fsync_dir(new_inbox.path)
        fsync_dir(inbox.path)
        return new_inbox
    finally:
        reservation.discard()


# --- retract -----------------------------------------------------------------------------------

@record
class RetractResult:
    inbox: InboxDir
    stem: str
    already: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, "stem": self.stem, "state": "retracted", "already": self.already,
            "copy": self.inbox.copy, "path": str(self.inbox.retracted / f"{self.stem}.json"),
        }


def stem_for_key(session: Session, key: str) -> str:
    """The stem an idempotency key was recorded with, searching every inbox copy."""
    for inbox in inbox_dirs(session):
        record = _read_key_record(_key_record_path(inbox, key))
        if record is not None:
            return record["stem"]
    raise NotFoundError(f"no message was sent with key {key!r} in session {session.id}", code="stem_not_found")


def retract(session: Session, stem: str) -> RetractResult:
    """Withdraw a still-pending message (inbox.md §9); the single rename is the commit point."""
    dirs = inbox_dirs(session)
    located = next((d for d in dirs if os.path.lexists(d.pending_file(stem))), None)
    if located is None:
        located = next((d for d in dirs if d.state_of(stem) != "missing"), dirs[0])
    inbox = located
    inbox.refuse_symlinks(inbox.path, inbox.retracted)
    target = inbox.retracted / f"{stem}.json"
    if os.path.lexists(inbox.pending_file(stem)):
        ensure_private_dir(inbox.retracted)
        if os.path.lexists(target):
            raise ConflictError(f"{target} already exists", code="name_taken", file=target)
    try:
        os.rename(inbox.pending_file(stem), target)
    except FileNotFoundError:
        if os.path.lexists(inbox.done / f"{stem}.json"):
            raise TooLateError(
                f"{stem} was already consumed", file=inbox.done / f"{stem}.json"
            ) from None
        if os.path.lexists(target):
            return RetractResult(inbox, stem, already=True)
        raise NotFoundError(
            f"no message {stem} in {inbox.path}", code="stem_not_found"
        ) from None
    sidecar = inbox.sidecar_of(inbox.path, stem)
    if sidecar is not None:
        try:
            os.rename(sidecar, inbox.retracted / sidecar.name)
        except FileNotFoundError:
            pass
    fsync_dir(inbox.path)
    fsync_dir(inbox.retracted)
    return RetractResult(inbox, stem, already=False)


# --- listing -----------------------------------------------------------------------------------

@record
class MessageRow:
    stem: str
    state: str
    path: Path
    copy: str
    size: int
    mtime_ms: int
    ctime_ms: int
    image: str | None
    message: InboxMessage | None
    obj: dict[str, Any] | None
    invalid: str | None
    raw: bytes = b""

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "stem": self.stem, "state": self.state,
            "mode": self.message.mode if self.message else None,
            "bytes": self.size, "mtime_ms": self.mtime_ms, "ctime_ms": self.ctime_ms,
            "image": self.image, "preview": self.preview, "copy": self.copy,
        }
        if self.invalid is not None:
            row["invalid"] = self.invalid
        return row

    @property
    def preview(self) -> str:
        text = self.message.text if self.message and self.message.text else ""
        return text[:PREVIEW_CHARS]


def _read_row(inbox: InboxDir, folder: Path, name: str, state: str) -> MessageRow | None:
    path = folder / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None  # moved on while we looked
    raw = b""
    message = obj = None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 (os.listdir hands them over as surrogates)
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return MessageRow(name[: -len(".json")], state, folder / name, inbox.copy, st.st_size,
                          st.st_mtime_ns // 1_000_000, st.st_ctime_ns // 1_000_000, None, None, None,
                          "its file name is not valid UTF-8")
    if not stat.S_ISREG(st.st_mode):
        invalid = "not a regular file"
    elif st.st_size > MAX_MESSAGE_BYTES:
        invalid = f"larger than {MAX_MESSAGE_BYTES} bytes"
    else:
        try:
            raw = read_bytes_capped(path, MAX_MESSAGE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            invalid = f"unreadable ({exc.strerror})"
        else:
            message, obj, invalid = InboxMessage.parse(raw)
    stem = name[: -len(".json")]
    sidecar = inbox.sidecar_of(folder, stem)
    return MessageRow(
        stem, state, path, inbox.copy, st.st_size, st.st_mtime_ns // 1_000_000,
        st.st_ctime_ns // 1_000_000, sidecar.suffix[1:] if sidecar else None,
        message, obj, invalid, raw,
    )


def is_message_name(name: str) -> bool:
    """The one rule for what in an inbox folder is a message: `<stem>.json`, not a dotfile (the
    key records live in `.keys/`, temps end in `.tmp`). Every count and listing uses it."""
    return name.endswith(".json") and len(name) > 5 and not name.startswith(".")


def message_names(folder: str | os.PathLike) -> list[str]:
    """The message names in one inbox folder (`inbox/`, `done/` or `retracted/`), unordered."""
    try:
        return [name for name in os.listdir(folder) if is_message_name(name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def list_messages(session: Session, states: tuple[str, ...], limit: int | None = None) -> list[MessageRow]:
    """Pending rows in consumption order (byte order of names), then done/retracted rows
    newest first by ctime (the rename sets it), across every inbox copy."""
    rows: list[MessageRow] = []
    for state in states:
        found: list[MessageRow] = []
        for inbox in inbox_dirs(session):
            folder = inbox.folder_of(state)
            names = sorted(message_names(folder), key=os.fsencode)
            found += [row for name in names if (row := _read_row(inbox, folder, name, state))]
        if state != "pending":
            found.sort(key=lambda row: row.ctime_ms, reverse=True)
        rows += found
    return rows[:limit] if limit is not None else rows


def find_message(session: Session, stem: str) -> MessageRow:
    """The one row for `stem`, wherever it is now (pending, consumed or retracted)."""
    for inbox in inbox_dirs(session):
        state = inbox.state_of(stem)
        if state != "missing":
            row = _read_row(inbox, inbox.folder_of(state), f"{stem}.json", state)
            if row is not None:
                return row
    raise NotFoundError(f"no message {stem} in session {session.id}", code="stem_not_found")


# --- housekeeping ------------------------------------------------------------------------------

def _older_files(folder: Path, cutoff_ms: int, use_ctime: bool) -> Iterator[tuple[Path, str]]:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        stamp = (st.st_ctime_ns if use_ctime else st.st_mtime_ns) // 1_000_000
        if stamp < cutoff_ms:
            yield Path(entry.path), entry.name


def _clean_candidates(inbox: InboxDir, cutoff_ms: int) -> Iterator[Path]:
    """Leftovers of crashed sxctl writers, and nothing else (inbox.md §10)."""
    temp_suffixes = tuple(f".{ext}.tmp" for ext in ("json", *IMAGE_EXTS))
    for path, name in _older_files(inbox.path, cutoff_ms, use_ctime=False):
        if name.endswith(temp_suffixes):
            stem = name.rsplit(".", 2)[0]
            if _SXCTL_STEM.fullmatch(stem):
                yield path
            continue
        stem, _, ext = name.rpartition(".")
        if ext in IMAGE_EXTS and _SXCTL_STEM.fullmatch(stem) and not any(
            os.path.lexists(folder / f"{stem}.json")
            for folder in (inbox.path, inbox.done, inbox.retracted)
        ):
            yield path
    for path, name in _older_files(inbox.keys, cutoff_ms, use_ctime=False):
        if name.endswith(".tmp"):
            yield path


def clean(session: Session, older_than_ms: int, *, dry_run: bool = False, clock: Clock = SYSTEM_CLOCK) -> list[Path]:
    """Delete stray temps and orphan sidecars older than the age in every inbox copy."""
    cutoff = clock.now_ms() - older_than_ms
    removed = []
    for inbox in inbox_dirs(session):
        inbox.refuse_symlinks(inbox.path, inbox.keys)
        for path in list(_clean_candidates(inbox, cutoff)):
            if not dry_run:
                _remove_quietly(path)
            removed.append(path)
    return removed


def prune(
    session: Session,
    older_than_ms: int,
    *,
    retracted: bool = False,
    keys: bool = False,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> tuple[list[Path], int]:
    """Delete old consumed (and retracted) messages and key records; never a pending message.
    Returns (removed paths, number of files kept)."""
    cutoff = clock.now_ms() - older_than_ms
    removed: list[Path] = []
    kept = 0
    for inbox in inbox_dirs(session):
        folders = [inbox.done] + ([inbox.retracted] if retracted else [])
        inbox.refuse_symlinks(*folders, *([inbox.keys] if keys else []))
        for folder in folders:
            old = {path for path, _ in _older_files(folder, cutoff, use_ctime=True)}
            kept += sum(1 for name in _listdir(folder) if folder / name not in old)
            removed += sorted(old)
        if keys:
            old_keys = []
            for path, name in _older_files(inbox.keys, cutoff, use_ctime=False):
                if not name.endswith(".json"):
                    continue
                try:
                    record = _read_key_record(path)
                except SxctlError:
                    record = None
                if record is not None and os.path.lexists(inbox.pending_file(record["stem"])):
                    continue
                old_keys.append(path)
            kept += sum(1 for name in _listdir(inbox.keys) if name.endswith(".json")) - len(old_keys)
            removed += sorted(old_keys)
    if not dry_run:
        removed_set = set(removed)
        for inbox in inbox_dirs(session):
            _remember_pruned_keys(inbox, removed_set)
        for path in removed:
            _remove_quietly(path)
    return removed, kept


def _remember_pruned_keys(inbox: InboxDir, removed: set[Path]) -> None:
    """Before a keyed message's file goes, its key record (if it stays) notes the final state, so
    the same send stays a duplicate instead of delivering the message a second time."""
    stems = {path.name[:-5]: state for state, folder in (("consumed", inbox.done), ("retracted", inbox.retracted))
             for path in removed if path.parent == folder and path.name.endswith(".json")}
    if not stems:
        return
    for path, name in _older_files(inbox.keys, 2**62, use_ctime=False):
        if not name.endswith(".json") or path in removed:
            continue
        try:
            record = _read_key_record(path)
        except SxctlError:
            continue
        if record is None or record["stem"] not in stems or record.get("pruned"):
            continue
        st = os.lstat(path)
        atomic_write(path, _compact_json({**record, "pruned": stems[record["stem"]]}))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # `prune --keys` ages records by mtime


def _listdir(folder: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []



def evidence_for_key(project: Path, sessions: list, key: str) -> dict[str, Any]:
    """Was a message sent with `key` (the cron runner uses the execution id)? Where is it now?"""
    for info in sessions:
        session = as_session(info, project, "newest")
        for inbox in inbox_dirs(session):
            try:
                record = _read_key_record(_key_record_path(inbox, key))
            except SxctlError:
                record = None
            if record is not None:
                return {"key_record": True, "stem": record["stem"], "state": key_state(inbox, record),
                        "session": info.id, "copy": inbox.copy}
    return {"key_record": False, "stem": None, "state": "missing", "session": None}

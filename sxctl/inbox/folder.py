"""An inbox folder and the state of each message in it (spec inbox.md §7), and the listings:
one rule for what a message is, read by every view."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ..errors import (
    NotFoundError,
    SystemRefusedError,
)
from ..fsio import (
    read_bytes_capped,
    refuse_symlinks_below,
)
from ..project import (
    Session,
)
from ..record import record
from .message import IMAGE_EXTS, MAX_MESSAGE_BYTES, PREVIEW_CHARS, InboxMessage

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

    def stem_is_free(self, stem: str, own: frozenset[str | os.PathLike[str]] = frozenset()) -> bool:
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
    message: InboxMessage | None = None
    obj: dict[str, Any] | None = None
    invalid: str | None = None
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
    newest first by ctime (the rename sets it), across every inbox copy.

    Consumed and retracted messages only grow: they are ordered by their directory entries'
    ctime (a stat each, no open) and only the `limit` newest are read."""
    rows: list[MessageRow] = []
    for state in states:
        wanted = None if limit is None else limit - len(rows)
        if wanted is not None and wanted <= 0:
            break
        if state == "pending":
            for inbox in inbox_dirs(session):
                names = sorted(message_names(inbox.path), key=os.fsencode)
                rows += [row for name in names if (row := _read_row(inbox, inbox.path, name, state))]
            continue
        entries = [(ctime_ns, inbox, name) for inbox in inbox_dirs(session)
                   for ctime_ns, name in _stamped_names(inbox.folder_of(state))]
        entries.sort(key=lambda entry: entry[0], reverse=True)
        for _, inbox, name in entries[:wanted]:
            row = _read_row(inbox, inbox.folder_of(state), name, state)
            if row is not None:
                rows.append(row)
    return rows[:limit] if limit is not None else rows


def _stamped_names(folder: Path) -> list[tuple[int, str]]:
    """(ctime in ns, name) of each message in a folder, from directory entries and stat only."""
    found = []
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    with entries:
        for entry in entries:
            if is_message_name(entry.name):
                try:
                    found.append((entry.stat(follow_symlinks=False).st_ctime_ns, entry.name))
                except FileNotFoundError:
                    continue
    return found


def count_since(session: Session, state: str, since_ms: int) -> int:
    """How many messages reached `state` (consumed or retracted) at or after `since_ms`: the
    rename into that folder sets the ctime, so this reads no message file."""
    since_ns = since_ms * 1_000_000
    return sum(1 for inbox in inbox_dirs(session) for ctime_ns, _ in _stamped_names(inbox.folder_of(state))
               if ctime_ns >= since_ns)


def find_message(session: Session, stem: str) -> MessageRow:
    """The one row for `stem`, wherever it is now (pending, consumed or retracted)."""
    for inbox in inbox_dirs(session):
        state = inbox.state_of(stem)
        if state != "missing":
            row = _read_row(inbox, inbox.folder_of(state), f"{stem}.json", state)
            if row is not None:
                return row
    raise NotFoundError(f"no message {stem} in session {session.id}", code="stem_not_found")



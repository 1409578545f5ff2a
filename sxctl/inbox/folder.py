"""An inbox folder and the state of each message in it (spec inbox.md §7), and the listings:
one rule for what a message is, read by every view."""

from __future__ import annotations

import heapq
import itertools
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ErrorCode, NotFoundError, SystemRefusedError
from ..fsio import read_bytes_capped, refuse_symlinks_below
from ..project import Session
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

    @property
    def lifetimes(self) -> Path:
        """The messages' expiries and read deadlines (inbox/lifetimes.py): sxctl's, never the agent's."""
        return self.path / ".lifetimes"

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
        return {"pending": self.path, "consumed": self.done, "retracted": self.retracted,
                "expired": self.retracted}[state]

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
        return self.holder_of(stem, own) is None

    def holder_of(self, stem: str, own: frozenset[str | os.PathLike[str]] = frozenset()) -> str | None:
        """The message, temp or sidecar that takes `stem` (not one of `own`), or None."""
        folder = str(self.path)
        names = [f"{stem}.json", f"{stem}.json.tmp"]
        for ext in IMAGE_EXTS:
            names += [f"{stem}.{ext}", f"{stem}.{ext}.tmp"]
        taken = [f"{folder}/{name}" for name in names]
        taken += [f"{folder}/done/{stem}.json", f"{folder}/retracted/{stem}.json"]
        mine = {os.fspath(path) for path in own}
        return next((path for path in taken if path not in mine and _exists(path)), None)

    def sidecar_of(self, folder: Path, stem: str) -> Path | None:
        for ext in IMAGE_EXTS:
            candidate = folder / f"{stem}.{ext}"
            if os.path.lexists(candidate):
                return candidate
        return None


def is_real_dir(path: str | os.PathLike[str]) -> bool:
    """A directory and not a symbolic link to one (sxctl never writes through a link): one lstat."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


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
    """One message as the listings show it: where it is, its state, its file's times and what it says."""

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
    #: its lifetime (inbox/lifetimes.py): when it expires, when it should be read by (None: never)
    expires_ms: int | None = None
    read_by_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "stem": self.stem, "state": self.state,
            "mode": self.message.mode if self.message else None,
            "bytes": self.size, "mtime_ms": self.mtime_ms, "ctime_ms": self.ctime_ms,
            "image": self.image, "preview": self.preview, "copy": self.copy,
            "expires_ms": self.expires_ms, "read_by_ms": self.read_by_ms,
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


def deliverable_count(folder: str | os.PathLike[str]) -> int:
    """How many messages in one inbox folder an agent would take: message names that are regular
    files (a FIFO, a folder or a symbolic link named `*.json` is skipped by the agent, and so
    is not a message nobody reads)."""
    try:
        with os.scandir(os.fspath(folder)) as entries:
            return sum(1 for entry in entries if is_message_name(entry.name) and entry.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return 0


def list_messages(session: Session, states: tuple[str, ...], limit: int | None = None) -> list[MessageRow]:
    """Pending rows in consumption order (byte order of names), then done/retracted rows
    newest first by ctime (the rename sets it), across every inbox copy.

    Consumed and retracted messages only grow: with `limit`, one directory listing finds the
    newest (`newest_moved`), and only they are stat'ed and read."""
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
                   for ctime_ns, name in (newest_moved(inbox.folder_of(state), wanted) if wanted is not None
                                          else _all_moved(inbox.folder_of(state)))]
        entries.sort(key=lambda entry: entry[0], reverse=True)
        for _, inbox, name in entries[:wanted]:
            row = _read_row(inbox, inbox.folder_of(state), name, state)
            if row is not None:
                rows.append(row)
    return rows[:limit] if limit is not None else rows


#: how many names past the asked-for ones are looked at: the agent reads in name order, so a later
#: name was read later, except where a priority message (`0N_…`) jumped the queue
READ_ORDER_SLACK = 64


#: a plain sxctl message's name: `<10-digit seconds>_<9 digits>.json`, no priority prefix
_PLAIN = re.compile(r"[1-9]\d{9}_\d{9}\.json")
_PLAIN_LENGTH = 25
#: how many of the largest names the cheap path of `unstamped_names` checks one by one
_HEAD = 8 * READ_ORDER_SLACK


def unstamped_names(names: list[str]) -> list[str]:
    """The names that are not plain sxctl messages (`<10-digit seconds>_<9 digits>.json`, no
    priority prefix). A plain message's place in name order is its place in the order the agent
    read it."""
    return _unstamped_and_head(names)[0]


def _unstamped_and_head(names: list[str]) -> tuple[list[str], list[str] | None]:
    """`unstamped_names`, and the largest `_HEAD` names, largest first, when it found them (else None).

    Cheaply, in C (`map`, `compress`, `min`, `heapq.nlargest`): every name of another length than
    a plain one is picked out; if no plain-length name sorts below `1`, one that differs sorts
    above the plain ones (a letter), so it is among the largest, which are checked one by one.
    Otherwise, one regular-expression pass over every name. (A plain-length name of digits and
    letters that sorts among the plain ones is taken for one.)"""
    lowest = min(itertools.compress(names, map(_PLAIN_LENGTH.__eq__, map(len, names))), default="1")
    if "1" <= lowest[0] <= "9":
        head = heapq.nlargest(_HEAD, names)
        odd = [name for name in head if len(name) == _PLAIN_LENGTH and not _PLAIN.fullmatch(name)]
        if sum(len(name) == _PLAIN_LENGTH for name in head) > len(odd):  # a plain one: odd ones above it are here
            return [*itertools.compress(names, map(_PLAIN_LENGTH.__ne__, map(len, names))), *odd], head
    return re.findall(r"^(?![1-9]\d{9}_\d{9}\.json$).+$", "\n".join(names), re.M), None


def _ctime_ns(folder: Path, name: str) -> int | None:
    try:
        return os.lstat(os.path.join(folder, name)).st_ctime_ns
    except FileNotFoundError:
        return None


def _moved_in(folder: Path) -> tuple[list[tuple[int, str]], Iterator[tuple[int, str]], int]:
    """The messages moved into `done/` or `retracted/` (the rename sets their ctime), for callers
    that want the most recent ones: (every other name with its ctime, the time-stamped names with
    theirs, latest name first, stat'ed lazily, and how many there are in all). One directory
    listing; a stat only for what the caller takes — months of history cost a listing, not
    100,000 stats."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    unstamped, largest = _unstamped_and_head(names)  # other messages, image sidecars, temps: usually few
    others = [(ctime, name) for name in unstamped if is_message_name(name)
              if (ctime := _ctime_ns(folder, name)) is not None]

    def latest_first() -> Iterator[tuple[int, str]]:
        skip = set(unstamped)
        size = 4 * READ_ORDER_SLACK + len(skip)
        top = largest[:size] if largest is not None and size <= len(largest) else heapq.nlargest(size, names)
        head = [name for name in top if name not in skip]
        yield from _stamped(folder, head)
        if len(head) + len(skip) < len(names):  # the caller wants more than the newest: all of them, in order
            seen = set(head) | skip
            rest = (name for name in names if name not in seen and is_message_name(name))  # no 25-byte sidecar
            yield from _stamped(folder, sorted(rest, reverse=True))

    return others, latest_first(), len(names) - len(unstamped) + len(others)


def _stamped(folder: Path, names: list[str]) -> Iterator[tuple[int, str]]:
    for name in names:
        ctime = _ctime_ns(folder, name)
        if ctime is not None:
            yield ctime, name


def _all_moved(folder: Path) -> list[tuple[int, str]]:
    others, latest, _ = _moved_in(folder)
    return others + list(latest)


def newest_moved(folder: Path, want: int) -> list[tuple[int, str]]:
    """(ctime ns, name) of the `want` messages most recently moved into `folder`, newest first."""
    others, latest, _ = _moved_in(folder)
    candidates = others + list(itertools.islice(latest, want + READ_ORDER_SLACK))
    candidates.sort(reverse=True)
    return candidates[:want]


def count_since(session: Session, state: str, since_ms: int) -> tuple[int, int | None]:
    """(how many messages reached `state` — consumed or retracted — at or after `since_ms`, how
    many are kept there in all, None when the folder was not listed). The rename into that folder
    sets the ctime and the folder's mtime: a folder unchanged since `since_ms` is not even listed;
    otherwise no message file is read and the count stops once READ_ORDER_SLACK names in a row
    were moved earlier."""
    since_ns = since_ms * 1_000_000
    count, total = 0, 0
    listed = False
    for inbox in inbox_dirs(session):
        folder = inbox.folder_of(state)
        try:
            if os.stat(folder).st_mtime_ns < since_ns:
                continue  # nothing moved in (or out) since then
        except (FileNotFoundError, NotADirectoryError):
            continue
        listed = True
        others, latest, kept = _moved_in(folder)
        total += kept
        count += sum(1 for ctime, _ in others if ctime >= since_ns)
        misses = 0
        for ctime, _ in latest:
            if ctime >= since_ns:
                count, misses = count + 1, 0
            else:
                misses += 1
                if misses >= READ_ORDER_SLACK:
                    break
    return count, total if listed else None


def find_message(session: Session, stem: str) -> MessageRow:
    """The one row for `stem`, wherever it is now (pending, consumed or retracted)."""
    for inbox in inbox_dirs(session):
        state = inbox.state_of(stem)
        if state != "missing":
            row = _read_row(inbox, inbox.folder_of(state), f"{stem}.json", state)
            if row is not None:
                return row
    from .moves import moved_to  # a send loads this module: the move records only when a look-up misses

    for inbox in inbox_dirs(session):
        hop = moved_to(inbox.path, stem, moving=False)
        if hop is not None:
            raise NotFoundError(f"no message {stem} in session {session.id}: `inbox forward` moved it to session "
                                f"{hop[0]} as {hop[1]}", code=ErrorCode.STEM_NOT_FOUND, moved_to={"session": hop[0],
                                                                                           "stem": hop[1]})
    raise NotFoundError(f"no message {stem} in session {session.id}", code=ErrorCode.STEM_NOT_FOUND)



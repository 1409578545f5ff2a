"""sxctl's locks: `writer_lock` (an flock through `filelock`) for its own writers, and
`MkdirLock`, the directory lock comis uses for its scheduler files.

filelock is imported only when a lock is actually taken: most invocations never need it.
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

from .errors import ConflictError, ErrorCode, SxctlError
from .fsio import atomic_write, read_data_file, refuse_symlink
from .scratch import in_scratch


@contextmanager
def writer_lock(path: Path, timeout_s: float, what: str) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created 0600), or exit 4 `lock_busy` after the timeout."""
    from filelock import FileLock, Timeout  # here, not at the top: heavy, and most commands take no lock

    lock = FileLock(str(path), timeout=timeout_s, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise ConflictError(
            f"{what} is busy: {path} is held by another process (waited {timeout_s:g}s)",
            code=ErrorCode.LOCK_BUSY,
            file=path,
        ) from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def flock_file(path: str | os.PathLike[str], wait_s: float, busy: str) -> Iterator[None]:
    """An exclusive flock on `path` (created 0600, never through a symbolic link: exit 5), waited
    for in real time up to `wait_s` (then exit 4 `lock_busy`, saying `busy`). An operating-system
    lock: a holder that dies releases it."""
    import errno
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR):
            what = "a symbolic link" if error.errno == errno.ELOOP else "a folder, not a lock file"
            raise SxctlError(f"refusing to use {path}: it is {what}", code=ErrorCode.INVALID_DATA, file=path) from None
        raise
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError(busy, code=ErrorCode.LOCK_BUSY, file=path) from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)


# --- the comis-compatible mkdir lock (cron-store.md §9) -------------------------------------------

STALE_AFTER_S = 30.0
REFRESH_EVERY_S = 5.0
#: how far a directory's mtime may lag `time.time()`: file systems stamp with the kernel's coarse
#: clock (a tick behind, often more than 5 ms), so a holder killed right after its mkdir can own a
#: directory that looks older than the note it prepared before it
CLOCK_GRANULARITY_MS = 100
#: a holder's note is trusted for a directory made within this long after the note was prepared
FRESH_MKDIR_MS = 2000


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Refresher:
    """The one background thread that refreshes every MkdirLock this process holds, each every
    REFRESH_EVERY_S from its acquire (a thread per lock cost a start and a join per acquire: most
    of a rehearsed pass, which takes the ledger lock for each row it writes). A refresh runs under
    `_cond`, so once `remove` returns, the lock is never touched again."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[MkdirLock, float] = {}  # each held lock -> when its next refresh is due
        self._running = False

    def forked(self) -> None:
        """In a forked child: no thread runs (threads do not survive a fork) and the condition may
        have been held by one when the parent forked."""
        self.__init__()  # type: ignore[misc]

    def add(self, lock: MkdirLock) -> None:
        with self._cond:
            if not self._running:
                self._running = True
                threading.Thread(target=self._loop, name="sxctl-lock-refresh", daemon=True).start()
            self._due[lock] = time.monotonic() + REFRESH_EVERY_S
            self._cond.notify()

    def remove(self, lock: MkdirLock) -> None:
        with self._cond:
            self._due.pop(lock, None)

    def _loop(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for lock, due in list(self._due.items()):
                    if due <= now:
                        self._due[lock] = now + REFRESH_EVERY_S
                        try:
                            refreshed = lock._refresh()
                        except Exception:  # noqa: BLE001 - one lock's fault never stops the others' refreshes
                            lock._lost, refreshed = True, False
                        if not refreshed:
                            del self._due[lock]
                self._cond.wait(min(self._due.values(), default=now + 3600) - now)


_REFRESHER = _Refresher()
os.register_at_fork(after_in_child=_REFRESHER.forked)


def check_sentinel(sentinel: Path) -> None:
    """A mkdir lock's sentinel and owner note are regular files or absent: a link, a FIFO or a
    folder there is refused (exit 5 naming it), never opened or followed."""
    for path in (Path(sentinel), Path(f"{sentinel}.owner")):
        refuse_symlink(path)
        if os.path.lexists(path) and not os.path.isfile(path):
            raise SxctlError(f"refusing to use {path}: not a regular file", code=ErrorCode.INVALID_DATA, file=path)


class MkdirLock:
    """The lock comis (proper-lockfile) uses: the directory `<realpath(sentinel)>.lock`.

    Held while the directory exists with the mtime we last gave it; refreshed every 5 s by a
    background thread (`_Refresher`); stale after 30 s without refresh, or at once when sxctl's owner note says
    its holder on this host has died. `check_held()` runs before every commit.

    The note identifies *this* directory by a random nanosecond part that every mtime sxctl gives
    it carries (`mtimeNanos`): an inode number is reused as soon as the directory is gone, so a
    dead holder's note must never match the directory a comis holder made later.

    Below a scratch folder (scratch.scratch_writes: `cron simulate`'s private copy, which no other
    process writes) the lock is held without touching the disk.
    """

    def __init__(self, sentinel: Path, *, boot_id: str, wait_s: float, what: str) -> None:
        self.sentinel = sentinel if isinstance(sentinel, Path) else Path(sentinel)
        self.boot_id = boot_id
        self.wait_s = wait_s
        self.what = what
        self.lockdir: Path | None = None
        # never a whole millisecond: comis refreshes its locks with millisecond timestamps
        self._nanos = random.randrange(1_000_000_000) | 1
        self._mtime_ns: int | None = None
        self._lost = False
        self._scratch = False

    @cached_property
    def note(self) -> Path:
        return Path(f"{self.sentinel}.owner")

    def __enter__(self) -> MkdirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        if in_scratch(os.path.dirname(self.sentinel) or "."):
            self._scratch = True  # its lock directory is never made: `lockdir` stays None
            return
        self._host = socket.gethostname()
        check_sentinel(self.sentinel)
        fd = os.open(self.sentinel, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        os.close(fd)
        self.lockdir = Path(os.path.realpath(self.sentinel) + ".lock")
        deadline = time.monotonic() + self.wait_s
        while True:
            prepared = self._prepare_note()
            try:
                os.mkdir(self.lockdir, 0o700)
            except FileExistsError:
                os.unlink(prepared)
                if self._take_over_if_stale():
                    continue
                if time.monotonic() >= deadline:
                    raise ConflictError(self._busy_message(), code=ErrorCode.LOCK_BUSY, file=self.lockdir) from None
                time.sleep(min(random.uniform(0.1, 0.5), max(0.0, deadline - time.monotonic()) + 0.01))
                continue
            break
        # The note was written before the mkdir, so a holder killed now is recognised by it (its
        # pid is dead, the directory is no older than the note); then the directory gets its mark.
        try:
            self._mark()
            os.replace(prepared, self.note)
        except BaseException:  # never leave a lock behind that nobody holds
            for undo in (lambda: os.unlink(prepared), lambda: os.rmdir(self.lockdir)):
                try:
                    undo()
                except OSError:
                    pass
            raise
        self._remove_dead_prepared_notes()  # evidence for a takeover no more: the lock is ours
        _REFRESHER.add(self)

    @property
    def _dir(self) -> Path:
        """The lock directory (known from the first acquire on)."""
        assert self.lockdir is not None
        return self.lockdir

    def _mark(self) -> None:
        """Give the lock directory the latest mtime up to now whose nanoseconds are this holder's mark
        (so at most a second old, and never in the future)."""
        now = time.time_ns()
        stamp = now - (now - self._nanos) % 1_000_000_000
        os.utime(self._dir, ns=(stamp, stamp))
        self._mtime_ns = os.stat(self._dir).st_mtime_ns

    def _busy_message(self) -> str:
        try:
            age = time.time() - os.stat(self._dir).st_mtime
            held = f" (last refreshed {age:.1f}s ago)"
        except OSError:
            held = ""
        return f"{self.what} is locked by another process: {self.lockdir}{held}"

    def _take_over_if_stale(self) -> bool:
        """Remove a stale lock directory; True when the caller should retry at once."""
        try:
            st = os.stat(self._dir)
        except FileNotFoundError:
            return True
        stale = time.time() - st.st_mtime > STALE_AFTER_S or self._held_by_dead_sxctl(st)
        if stale:
            try:
                os.rmdir(self._dir)
            except FileNotFoundError:
                pass
            except OSError:
                return False
            return True
        return False

    def _held_by_dead_sxctl(self, st: os.stat_result) -> bool:
        """Whether a dead sxctl process on this host held this very directory: its note (published
        or only prepared: it died between its mark and publishing the note) finds its mark still
        there, or a note it prepared but never published is at most 2 s older than a directory
        nobody has marked yet (it died between its mkdir and its mark). A mark dates the directory
        up to a second back, so only the mark itself tells a prepared note's directory then."""
        for note, published in self._dead_notes():
            if note.get("mtimeNanos") == st.st_mtime_ns % 1_000_000_000:
                return True
            if published:
                continue
            acquired = note.get("acquired_ms")
            if isinstance(acquired, int) and (
                    -CLOCK_GRANULARITY_MS <= st.st_mtime_ns // 1_000_000 - acquired <= FRESH_MKDIR_MS):
                return True
        return False

    def _dead_notes(self) -> Iterator[tuple[dict, bool]]:
        """(note, published) for the owner note and the prepared ones written by a dead process
        on this host."""
        host = socket.gethostname()
        candidates = [(self.note, True)] + [
            (Path(entry.path), False) for entry in os.scandir(self.note.parent)
            if entry.name.startswith(f"{self.note.name}.") and entry.name.endswith(".tmp")
        ]
        for path, published in candidates:
            try:
                note = json.loads(read_data_file(path, 4096) or b"null")
            except (ValueError, RecursionError, SxctlError):
                continue
            if not isinstance(note, dict) or note.get("host") != host:
                continue
            pid = note.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and not pid_alive(pid):
                yield note, published

    def _note_body(self) -> bytes:
        body = {"pid": os.getpid(), "host": self._host, "bootId": self.boot_id,
                "acquired_ms": time.time_ns() // 1_000_000, "mtimeNanos": self._nanos}
        return (json.dumps(body) + "\n").encode()

    def _prepare_note(self) -> Path:
        """The owner note, written (not yet published) just before each mkdir attempt."""
        temp = Path(f"{self.note}.{os.getpid()}-{random.getrandbits(64):016x}.tmp")
        atomic_write(temp, self._note_body(), durable=False)
        return temp

    def _remove_dead_prepared_notes(self) -> None:
        """Prepared notes of sxctl processes on this host that died before publishing them."""
        prefix = f"{self.note.name}."
        for entry in os.scandir(self.note.parent):
            pid_text = entry.name[len(prefix):].split("-", 1)[0]
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp") and pid_text.isdigit() \
                    and not pid_alive(int(pid_text)):
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    pass

    def _still_ours(self) -> bool:
        try:
            return os.stat(self._dir).st_mtime_ns == self._mtime_ns
        except OSError:  # gone, or made into a link (a loop) or something it cannot stat: not ours
            return False

    def _refresh(self) -> bool:
        """Give the directory a new mark while it is still ours (False: lost, no more refreshes)."""
        if self._lost or not self._still_ours():
            self._lost = True
            return False
        try:
            self._mark()
        except OSError:  # gone, or made into something else (a link, another user's): not ours any more
            self._lost = True
            return False
        return True

    def check_held(self) -> None:
        """Before a commit: abort (exit 4 `lock_lost`) if someone took the lock over."""
        if self._scratch:
            return
        if self._lost or not self._still_ours():
            self._lost = True
            raise ConflictError(
                f"lost {self.lockdir}: another process took it over; nothing was written",
                code=ErrorCode.LOCK_LOST, file=self.lockdir,
            )

    def release(self) -> None:
        if self._scratch:
            return
        _REFRESHER.remove(self)
        if self.lockdir is not None and not self._lost:
            try:
                os.rmdir(self.lockdir)
            except FileNotFoundError:
                pass
            try:
                os.unlink(self.note)
            except FileNotFoundError:
                pass
        self.lockdir = None

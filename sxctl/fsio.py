"""The one way sxctl puts bytes on disk: exclusive same-folder temp, fsync, atomic publish.

A crash at any point leaves the old file or the new one, never a torn one; at worst a stray temp
file remains, which only the clean-up rule of that file may remove (docs/protocol/README.md §1).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import ErrorCode, InvalidDataError, NotFoundError, SxctlError, SystemRefusedError
from .scratch import in_scratch

#: a temp file untouched this long was left by a writer that crashed: the callbacks writer sweeps
#: its own, `doctor` warns about any, `inbox clean` removes the inbox's by default
STRAY_TEMP_MS = 3_600_000
#: a temp file no writer holds but written this recently may be a writer's that has not locked it yet
FRESH_TEMP_MS = 1_000
#: opening a temp file to judge its writer: never through a link, never blocking on a FIFO
_PROBE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_umask: int | None = None
def _process_umask() -> int:
    """Read once: whether `open(..., mode)` already yields `mode` (then no fchmod is needed)."""
    global _umask
    if _umask is None:
        _umask = os.umask(0o077)
        os.umask(_umask)
    return _umask


def default_temp_path(target: str | os.PathLike) -> str:
    """`<name>.sxctl-<32 hex>.tmp` beside the target (docs/protocol/README.md §1, step 1)."""
    return f"{os.fspath(target)}.sxctl-{os.urandom(16).hex()}.tmp"


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    if in_scratch(os.fspath(folder)):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _owner_for(folder: str | os.PathLike[str]) -> tuple[int, int] | None:
    """When running as root in someone else's folder, new files go to that folder's owner."""
    if os.geteuid() != 0:
        return None
    st = os.stat(folder)
    if st.st_uid == 0 and st.st_gid == 0:
        return None
    return st.st_uid, st.st_gid


def refuse_symlink(target: str | os.PathLike[str]) -> None:
    """sxctl never replaces a target whose last component is a symlink (exit 5)."""
    if os.path.islink(target):
        raise SxctlError(
            f"refusing to write {target}: it is a symbolic link", code=ErrorCode.INVALID_DATA, file=target
        )


def refuse_symlinks_below(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """Exit 5 naming the first component of `path` below `root` that is a symbolic link: sxctl
    deletes, moves and creates only inside the real folders of a project, never through a link
    (`root` itself, a folder the user chose, may be one). Components that do not exist yet are
    fine: sxctl creates them itself."""
    root_text, path_text = os.fspath(root), os.fspath(path)
    relative = os.path.relpath(path_text, root_text)
    if relative == os.curdir:
        return
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        raise ValueError(f"{path_text} is not inside {root_text}")
    current = root_text
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise SxctlError(f"refusing to use {current}: it is a symbolic link",
                code=ErrorCode.INVALID_DATA, file=current)


class PendingFile:
    """A temp file created exclusively beside `target`; `commit()` publishes it atomically.

    Creating the temp with O_EXCL also works as a reservation: the inbox uses a fixed temp name
    (`<stem>.json.tmp`) so that only one writer at a time can hold a stem.
    """

    def __init__(self, target: str | os.PathLike, temp: str | os.PathLike | None = None, mode: int = 0o600) -> None:
        # plain strings inside: this runs once per inbox message, and sends run in loops
        self.target = os.fspath(target)
        self.temp = os.fspath(temp) if temp is not None else default_temp_path(self.target)
        self.folder = os.path.dirname(self.target) or "."
        self._fd: int | None = os.open(self.temp, _OPEN_FLAGS, mode)
        self._owns_temp = True  # False once published or removed: the name may be reused
        self.scratch = in_scratch(self.folder)
        self.durable = not self.scratch
        try:
            try:  # held until the temp is published or removed: a lock the kernel drops when a writer dies
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a file system without flock: `remove_if_abandoned` then never removes it
                pass
            if mode & ~_process_umask() != mode:
                os.fchmod(self._fd, mode)  # the umask would have narrowed the mode
            owner = _owner_for(self.folder)
            if owner is not None:
                os.fchown(self._fd, *owner)
        except BaseException:
            self.discard()
            raise

    def write_all(self, data: bytes, *, durable: bool = True, mtime_ms: int | None = None) -> None:
        """Write every byte (and fsync unless `durable` is off); the temp file is complete then.
        `mtime_ms`: the file's modification time (the time its content says it was written)."""
        assert self._fd is not None, "write after close"
        view = memoryview(data)
        offset = 0
        while offset < len(view):
            offset += os.pwrite(self._fd, view[offset:], offset)
        if mtime_ms is not None:
            os.utime(self._fd, ns=(os.fstat(self._fd).st_atime_ns, mtime_ms * 1_000_000))
        self.durable = durable and self.durable
        if self.durable:
            os.fsync(self._fd)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def commit(
        self, precommit: Callable[[], None] | None = None, *, no_clobber: bool = False
    ) -> None:
        """Run the file's own pre-commit check, then publish the temp under the target's name.

        With `no_clobber`, the target is created by `os.link`, which fails instead of replacing
        a file that appeared meanwhile (FileExistsError reaches the caller, temp removed).
        """
        try:
            if precommit is not None:
                precommit()
            refuse_symlink(self.target)
            if no_clobber:
                os.link(self.temp, self.target)
                os.unlink(self.temp)
            else:
                os.replace(self.temp, self.target)
        except BaseException:
            self.discard()
            raise
        self._close()  # only now: its lock says "a live writer holds this temp" until it is published
        self._owns_temp = False
        if self.scratch:
            _written[self.target] = file_stamp(self.target)
        if self.durable:
            fsync_dir(self.folder)

    def discard(self) -> None:
        """Remove the temp file (failure before the commit); a missing temp is fine."""
        self._close()
        if not self._owns_temp:
            return
        self._owns_temp = False
        try:
            os.unlink(self.temp)
        except FileNotFoundError:
            pass

    def __enter__(self) -> PendingFile:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()


def writer_holds(path: str | os.PathLike) -> bool:
    """Whether a live writer holds the temp file at `path` (its `PendingFile` lock); False for a
    name that is gone or not a file sxctl can open."""
    try:
        fd = os.open(path, _PROBE_FLAGS)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing drops the shared lock this probe took)
    return False


def remove_if_abandoned(temp: str | os.PathLike, now_ms: int) -> bool:
    """Remove the temp file of a writer that died before publishing it; True if it is gone.

    Every `PendingFile` holds an exclusive lock on its temp until the temp is published or
    removed, and the kernel drops the lock of a process that ends (SIGKILL included): a temp no one
    holds is abandoned. One written within FRESH_TEMP_MS of `now_ms` is left alone (its writer may
    not have taken the lock yet); one from a clock that was ahead counts as old. Anything but a
    regular file there is invalid data (exit 5 naming it): sxctl writes none and removes none."""
    try:
        fd = os.open(temp, _PROBE_FLAGS)
    except FileNotFoundError:
        return True
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise InvalidDataError(temp, "not a regular file where sxctl keeps a message being written; "
                                         "remove it") from None
        raise SystemRefusedError.from_os_error(error) from None
    try:
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode):
            raise InvalidDataError(temp, "not a regular file where sxctl keeps a message being written; remove it")
        if abs(now_ms - held.st_mtime_ns // 1_000_000) < FRESH_TEMP_MS:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live writer holds it (or the file system has no flock)
            return False
        try:  # while the lock is ours no writer can take this name: it is still the file judged
            named = os.lstat(temp)
        except FileNotFoundError:
            return True
        if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            return False
        os.unlink(temp)
        return True
    finally:
        os.close(fd)


def atomic_write(
    target: Path,
    data: bytes,
    *,
    temp: Path | None = None,
    keep_mode: bool = False,
    precommit: Callable[[], None] | None = None,
    no_clobber: bool = False,
    durable: bool = True,
    mtime_ms: int | None = None,
) -> None:
    """Replace (or create) `target` with `data` atomically and (unless `durable` is off, for
    advisory files whose loss in a power cut is harmless) durably.

    `keep_mode` keeps the mode bits of an existing target that another program owns; `mtime_ms`
    sets the file's modification time.
    """
    target = Path(target)
    refuse_symlink(target)
    mode = 0o600
    if keep_mode:
        try:
            mode = stat.S_IMODE(os.lstat(target).st_mode)
        except FileNotFoundError:
            pass
    with PendingFile(target, temp, mode) as pending:
        pending.write_all(data, durable=durable, mtime_ms=mtime_ms)
        pending.commit(precommit, no_clobber=no_clobber)


def link_create(target: Path, data: bytes, *, temp: Path | None = None, mtime_ms: int | None = None) -> None:
    """Publish a complete file only if `target` does not exist yet (FileExistsError if it does)."""
    atomic_write(target, data, temp=temp, no_clobber=True, mtime_ms=mtime_ms)


def ensure_private_dir(folder: Path) -> Path:
    """Create `folder` (mode 0700) if missing; its parent must already exist."""
    folder = Path(folder)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        if os.path.islink(folder) or not folder.is_dir():
            why = "it is a symbolic link" if os.path.islink(folder) else "not a directory"
            raise SxctlError(f"refusing to use {folder}: {why}", code=ErrorCode.INVALID_DATA, file=folder) from None
        return folder
    except FileNotFoundError:
        raise NotFoundError(f"folder not found: {folder.parent}", file=folder.parent) from None
    os.chmod(folder, 0o700)
    owner = _owner_for(folder.parent)
    if owner is not None:
        os.chown(folder, *owner)
    fsync_dir(folder.parent)
    return folder


#: the files this process wrote below a scratch folder, each with its stamp right after (`written_here`)
_written: dict[str, tuple[int, int, int] | None] = {}


def written_here(path: str) -> bool:
    """Whether `path` lies below a scratch folder and is still the file this process last wrote
    there (`cron simulate` reads its own files back unchecked: schema_kit.read_checked_file)."""
    stamp = _written.get(path)
    return stamp is not None and in_scratch(os.path.dirname(path) or ".") and stamp == file_stamp(path)


def file_stamp(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of `path`, or None when it cannot be stat'ed: the answer to "did this
    file change since I read it", so a cache re-reads a file only when its stamp differs."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def open_regular(path: str | os.PathLike) -> int:
    """A read-only descriptor of a regular file, never through a symlink and never blocking:
    a FIFO or device where a data file should be is refused (OSError EINVAL), not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symbolic link", os.fspath(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    return fd


def read_bytes_capped(path: Path, cap: int) -> bytes:
    """Read at most `cap + 1` bytes of a regular file (see `open_regular`), so a caller can tell
    'too big'."""
    fd = open_regular(path)
    try:
        chunks = []
        remaining = cap + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


#: the folders whose files the agent (.scorpiox/) and the scheduler (.scheduler/) own
OWNED_FOLDERS = frozenset((".scorpiox", ".scheduler"))


def in_owned_folder(path: str | os.PathLike, owned: tuple[Path, ...] = ()) -> bool:
    """Whether `path` is inside a .scorpiox/ or .scheduler/ folder (in any case: macOS's
    .SCHEDULER), as it reads or wherever its links lead, or inside one of the folders `owned`
    wherever they lead (a workspace's `.scheduler` that is a link to a folder of another name)."""
    given = Path(os.path.abspath(path))
    real = Path(os.path.realpath(given))
    if OWNED_FOLDERS & {part.casefold() for part in (*given.parts, *real.parts)}:
        return True
    return any(real == (root := Path(os.path.realpath(folder))) or root in real.parents for folder in owned)


def read_data_file(path: Path, cap: int) -> bytes | None:
    """A data file sxctl parses: None when it does not exist, exit 5 naming it when it cannot be
    read; at most `cap + 1` bytes, so the caller can tell a file that is too big."""
    try:
        return read_bytes_capped(path, cap)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise read_refusal(path, exc) from None


#: what stands where a data file should be (a symbolic link, a FIFO or device, a folder on the
#: way): the data is wrong, exit 5; any other failure to read is the operating system's refusal
_NOT_A_DATA_FILE = frozenset((errno.ELOOP, errno.EINVAL, errno.EISDIR, errno.ENOTDIR))


def read_refusal(path: str | os.PathLike[str], exc: OSError) -> SxctlError:
    """The error for a data file that could not be read: exit 5 naming it when something else
    stands there (see `open_regular`), exit 8 when the system refused (permission denied, an I/O
    error): a file sxctl may not read is not invalid data, and nothing to repair."""
    if exc.errno in _NOT_A_DATA_FILE:
        return InvalidDataError(path, f"cannot read it ({exc.strerror})")
    return SystemRefusedError(f"cannot read {path}: {exc.strerror or exc.__class__.__name__}", file=path)


def remove_quietly(path: Path | None) -> None:
    """Unlink `path` if there is one; a file already gone is what the caller wanted."""
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

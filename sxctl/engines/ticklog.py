"""`cron tick --log FILE`: the pass's own bounded, time-stamped log (the crontab entry redirects
nothing, so nothing appends without end)."""

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InvalidDataError, SxctlError, SystemRefusedError
from ..timeparse import display_zone, format_ms
from .outside import refuse_owned_place


class TickLog(io.RawIOBase):
    """`cron tick --log FILE`: what the pass prints, appended to FILE, each line stamped with
    its time in the display zone, with the offset (`2026-09-21T08:21:30+02:00`:
    `timeparse.display_zone`). Before a write would take FILE past `cap` bytes, FILE is renamed to FILE.1
    (replacing it), so the two never hold more than `2 * cap` (a single write larger than `cap`
    fills a file of its own). Each write happens under an flock of the file it goes to, after
    checking that FILE is still that file: two passes at once neither rotate twice nor write
    into a file already moved away. FILE is a regular file or absent (never through a
    symbolic link: exit 5); its folders are made (0700) when missing. A write the disk refuses
    goes to `fallback` (cron's mail) instead of failing the pass. FILE is never inside a
    .scorpiox/ or .scheduler/ folder (exit 2, `refuse_owned_place`), nor another name (a hard
    link) of a file there or anywhere (exit 5): appending writes into every name of the file."""

    def __init__(self, path: Path, cap: int, now_ms: Callable[[], int], fallback: Any = None) -> None:
        super().__init__()
        refuse_owned_place(path, "the log", "name a file outside any such folder")
        self.path = Path(os.path.abspath(path))
        self.cap = cap
        self.now_ms = now_ms
        self.fallback = fallback
        self._line_start = True
        self.zone = display_zone()  # the zone of the pass's own lines, so the two agree
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot create the folder of the log") from None
        # an existing FILE is checked now; a new one is made by the first line (a quiet pass, or a
        # --dry-run that prints nothing, leaves no empty file behind)
        self._fd: int | None = self._open() if os.path.lexists(self.path) else None

    def _open(self) -> int:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise InvalidDataError(self.path, "it is a symbolic link; the log is not written through it") \
                    from None
            if error.errno in (errno.ENXIO, errno.EISDIR):
                raise InvalidDataError(self.path, "not a regular file; the log is not written there") from None
            raise SystemRefusedError.from_os_error(error, "cannot open the log") from None
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            os.close(fd)
            raise InvalidDataError(self.path, "not a regular file; the log is not written there")
        if found.st_nlink > 1:
            os.close(fd)
            raise InvalidDataError(self.path, f"it has {found.st_nlink} names (hard links); the log is not "
                                   "appended to another file")
        return fd

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        try:
            self._append(self._stamped(data))
        except (OSError, SxctlError) as error:
            if self.fallback is not None:
                self.fallback.write(f"sxctl: cannot write the log {self.path}: {error}\n"
                                    + data.decode("utf-8", "backslashreplace"))
                self.fallback.flush()
        return len(data)

    def _stamped(self, data: bytes) -> bytes:
        stamp = f"{format_ms(self.now_ms(), zone=self.zone)} ".encode()
        out = []
        for piece in data.splitlines(keepends=True):
            out.append(stamp + piece if self._line_start else piece)
            self._line_start = piece.endswith(b"\n")
        return b"".join(out)

    def _append(self, data: bytes) -> None:
        while True:
            if self._fd is None:
                self._fd = self._open()
            fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                own = os.fstat(fd)
                try:
                    now = os.stat(self.path, follow_symlinks=False)
                    moved = (now.st_dev, now.st_ino) != (own.st_dev, own.st_ino)
                except FileNotFoundError:
                    moved = True
                if not moved and own.st_size and own.st_size + len(data) > self.cap:
                    os.replace(self.path, f"{self.path}.1")
                    moved = True
                if not moved:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    return
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)  # moved away (by this pass or another): write to the file at the path now
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()

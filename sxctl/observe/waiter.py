"""Sleep until a watched folder changes: inotify through ctypes on Linux, else the timeout."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import time


class ChangeWaiter:
    """Sleep until a watched folder changes (inotify through ctypes on Linux) or the timeout.

    The caller looks at the files after every wait anyway, so inotify only shortens the delay: a
    folder that does not exist yet (`inbox/done/` before the first message is read) or whose watch
    failed is retried at every wait, and until then the timeout is what wakes the caller."""

    IN_MASK = 0x00000002 | 0x00000008 | 0x00000040 | 0x00000080 | 0x00000100 | 0x00000200  # modify, close_write,
    # moved_from, moved_to, create, delete

    def __init__(self, folders: list) -> None:
        self.fd = None
        self.unwatched = [str(folder) for folder in folders]
        try:
            self.libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return
            self.fd = fd
            self._add_watches()
        except (OSError, AttributeError):
            self.fd = None

    def _add_watches(self) -> None:
        still = []
        for folder in self.unwatched:
            if not os.path.isdir(folder) or self.libc.inotify_add_watch(self.fd, folder.encode(), self.IN_MASK) < 0:
                still.append(folder)
        self.unwatched = still

    @property
    def mode(self) -> str:
        return "inotify" if self.fd is not None else "polling"

    def wait(self, timeout_s: float) -> None:
        if self.fd is None:
            time.sleep(timeout_s)
            return
        if self.unwatched:
            self._add_watches()
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if ready:
            try:
                while os.read(self.fd, 65536):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

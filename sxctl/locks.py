"""The one locking helper for sxctl's own writers (an flock through `filelock`).

filelock is imported only when a lock is actually taken: most invocations never need it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ConflictError


@contextmanager
def writer_lock(path: Path, timeout_s: float, what: str) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created 0600), or exit 4 `lock_busy` after the timeout."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=timeout_s, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise ConflictError(
            f"{what} is busy: {path} is held by another process (waited {timeout_s:g}s)",
            code="lock_busy",
            file=path,
        ) from None
    try:
        yield
    finally:
        lock.release()

"""Scratch folders: `cron simulate` runs real passes in a private copy it throws away, which no
other process reads or writes and a power cut loses nothing of. Below one, a write is not
fsynced (fsio), a scheduler lock is the process's own (locks.MkdirLock), the ledger's rows are
appended in place (cron/run/ledger_write.append_rows), and a file of sxctl's own that this
process wrote there is not checked again when read back (fsio.written_here, in cron/store/
schema_kit.read_checked_file; the files copied in are); anywhere else nothing changes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: the folders below which writes need no fsync (`scratch_writes`), resolved, with a trailing separator;
#: and the folders written into meanwhile, resolved (a rehearsal writes into a few thousands of times)
_scratch: list[str] = []
_resolved: dict[str, str] = {}


@contextmanager
def scratch_writes(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Within this block, `folder` is scratch (see the module); writes anywhere else, in any
    thread, stay durable, atomic and locked."""
    scratch = os.path.join(os.path.realpath(folder), "")
    _scratch.append(scratch)
    try:
        yield
    finally:
        _scratch.remove(scratch)
        if not _scratch:
            _resolved.clear()


def in_scratch(folder: str) -> bool:
    """Whether `folder`, its links resolved, is below a scratch folder (`scratch_writes`): a
    write into it is not fsynced, a lock in it not taken on disk."""
    if not _scratch:
        return False
    real = _resolved.get(folder)
    if real is None:
        real = _resolved[folder] = os.path.join(os.path.realpath(folder), "")
    return any(real.startswith(prefix) for prefix in _scratch)


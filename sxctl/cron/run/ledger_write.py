"""Adding rows to the comis execution ledger: the whole-file rewrite with retention (spec
cron-ledger.md), and the ledger a pass keeps of its own last write."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from ... import faults
from ...errors import ConflictError, ErrorCode, SxctlError
from ...fsio import PendingFile, file_stamp
from ...jsondata import compact_json
from ...locks import MkdirLock
from ...scratch import in_scratch
from .ledger import DEFAULT_MAX_LOG_BYTES, MAX_ROW_BYTES, Group, Ledger, LedgerError, pair_row, scan_ledger
from .ledger_rows import check_row


def cached_ledger(path: Path, cache: dict[str, Any]) -> Ledger | None:
    """A copy of the ledger a pass of this process last wrote (`append_rows`'s `cache`), while
    the file is still that one (the same inode, size and modification time); None otherwise."""
    stamp = file_stamp(path)
    ledger = cache.get("ledger")
    if ledger is None or stamp is None or cache.get("stamp") != stamp:
        return None
    return Ledger(path, ledger.raw, dict(ledger.groups), list(ledger.lines))  # `append_rows` copies a group it changes


def _retain(ledger: Ledger, protected: set[str], retain: int, max_log_bytes: int, size: int) -> set[str]:
    """Execution ids to drop: oldest complete groups beyond `retain`, then while the logical size
    exceeds the ceiling (cron-ledger.md §6). Protected and incomplete groups are never dropped.
    `size`: the bytes of the ledger's lines."""
    open_starts = sum(1 for g in ledger.groups.values() if g.terminal is None)
    if len(ledger.groups) - open_starts <= retain and size + open_starts * MAX_ROW_BYTES <= max_log_bytes:
        return set()  # within both: nothing to sort out (a pass appends a row at a time)
    complete = sorted((g for g in ledger.groups.values() if g.terminal is not None), key=lambda g: g.sort_key)
    droppable = [g for g in complete if g.execution_id not in protected]
    dropped: set[str] = set()
    excess = len(complete) - retain
    while excess > 0 and droppable:
        dropped.add(droppable.pop(0).execution_id)
        excess -= 1
    sizes: dict[str, int] = {}
    for execution_id, line in ledger.lines:
        sizes[execution_id] = sizes.get(execution_id, 0) + len(line)
    logical = sum(size for eid, size in sizes.items() if eid not in dropped) + open_starts * MAX_ROW_BYTES
    while logical > max_log_bytes:
        if not droppable:
            raise ConflictError("Cron execution ledger has no safely prunable capacity", code=ErrorCode.CAPACITY,
                                file=ledger.path)
        victim = droppable.pop(0).execution_id
        dropped.add(victim)
        logical -= sizes[victim]
    return dropped


def append_rows(
    path: Path,
    rows: list[dict[str, Any]],
    *,
    locks: list[MkdirLock],
    protected: set[str],
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    retain: int = 1000,
    cache: dict[str, Any] | None = None,
) -> None:
    """Add rows by rewriting the whole ledger (never appending in place), applying retention.
    `locks` (the store lock, then the ledger lock) are held by the caller and re-checked right
    before the rename. `cache` (a pass's own dict) keeps the ledger as last written: while the
    file is still that one (same inode, size and mtime), it is not scanned again — and in a
    scratch copy (scratch.scratch_writes), which nobody else reads, the rows are appended to it."""
    stamp = file_stamp(path)
    kept: Ledger | None = None
    if cache is not None and stamp is not None and cache.get("stamp") == stamp:
        kept = cache.pop("ledger")
    cached = kept is not None
    ledger = kept or scan_ledger(path, max_log_bytes=max_log_bytes) or Ledger(path, b"")
    if cache is not None:
        cache.clear()  # whatever happens below, the next append trusts only a completed write
    added: list[bytes] = []
    for row in rows:
        line = compact_json(row)
        if row["recordType"] == "terminal" and len(line) > MAX_ROW_BYTES:
            raise ConflictError("Cron execution terminal exceeds its reserved byte ceiling",
                code=ErrorCode.CAPACITY, file=path)
        problem = check_row(row, full=True)
        if problem:
            raise SxctlError(f"refusing to write an invalid ledger row: {problem}")
        found = ledger.groups.get(row["executionId"])
        if found is not None:  # a copy changes: a pass's own ledger may share the group (`cached_ledger`)
            ledger.groups[row["executionId"]] = Group(found.start, found.terminal, found.first_line)
        try:
            pair_row(ledger.groups, row, len(ledger.lines) + 1, forward=True)
        except LedgerError as error:
            raise SxctlError(f"refusing to write a ledger row: {error.message}") from None
        ledger.lines.append((row["executionId"], line))
        added.append(line)
    dropped = _retain(ledger, protected, retain, max_log_bytes, len(ledger.raw) + sum(map(len, added)))
    data = b"".join(line for execution_id, line in ledger.lines if execution_id not in dropped) if dropped \
        else ledger.raw + b"".join(added)  # `raw` is its lines, as read or last written
    if cached and not dropped and in_scratch(os.fspath(path.parent)):
        _append_in_place(path, b"".join(added))
    else:
        with PendingFile(path, path.with_name(f"{path.name}.{uuid.uuid4()}.tmp")) as pending:
            pending.write_all(data)

            def before_rename() -> None:
                faults.hit("before-rename")
                for lock in locks:
                    lock.check_held()

            pending.commit(before_rename)
    if cache is not None:
        if dropped:
            ledger.lines = [(eid, line) for eid, line in ledger.lines if eid not in dropped]
        ledger.raw = data
        for eid in dropped:
            ledger.groups.pop(eid, None)
        cache.update(ledger=ledger, stamp=file_stamp(path))


def _append_in_place(path: Path, data: bytes) -> None:
    """Add whole rows at the end of a ledger no other process reads (a rehearsal's copy): the
    bytes the rewrite would give, without copying a day's ledger at each row."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)

"""A scheduler pass's reads and writes of the store and the ledger, and what the only writer of a
workspace (`cron simulate`'s copy) trusts of its own last writes: the store's bytes and the
ledger, while each file is still the one it wrote (same inode, size and modification time) —
no re-read, no re-validation. Any other pass reads and checks both files every time."""

from __future__ import annotations

import json
from typing import Any

from ...fsio import file_stamp
from ...locks import MkdirLock
from ..store.file import read_store, write_store
from ..store.schema import canonical_store
from ..store.workspace import Workspace
from .ledger import Ledger, scan_ledger
from .ledger_write import append_rows, cached_ledger

LEDGER_LOCK_WAIT_S = 35.0  # beyond the 30 s staleness rule: the store lock is ours, so a ledger lock
#                             without an owner note can only belong to a dead pass or to a brief comis write


class PassFiles:
    """The store and ledger of one pass. `own_writes`: the sole writer's dict, shared by its
    passes (None: not the sole writer)."""

    def __init__(self, ws: Workspace, boot_id: str, own_writes: dict[str, Any] | None) -> None:
        self.ws = ws
        self.boot_id = boot_id
        self.sole_writer = own_writes is not None
        own = {} if own_writes is None else own_writes
        self.store_cache: dict[str, Any] = own.setdefault("store", {})  # the jobs' bytes, from one write to the next
        self.ledger_cache: dict[str, Any] = own.setdefault("ledger", {})  # as last written (`cached_ledger`)

    def read_store(self) -> dict[str, Any] | None:
        """The validated store; the sole writer's is canonical, and while the file is the one it
        last wrote, those bytes parsed again (validated and canonical when they were written)."""
        if not self.sole_writer:
            return read_store(self.ws)
        if self.store_cache.get("stamp") is not None and self.store_cache["stamp"] == file_stamp(self.ws.store):
            return json.loads(self.store_cache["bytes"])
        self.store_cache.clear()
        store = read_store(self.ws)
        return None if store is None else canonical_store(store)

    def locked_store(self, store: dict[str, Any]) -> dict[str, Any]:
        """The store once the lock is held: read again (another writer may have come first), but
        for the sole writer, whose `store` is the file."""
        return store if self.sole_writer else canonical_store(read_store(self.ws) or store)

    def read_ledger(self, max_log_bytes: int) -> Ledger:
        return ((cached_ledger(self.ws.ledger, self.ledger_cache) if self.sole_writer else None)
                or scan_ledger(self.ws.ledger, max_log_bytes=max_log_bytes) or Ledger(self.ws.ledger, b""))

    def write_store(self, store: dict[str, Any], lock: MkdirLock, touched: set[str]) -> None:
        try:
            data = write_store(self.ws, store, lock, touched=touched, cache=self.store_cache)
        except BaseException:
            self.store_cache.clear()  # it may hold jobs' bytes that were not written
            raise
        if self.sole_writer:
            self.store_cache.update(bytes=data, stamp=file_stamp(self.ws.store))

    def append(self, rows: list[dict[str, Any]], lock: MkdirLock, protected: set[str], *, max_log_bytes: int,
               retain: int) -> None:
        with MkdirLock(self.ws.ledger_sentinel, boot_id=self.boot_id, wait_s=LEDGER_LOCK_WAIT_S,
                       what="the cron ledger") as ledger_lock:
            append_rows(self.ws.ledger, rows, locks=[lock, ledger_lock], protected=protected,
                        max_log_bytes=max_log_bytes, retain=retain, cache=self.ledger_cache)

"""The revision protocol (callbacks.md §5): every write of the table goes through `write_table`."""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import faults
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, ErrorCode, InvalidDataError, NotFoundError, SxctlError
from ..fsio import STRAY_TEMP_MS, atomic_write, refuse_symlinks_below
from ..interrupts import deferred_interrupts, sigterm_interrupts
from ..locks import writer_lock
from ..project import Session, check_rotation_after_write, warn_if_not_live
from ..report import Reporter
from .table import (
    ATTEMPTS,
    FILE_NAME,
    LOCK_NAME,
    LOCK_WAIT_S,
    MISSING_FILE_WARNING,
    TableView,
    _raw_pair,
    _read_raw,
    _table_paths,
    encode_table,
    new_table_doc,
    parse_table,
)

# --- the revision protocol (callbacks.md §5) ------------------------------------------------------

class _Moved(Exception):
    """The file changed between our read and our rename: read again."""


@dataclass
class WriteResult:
    """What a committed write left on disk."""

    doc: dict[str, Any]
    rev: int
    path: Path
    created: bool
    outcome: Any
    verified: bool | None
    mirror_skipped: bool


@dataclass
class WriteOptions:
    """How a write behaves: `--expect-rev`, the lost-update watch (None = none), clock, notes."""

    expect_rev: int | None = None
    verify_s: float | None = 1.0
    clock: Clock = SYSTEM_CLOCK
    report: Reporter = field(default_factory=Reporter)
    mirror: bool = True  # the reference agent writes only its own copy


Apply = Callable[[dict[str, Any], int, int], Any]
Survives = Callable[[dict[str, Any], Any], bool]


def write_table(session: Session, apply: Apply, survives: Survives, options: WriteOptions | None = None) -> WriteResult:
    """Change the table under the revision protocol.

    `apply(doc, now_ms, attempt)` edits a deep copy in place (and may raise the tool's errors);
    `survives(doc, outcome)` tells whether a later revision still carries the change.
    """
    options = options or WriteOptions()
    clock, report, expect_rev = options.clock, options.report, options.expect_rev
    if not session.dir.is_dir():
        raise NotFoundError(f"session folder {session.dir} not found", code=ErrorCode.SESSION_NOT_FOUND)
    primary, mirror = _table_paths(session)
    if not options.mirror:
        mirror = None
    if not primary.parent.is_dir():
        raise NotFoundError(f"session folder {primary.parent} not found", code=ErrorCode.SESSION_NOT_FOUND)
    for table in (primary, mirror) if mirror is not None else (primary,):
        # as the inbox: never through a link on the way down from the project (<root>/.scorpiox/sessions/<id>)
        refuse_symlinks_below(table.parents[3], table.parent)
    _remove_stale_temps(primary, clock)
    # the lock first; then Ctrl-C and SIGTERM wait until the change is written, and it is said so
    with writer_lock(primary.parent / LOCK_NAME, LOCK_WAIT_S, "the callbacks table"), deferred_interrupts() as held:
        for attempt in range(ATTEMPTS):
            raw_pair = _raw_pair(primary, mirror)
            view = TableView(
                primary, mirror,
                parse_table(primary, raw_pair[0]) if raw_pair[0] is not None else None,
                parse_table(mirror, raw_pair[1]) if raw_pair[1] is not None and mirror is not None else None,
            )
            if expect_rev is not None and expect_rev != view.rev:
                raise ConflictError(f"expected rev {expect_rev}, found {view.rev}", code=ErrorCode.REV_MOVED)
            doc = copy.deepcopy(view.winner.doc) if view.winner else new_table_doc()
            now = clock.now_ms()
            outcome = apply(doc, now, attempt)
            new_rev = max(view.rev, view.other_rev) + 1
            doc["rev"] = new_rev
            doc["updated_ms"] = now
            data = encode_table(doc)

            def unchanged(expected: tuple[bytes | None, bytes | None] = raw_pair) -> None:
                faults.hit("before-rename")
                if _raw_pair(primary, mirror) != expected:
                    raise _Moved

            try:
                atomic_write(primary, data, keep_mode=True, precommit=unchanged, no_clobber=raw_pair[0] is None,
                             mtime_ms=now)  # the file's time is its updated_ms: a later one is an edit (table.py)
            except (_Moved, FileExistsError):
                clock.sleep(random.uniform(0.02, 0.2))
                continue
            break
        else:
            raise ConflictError(
                f"callbacks.json kept changing; gave up after {ATTEMPTS} attempts",
                    code=ErrorCode.REV_MOVED, file=primary
            )
        mirror_skipped = _write_mirror(mirror, data, new_rev, now, report)
    if held.signal is not None:  # Ctrl-C or SIGTERM came while it wrote: the change is made, and said so
        raise _interrupted(new_rev, primary)
    if not view.exists:
        report.warn(MISSING_FILE_WARNING.format(id=session.id))
    warn_if_not_live(session, report)
    check_rotation_after_write(session, clock, report)
    verified = None
    if options.verify_s is not None and session.state == "live":
        try:
            with sigterm_interrupts():
                verified = _verify(primary, data, outcome, survives, options.verify_s, clock)
        except KeyboardInterrupt:
            raise _interrupted(new_rev, primary) from None
    return WriteResult(doc, new_rev, primary, raw_pair[0] is None, outcome, verified, mirror_skipped)


def _interrupted(rev: int, primary: Path) -> SxctlError:
    return SxctlError(f"interrupted: the change was written to {primary} (rev {rev}); `sxctl callbacks list` "
                      "shows it", code=ErrorCode.INTERRUPTED, details={"rev": rev, "file": str(primary)})


def _write_mirror(mirror: Path | None, data: bytes, new_rev: int, now: int, report: Reporter) -> bool:
    """Write the same bytes to the main-checkout mirror unless it already moved past us."""
    if mirror is None:
        return False

    def not_ahead() -> None:
        raw = _read_raw(mirror)
        if raw is not None and parse_table(mirror, raw).rev > new_rev:
            raise _Moved

    try:
        atomic_write(mirror, data, keep_mode=True, precommit=not_ahead, mtime_ms=now)
    except _Moved:
        report.warn(f"the mirror {mirror} has a newer rev than {new_rev}; left it alone")
        return True
    return False


def _verify(primary: Path, written: bytes, outcome: Any, survives: Survives, verify_s: float, clock: Clock) -> bool:
    """Watch the file briefly: any other bytes on disk that lack our change mean the agent wrote
    its copy from an older state (whatever rev it gave it): a lost update (exit 4)."""
    deadline = clock.monotonic() + verify_s
    while True:
        last_look = clock.monotonic() >= deadline
        if not last_look:
            clock.sleep(0.1)
        try:
            raw = _read_raw(primary)
            table = parse_table(primary, raw) if raw is not None else None
        except InvalidDataError:
            table = None
        if table is not None and raw != written and not survives(table.doc, outcome):
            raise ConflictError(
                f"lost update: the agent wrote rev {table.rev} from an older state and your change is gone; "
                "run the command again", code=ErrorCode.LOST_UPDATE, file=primary,
            )
        if last_look:
            return True


def _remove_stale_temps(primary: Path, clock: Clock) -> None:
    """Leftover `callbacks.json.sxctl-*.tmp` older than an hour belong to a crashed writer."""
    cutoff = clock.now_ms() - STRAY_TEMP_MS
    try:
        entries = list(os.scandir(primary.parent))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.startswith(f"{FILE_NAME}.sxctl-") and entry.name.endswith(".tmp"):
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime_ns // 1_000_000 < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass



"""Retracting a pending message and housekeeping: clean and prune (spec inbox.md §9-10)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, NotFoundError, SxctlError, TooLateError
from ..fsio import atomic_write, remove_quietly, writer_holds
from ..jsondata import compact_json
from ..project import Session, as_session
from ..record import record
from .folder import InboxDir, inbox_dirs, newest_moved
from .keys import key_record_path, key_state, read_key_record
from .lifetimes import awaiting_ping, records_of, retracted_by_hand
from .message import IMAGE_EXTS, TIME_STEM
from .places import place_of
from .withdraw import withdraw_pending

# --- retract -----------------------------------------------------------------------------------

@record
class RetractResult:
    """What `inbox retract` did: the message's inbox and stem, and whether it was retracted already."""

    inbox: InboxDir
    stem: str
    already: bool


def stem_for_key(session: Session, key: str) -> str:
    """The stem an idempotency key was recorded with, searching every inbox copy."""
    for inbox in inbox_dirs(session):
        record = read_key_record(key_record_path(inbox, key))
        if record is not None:
            return record["stem"]
    raise NotFoundError(f"no message was sent with key {key!r} in session {session.id}", code=ErrorCode.STEM_NOT_FOUND)


def retract(session: Session, stem: str) -> RetractResult:
    """Withdraw a still-pending message (inbox.md §9); the single rename is the commit point."""
    dirs = inbox_dirs(session)
    located = next((d for d in dirs if os.path.lexists(d.pending_file(stem))), None)
    if located is None:
        located = next((d for d in dirs if d.state_of(stem) != "missing"), dirs[0])
    inbox = located
    outcome = withdraw_pending(inbox, stem)
    if outcome == "consumed":
        raise TooLateError(f"{stem} was already consumed", file=inbox.done / f"{stem}.json")
    if outcome == "missing":
        raise NotFoundError(f"no message {stem} in {inbox.path}", code=ErrorCode.STEM_NOT_FOUND)
    if outcome == "retracted":
        retracted_by_hand(inbox, stem)
    return RetractResult(inbox, stem, already=outcome == "already")


# --- housekeeping ------------------------------------------------------------------------------

def _older_files(folder: Path, cutoff_ms: int, use_ctime: bool) -> Iterator[tuple[Path, str]]:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        stamp = (st.st_ctime_ns if use_ctime else st.st_mtime_ns) // 1_000_000
        if stamp < cutoff_ms:
            yield Path(entry.path), entry.name


def _clean_candidates(inbox: InboxDir, cutoff_ms: int) -> Iterator[Path]:
    """Leftovers of crashed sxctl writers, and nothing else (inbox.md §10)."""
    temp_suffixes = tuple(f".{ext}.tmp" for ext in ("json", *IMAGE_EXTS))
    for path, name in _older_files(inbox.path, cutoff_ms, use_ctime=False):
        if name.endswith(temp_suffixes):
            stem = name.rsplit(".", 2)[0]
            if TIME_STEM.fullmatch(stem):
                yield path
            continue
        stem, _, ext = name.rpartition(".")
        if ext in IMAGE_EXTS and TIME_STEM.fullmatch(stem) and not any(
            os.path.lexists(folder / f"{stem}.json")
            for folder in (inbox.path, inbox.done, inbox.retracted)
        ) and not writer_holds(inbox.temp_file(stem)):  # a send at work published it before its message
            yield path
    for folder in (inbox.keys, inbox.lifetimes, inbox.lifetimes / "settled"):
        for path, name in _older_files(folder, cutoff_ms, use_ctime=False):
            if name.endswith(".tmp"):
                yield path


def clean(session: Session, older_than_ms: int, *, dry_run: bool = False, clock: Clock = SYSTEM_CLOCK) -> list[Path]:
    """Delete stray temps and orphan sidecars older than the age in every inbox copy."""
    cutoff = clock.now_ms() - older_than_ms
    removed = []
    for inbox in inbox_dirs(session):
        inbox.refuse_symlinks(inbox.path, inbox.keys, inbox.lifetimes / "settled")
        for path in list(_clean_candidates(inbox, cutoff)):
            if writer_holds(path):  # a send at work (stopped, or slow): its temp is not a leftover
                continue
            if not dry_run:
                remove_quietly(path)
            removed.append(path)
    return removed


def prune(
    session: Session,
    older_than_ms: int,
    *,
    retracted: bool = False,
    keys: bool = False,
    keep: int = 0,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> tuple[list[Path], int]:
    """Delete old consumed (and retracted) messages and key records; never a pending message,
    never one of the `keep` newest consumed messages (nor their images).
    Returns (removed paths, number of files kept)."""
    cutoff = clock.now_ms() - older_than_ms
    removed: list[Path] = []
    kept = 0
    newest = _newest_consumed(session, keep)
    for inbox in inbox_dirs(session):
        folders = [inbox.done] + ([inbox.retracted] if retracted else [])
        inbox.refuse_symlinks(*folders, *([inbox.keys] if keys else []), inbox.lifetimes / "settled")
        waiting = awaiting_ping(inbox, clock.now_ms())  # a job's run whose monitor is told when a pass sees it read
        for folder in folders:
            old = {path for path, name in _older_files(folder, cutoff, use_ctime=True)
                   if (stem := name[:-5] if name.endswith(".json") else name.rsplit(".", 1)[0]) not in waiting
                   and (folder, stem) not in newest}
            kept += sum(1 for name in _listdir(folder) if folder / name not in old)
            removed += sorted(old)
            gone = {path.name[: -len(".json")] for path in old if path.name.endswith(".json")}
            removed += sorted(records_of(inbox, gone)) if gone else []  # their expiries and deadlines
        if keys:
            old_keys = []
            for path, name in _older_files(inbox.keys, cutoff, use_ctime=False):
                if not name.endswith(".json"):
                    continue
                try:
                    record = read_key_record(path)
                except SxctlError:
                    record = None
                if record is not None and any(os.path.lexists(name) for name in (
                        inbox.pending_file(record["stem"]), inbox.temp_file(record["stem"]))):
                    continue  # its message is pending, or being written (a record it still needs)
                old_keys.append(path)
            kept += sum(1 for name in _listdir(inbox.keys) if name.endswith(".json")) - len(old_keys)
            removed += sorted(old_keys)
    if not dry_run:
        removed_set = set(removed)
        for inbox in inbox_dirs(session):
            _remember_pruned_keys(inbox, removed_set)
        for path in removed:
            remove_quietly(path)
    return removed, kept


def _newest_consumed(session: Session, keep: int) -> set[tuple[Path, str]]:
    """(done folder, stem) of the `keep` most recently consumed messages, by ctime (no file read)."""
    if keep <= 0:
        return set()
    stamped = [(ctime_ns, inbox.done, name[: -len(".json")]) for inbox in inbox_dirs(session)
               for ctime_ns, name in newest_moved(inbox.done, keep)]
    stamped.sort(key=lambda entry: entry[0], reverse=True)
    return {(folder, stem) for _, folder, stem in stamped[:keep]}


def _remember_pruned_keys(inbox: InboxDir, removed: set[Path]) -> None:
    """Before a keyed message's file goes, its key record (if it stays) notes the final state, so
    the same send stays a duplicate instead of delivering the message a second time."""
    stems = {path.name[:-5]: state for state, folder in (("consumed", inbox.done), ("retracted", inbox.retracted))
             for path in removed if path.parent == folder and path.name.endswith(".json")}
    if not stems:
        return
    for path, name in _older_files(inbox.keys, 2**62, use_ctime=False):
        if not name.endswith(".json") or path in removed:
            continue
        try:
            record = read_key_record(path)
        except SxctlError:
            continue
        if record is None or record["stem"] not in stems or record.get("pruned"):
            continue
        st = os.lstat(path)
        atomic_write(path, compact_json({**record, "pruned": stems[record["stem"]]}))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # `prune --keys` ages records by mtime


def _listdir(folder: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []



def evidence_for_key(project: Path, sessions: list, key: str) -> dict[str, Any]:
    """Was a message sent with `key` (the cron runner uses the execution id)? Where is it now
    (after `inbox forward` moved it, in the session it was moved to)?"""
    for info in sessions:
        session = as_session(info, project, "newest")
        for inbox in inbox_dirs(session):
            try:
                record = read_key_record(key_record_path(inbox, key))
            except SxctlError:
                record = None
            if record is None:
                continue
            state = key_state(inbox, record)
            if state == "missing" or "moved_from" in record:
                place = place_of(session, inbox, record)
                return {"key_record": True, "stem": place.stem, "state": place.state,
                        "session": place.session.id, "copy": place.inbox.copy}
            return {"key_record": True, "stem": record["stem"], "state": state,
                    "session": info.id, "copy": inbox.copy}
    return {"key_record": False, "stem": None, "state": "missing", "session": None}

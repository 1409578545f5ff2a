"""Message lifetimes: when a message nobody read is withdrawn (`--expires`) and by when it should
have been read (`--read-within`).

They are kept where the agent never reads, never as a key of the message: one record per message,
`inbox/.lifetimes/<stem>.json`, written while the send holds the stem (its `<stem>.json.tmp`) and
before the message is published. A record is *open* while its message waits; once its end is
known (read, expired, retracted) a sweep *settles* it into `.lifetimes/settled/<stem>.json`, so a
sweep reads only the open ones.

Expiry is the inbox's own retract (`manage.withdraw_pending`): its one rename is the commit point,
so against an agent that claims a message by renaming it into `done/` exactly one of the two wins,
and a message the agent took meanwhile counts as read. The settled record saying `expired` is
written before that rename: a crash between them leaves the message pending (the next sweep tries
again), and every view reads a record's end only for a message in `retracted/`. Nothing here ever
touches a message in `done/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import faults, jsondata
from ..errors import SxctlError
from ..fsio import atomic_write, ensure_private_dir, read_data_file, remove_quietly
from ..jsondata import compact_json
from ..locks import flock_file
from .folder import InboxDir, is_message_name, is_real_dir
from .message import check_stem
from .withdraw import withdraw_pending

SETTLED = "settled"
#: the times a record keeps (epoch ms, or null)
TIMES = ("sent_ms", "expires_ms", "read_by_ms", "missed_ms", "settled_ms", "read_ms")
#: the largest record sxctl writes is a few hundred bytes; a larger file is not one of its records
RECORD_CAP = 8192
#: how a message whose lifetime ended ended, as its settled record says
ENDS = ("read", "expired", "retracted")
#: what a job's monitor is told on (`cron add --ping-on`): the message written (the default) or read
PING_ON = ("written", "read")

#: a job run's ping for its message: (the record's `run`, `success` or `fail`, why)
PingSender = Callable[[dict[str, Any], str, str], None]


def open_path(inbox: InboxDir, stem: str) -> Path:
    return inbox.lifetimes / f"{stem}.json"


def settled_path(inbox: InboxDir, stem: str) -> Path:
    return inbox.lifetimes / SETTLED / f"{stem}.json"


def _int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at `path`, or None when there is none or it is not one sxctl wrote (a file that
    lies is never acted on: its message is left as it is)."""
    try:
        raw = read_data_file(path, RECORD_CAP)
    except SxctlError:
        return None
    if raw is None:
        return None
    try:
        body = jsondata.strict_loads(raw)  # a key twice: not a record sxctl wrote
    except (jsondata.JSONDataError, ValueError):
        return None
    if not (isinstance(body, dict) and isinstance(body.get("stem"), str) and path.name == f"{body['stem']}.json"
            and all(_int_or_none(body.get(key)) for key in TIMES)
            and body.get("outcome", "read") in ENDS):
        return None
    run = body.get("run")
    if run is not None and not (isinstance(run, dict) and all(isinstance(run.get(k), str) for k in
                                                              ("jobId", "executionId"))
                                and run.get("pingOn", "written") in PING_ON):
        return None
    try:
        check_stem(body["stem"])
    except SxctlError:
        return None
    return body


def write_open(inbox: InboxDir, stem: str, body: dict[str, Any]) -> Path:
    """Write the open record of `stem` (the caller holds the stem); its path."""
    inbox.refuse_symlinks(inbox.path, inbox.lifetimes)
    ensure_private_dir(inbox.lifetimes)
    path = open_path(inbox, stem)
    atomic_write(path, compact_json(body))
    return path


def record_of(inbox: InboxDir, stem: str) -> dict[str, Any] | None:
    """The record of `stem` in `inbox`: the open one, else the settled one, else None."""
    return read_record(open_path(inbox, stem)) or read_record(settled_path(inbox, stem))


def refine(state: str, body: dict[str, Any] | None) -> str:
    """A message's state with its lifetime: one in `retracted/` that expired is `expired`."""
    if state == "retracted" and body is not None and body.get("outcome") == "expired":
        return "expired"
    return state


def refined_state(inbox: InboxDir, stem: str) -> str:
    """`InboxDir.state_of`, with `expired` for a message withdrawn because it expired."""
    state = inbox.state_of(stem)
    if state == "retracted" and os.path.isdir(inbox.lifetimes):
        state = refine(state, read_record(settled_path(inbox, stem)))
    return state


def expiry_of(inbox: InboxDir, stem: str) -> int | None:
    """When the pending message `stem` expires (None: never, or no record)."""
    body = read_record(open_path(inbox, stem))
    return body.get("expires_ms") if body is not None else None


def withdraw(inbox: InboxDir, stem: str, body: dict[str, Any], now_ms: int) -> str:
    """Withdraw the expired message `stem`: its settled record first (`expired`), then the inbox's
    own retract. What became of it, as a message state: `expired`, or `consumed` (the agent took
    it first: it counts as read), `retracted` (withdrawn by someone else first), `missing`."""
    settle_write(inbox, stem, body, "expired", now_ms)
    faults.hit("before-withdraw")
    try:
        outcome = withdraw_pending(inbox, stem)
    except SxctlError:  # a file in its way in retracted/: it stays pending, and no record says otherwise
        remove_quietly(settled_path(inbox, stem))
        raise
    if outcome == "retracted":
        return "expired"
    if outcome == "consumed":
        return "consumed"
    if outcome == "already":  # retracted by someone else first: not an expiry
        settle_write(inbox, stem, body, "retracted", now_ms)
        return "retracted"
    return "missing"


def sweep_lock(inbox: InboxDir, wait_s: float = 10.0) -> Any:
    """The lock every withdrawal and every settling of `inbox`'s records holds
    (`.lifetimes/.sweep.lock`): two sweeps at once must not both act on one record."""
    inbox.refuse_symlinks(inbox.path, inbox.lifetimes / SETTLED)
    ensure_private_dir(inbox.lifetimes)
    return flock_file(inbox.lifetimes / ".sweep.lock", wait_s, f"another sweep of {inbox.lifetimes} is running")


def move_verdict(inbox: InboxDir, stem: str, now_ms: int) -> str | None:
    """What a move of the pending `stem` meets in its lifetime (read only): `expired` (it is
    withdrawn instead), `invalid_lifetime` (a record sxctl cannot read: it stays), or None."""
    if not os.path.isdir(inbox.lifetimes) or not os.path.lexists(open_path(inbox, stem)):
        return None
    body = read_record(open_path(inbox, stem))
    if body is None:
        return "invalid_lifetime"
    return "expired" if body.get("expires_ms") is not None and body["expires_ms"] <= now_ms else None


def expire_before_move(inbox: InboxDir, stem: str, now_ms: int) -> str | None:
    """`inbox forward` is about to move `stem`: if its expiry passed, it is withdrawn instead (its
    state after that), else None — an agent never gets an expired message by a move. A record that
    cannot be read is `invalid_lifetime`: the message stays where it is."""
    verdict = move_verdict(inbox, stem, now_ms)
    if verdict != "expired":
        return verdict
    with sweep_lock(inbox):
        body = read_record(open_path(inbox, stem))
        if body is None or body.get("expires_ms") is None or body["expires_ms"] > now_ms:
            return None
        return withdraw(inbox, stem, body, now_ms)


def expire_if_due(inbox: InboxDir, stem: str, now_ms: int) -> str:
    """Withdraw `stem` if it is pending and its expiry passed; its state after that (a waiting
    command, `inbox wait`, does what a sweep would do for its one message)."""
    body = read_record(open_path(inbox, stem))
    if body is None or body.get("expires_ms") is None or body["expires_ms"] > now_ms:
        return inbox.state_of(stem)
    with sweep_lock(inbox):
        if read_record(open_path(inbox, stem)) is None:  # settled meanwhile: the message says how it ended
            return refined_state(inbox, stem)
        return withdraw(inbox, stem, body, now_ms)


def settle_write(inbox: InboxDir, stem: str, body: dict[str, Any], end: str, now_ms: int) -> None:
    inbox.refuse_symlinks(inbox.path, inbox.lifetimes, inbox.lifetimes / SETTLED)
    ensure_private_dir(inbox.lifetimes / SETTLED)
    settled = {**body, "outcome": end, "settled_ms": now_ms}
    if end == "read":
        settled["read_ms"] = read_ms(inbox, stem)
    atomic_write(settled_path(inbox, stem), compact_json(settled))


def read_ms(inbox: InboxDir, stem: str) -> int | None:
    """When the agent read `stem`: its move into done/ set the file's ctime."""
    try:
        return os.lstat(inbox.done / f"{stem}.json").st_ctime_ns // 1_000_000
    except OSError:
        return None


def open_records(inbox: InboxDir, unreadable: list[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(stem, record) of every open record sxctl can read; the stems of the others are added to
    `unreadable` (their messages never expire: doctor says so)."""
    try:
        names = sorted(os.listdir(inbox.lifetimes))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if is_message_name(name):
            body = read_record(inbox.lifetimes / name)
            if body is not None:
                yield name[: -len(".json")], body
            elif unreadable is not None:
                unreadable.append(name[: -len(".json")])


def annotate(rows: list[Any]) -> list[Any]:
    """Listing rows (`folder.MessageRow`) with their lifetimes, and `expired` for a message
    withdrawn because it expired. One `isdir` per inbox folder that keeps none."""
    kept: dict[Path, bool] = {}
    for row in rows:
        if row.state not in ("pending", "consumed", "retracted"):
            continue
        inbox = InboxDir(row.path.parent if row.state == "pending" else row.path.parent.parent, row.copy)
        if inbox.path not in kept:
            kept[inbox.path] = os.path.isdir(inbox.lifetimes)
        if not kept[inbox.path]:
            continue
        settled = read_record(settled_path(inbox, row.stem)) if row.state == "retracted" else None
        body = settled or record_of(inbox, row.stem)
        if body is not None:
            row.expires_ms, row.read_by_ms = body.get("expires_ms"), body.get("read_by_ms")
            row.state = refine(row.state, body)
    return rows


def receipt_of(inbox: InboxDir, stem: str, receipt: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """A run's receipt (cron/run/receipts.py) with its message's lifetime: `expired` for one
    withdrawn because it expired, `readByMs` and `overdue` (unread past it) or `late` (read after it)."""
    if not os.path.isdir(inbox.lifetimes):
        return receipt
    state = receipt["state"]
    settled = read_record(settled_path(inbox, stem)) if state == "retracted" else None
    body = settled or record_of(inbox, stem)
    if body is None:
        return receipt
    receipt = {**receipt, "state": "expired"} if refine(state, body) == "expired" else dict(receipt)
    read_by = body.get("read_by_ms")
    if read_by is not None:
        receipt["readByMs"] = read_by
        if state == "pending":
            receipt["overdue"] = read_by <= now_ms
        elif state == "read" and receipt.get("readAtMs") is not None:
            receipt["late"] = receipt["readAtMs"] > read_by
    if body.get("expires_ms") is not None:
        receipt["expiresAtMs"] = body["expires_ms"]
    return receipt


def state_words(state: str, expires_ms: int | None, read_by_ms: int | None, now_ms: int) -> str:
    """A row's state cell: `pending, expires in 1h`, `pending, read by 14:02 (overdue 5m)`."""
    if state != "pending" or (expires_ms is None and read_by_ms is None):
        return state
    from ..timeparse import format_duration_ms, format_relative_ms, shown_time

    words = []
    if read_by_ms is not None:  # a deadline not within the day names its date
        fmt = "%H:%M" if abs(read_by_ms - now_ms) < 12 * 3_600_000 else "%Y-%m-%d %H:%M"
        words.append(f"read by {shown_time(read_by_ms, fmt=fmt)}" +
                     (f" (overdue {format_duration_ms(now_ms - read_by_ms)})" if read_by_ms <= now_ms else ""))
    if expires_ms is not None:
        words.append(f"expires {format_relative_ms(expires_ms, now_ms)}" if expires_ms > now_ms
                     else "expired: withdrawn at the next pass or `sxctl inbox expire`")
    return ", ".join([state, *words])


# --- moves (`inbox forward`) and housekeeping -------------------------------------------------

def carry(inbox: InboxDir, stem: str, new_inbox: InboxDir, to_stem: str, source_id: str) -> list[Path]:
    """Give the target of a move the message's open record (under its new stem, `moved_from`
    saying where from), before the move's commit; the paths made (the move's undo removes them)."""
    body = read_record(open_path(inbox, stem)) if os.path.isdir(inbox.lifetimes) else None
    if body is None:  # a record a killed send left for the target's stem is not this message's
        if is_real_dir(new_inbox.lifetimes):
            remove_quietly(open_path(new_inbox, to_stem))
        return []
    new_inbox.refuse_symlinks(new_inbox.path, new_inbox.lifetimes)
    ensure_private_dir(new_inbox.lifetimes)
    path = open_path(new_inbox, to_stem)
    atomic_write(path, compact_json({**body, "stem": to_stem, "moved_from": {"session": source_id, "stem": stem}}))
    return [path]


def carried(new_inbox: InboxDir, to_stem: str, source_id: str, stem: str) -> list[Path]:
    """The record an interrupted move gave its target (for the recovery's undo)."""
    new_inbox.refuse_symlinks(new_inbox.path, new_inbox.lifetimes)
    body = read_record(open_path(new_inbox, to_stem))
    return [open_path(new_inbox, to_stem)] if body is not None and body.get("moved_from") == {
        "session": source_id, "stem": stem} else []


def forget_moved(inbox: InboxDir, stem: str) -> None:
    """After a move: the source's open record goes (its target has its own)."""
    inbox.refuse_symlinks(inbox.path, inbox.lifetimes)
    remove_quietly(open_path(inbox, stem))


#: how long `inbox prune` keeps a read message whose job's monitor has not been told yet
PING_WAIT_MS = 7 * 86_400_000


def awaiting_ping(inbox: InboxDir, now_ms: int) -> set[str]:
    """Stems whose open record is a job's run that pings on read, sent in the last 7 days: `inbox
    prune` keeps their messages until a pass has told the monitor (and settled the record)."""
    if not os.path.isdir(inbox.lifetimes):
        return set()
    return {stem for stem, body in open_records(inbox) if (body.get("run") or {}).get("pingOn") == "read"
            and (body.get("sent_ms") or 0) > now_ms - PING_WAIT_MS}


def retracted_by_hand(inbox: InboxDir, stem: str) -> None:
    """`inbox retract` withdrew `stem`: an expiry killed before its rename left a settled record
    saying `expired`, which no longer tells what happened."""
    settled = read_record(settled_path(inbox, stem)) if os.path.isdir(inbox.lifetimes) else None
    if settled is not None and settled.get("outcome") == "expired":
        settle_write(inbox, stem, settled, "retracted", settled.get("settled_ms") or 0)


def records_of(inbox: InboxDir, stems: set[str]) -> list[Path]:
    """The records (open or settled) of `stems`, for `inbox prune` removing their messages."""
    found = []
    for stem in stems:
        for path in (open_path(inbox, stem), settled_path(inbox, stem)):
            if os.path.lexists(path):
                found.append(path)
    return found

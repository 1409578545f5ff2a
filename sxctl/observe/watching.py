"""`watch`: snapshots of the files, diffed into events, one look after another (following the
agent when it restarts or rotates)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..callbacks.table import doc_slots, view_table
from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.run.ledger import project_run, scan_ledger
from ..cron.spend.rules import GUARD_KEYS
from ..cron.store.file import read_store
from ..cron.timeline.views import job_state
from ..errors import InvalidDataError, SxctlError
from ..fsio import file_stamp
from ..inbox.folder import inbox_dirs, is_message_name, message_names, unstamped_names
from ..inbox.wait import rotation_target
from ..project import Session, session_info
from .spend_view import guard_states
from .stranded import Stranded, stranded_sessions
from .waiter import ChangeWaiter


@dataclass
class Snapshot:
    """What `watch` compares between two looks at the files."""

    state: str = "unknown"
    rev: int | None = None
    slots: dict[int, tuple] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    #: per done/ and retracted/ folder, what was there (a mark, not every name: months of history)
    moved: dict[str, MovedMark] = field(default_factory=dict)
    arrived: dict[str, list[str]] = field(default_factory=dict)  # state -> stems moved in since the last look
    ledger_size: int = -1
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)  # execution id -> (status, job id)
    jobs_stamp: tuple = ()
    jobs: dict[str, str] = field(default_factory=dict)  # job name -> state (`paused:expired` …)
    job_names: dict[str, str] = field(default_factory=dict)  # job id -> name (a `cron_run` event names its job)
    guarded: bool = False  # a job has a spend guard (its own or the budget's): `guards` is looked at
    guards: dict[str, dict[str, Any]] = field(default_factory=dict)  # job name -> its spend guards' state


def snapshot(session: Session, ws, clock: Clock = SYSTEM_CLOCK, previous: Snapshot | None = None) -> Snapshot:
    snap = Snapshot()
    snap.state = session_info(session.dir, clock).state
    try:
        view = view_table(session)
        if view.winner is not None:
            snap.rev = view.winner.rev
            snap.slots = {i: (s.get("active"), s.get("repeat_count"), s.get("fire_at_ms"))
                          for i, s in doc_slots(view.winner.doc).items()}
    except InvalidDataError:
        snap.rev = -1
    arrived: dict[str, set[str]] = {"consumed": set(), "retracted": set()}
    for inbox in inbox_dirs(session):
        snap.pending |= _stems(inbox.path)
        for state in ("consumed", "retracted"):
            folder = inbox.folder_of(state)
            before = previous.moved.get(str(folder)) if previous is not None else None
            snap.moved[str(folder)], new = _look_moved(folder, before)
            arrived[state] |= new
    if previous is not None:  # a message seen pending and gone: where did it go?
        for stem in previous.pending - snap.pending:
            for inbox in inbox_dirs(session):
                state = inbox.state_of(stem)
                if state in arrived:
                    arrived[state].add(stem)
                    break
    snap.arrived = {state: sorted(stems) for state, stems in arrived.items()}
    try:
        size = os.stat(ws.ledger).st_size
    except OSError:
        size = -1
    if previous is not None and size == previous.ledger_size:
        snap.ledger_size, snap.runs = size, previous.runs
    else:
        snap.ledger_size = size
        snap.runs = _ledger_runs(ws)
    stamp = tuple(file_stamp(path) for path in (ws.store, ws.policy))
    if previous is not None and stamp == previous.jobs_stamp:
        snap.jobs_stamp, snap.jobs, snap.job_names = stamp, previous.jobs, previous.job_names
        snap.guarded = previous.guarded
    else:
        snap.jobs_stamp = stamp
        snap.jobs, snap.job_names = _job_states(ws)
        snap.guarded = _has_guards(ws)
    if snap.guarded:  # the figures change with every stats.json write: looked at each time
        snap.guards = _guards(ws, session, clock)
    return snap


def _has_guards(ws) -> bool:
    try:
        policy = read_policy(ws)
    except SxctlError:
        return False
    return bool(policy.get("budget")) or any(any(key in entry for key in GUARD_KEYS)
                                             for entry in policy["jobs"].values())


def _guards(ws, session: Session, clock: Clock) -> dict[str, dict[str, Any]]:
    """Each guarded job's state: held (and why), and the figures its guards cannot read."""
    try:
        store, policy = read_store(ws), read_policy(ws)
    except SxctlError:
        return {}
    rows = guard_states(ws, store or {"jobs": [], "activeClaims": []}, policy, session.project, clock)
    return {row["name"]: {"held": row["held"], "reason": row["reason"] if row["held"] else None,
                          "detail": row["detail"], "unreadable": sorted(row["unreadable"])} for row in rows}


def _job_states(ws) -> tuple[dict[str, str], dict[str, str]]:
    """Each job's state by name, and each job's name by id."""
    try:
        store, policy = read_store(ws), read_policy(ws)["jobs"]
    except SxctlError:
        return {}, {}
    jobs = (store or {"jobs": []})["jobs"]
    return ({job["name"]: job_state(job, policy.get(job["id"])) for job in jobs},
            {job["id"]: job["name"] for job in jobs})


def _stems(folder) -> set[str]:
    return {name[:-5] for name in message_names(folder)}


@dataclass(frozen=True)
class MovedMark:
    """A done/ or retracted/ folder as last seen: its mtime, the latest time-stamped name in it
    (the agent reads in name order, so what arrives later sorts later) and its other names."""

    mtime_ns: int
    latest: str
    others: frozenset[str]


def _look_moved(folder, before: MovedMark | None) -> tuple[MovedMark, set[str]]:
    """The folder's new mark and the stems moved into it since `before` (none on the first look).
    Unchanged folder (same mtime): no listing at all."""
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        mtime = -1
    # a rename within the same tick of the folder's clock leaves the mtime as it was: a folder
    # changed in the last second is listed again
    if before is not None and mtime == before.mtime_ns and time.time_ns() - mtime > 1_000_000_000:
        return before, set()
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    unstamped = unstamped_names(names)
    others = frozenset(name for name in unstamped if is_message_name(name))
    stamped = set(names).difference(unstamped)
    mark = MovedMark(mtime, max(stamped, default=""), others)
    if before is None:
        return mark, set()
    new = {name for name in stamped if name > before.latest} | (others - before.others)
    return mark, {name[:-5] for name in new}


def _ledger_runs(ws) -> dict[str, tuple[str, str]]:
    try:
        ledger = scan_ledger(ws.ledger)
    except InvalidDataError:
        return {}
    if ledger is None:
        return {}
    return {eid: (project_run(group)["status"], group.start["jobId"])
            for eid, group in ledger.groups.items() if group.start is not None}


def diff(old: Snapshot, new: Snapshot, now_ms: int) -> list[dict[str, Any]]:
    """The events that turn `old` into `new` (JSON Lines of `watch --json`)."""
    events: list[dict[str, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        events.append({"event": kind, "ts_ms": now_ms, **fields})

    if new.state != old.state:
        add("session", state=new.state)
    for stem in sorted(new.pending - old.pending):
        add("inbox_pending", stem=stem)
    for stem in new.arrived.get("consumed", []):
        add("inbox_consumed", stem=stem)
    for stem in new.arrived.get("retracted", []):
        add("inbox_retracted", stem=stem)
    if new.rev != old.rev:
        for slot_id in sorted(set(new.slots) | set(old.slots)):
            before, after = old.slots.get(slot_id), new.slots.get(slot_id)
            if before == after:
                continue
            if after is not None and before is not None and before[0] is True and isinstance(before[1], int) \
                    and isinstance(after[1], int) and 0 <= after[1] < before[1]:
                add("timer_fired", slot=slot_id, repeat_count=after[1], retired=after[0] is not True)
            elif after is not None and after[0] is True and (before is None or before[0] is not True):
                add("timer_set", slot=slot_id, fire_at_ms=after[2], repeat_count=after[1])
            elif after is not None and after[0] is not True and before is not None and before[0] is True:
                add("timer_cancelled", slot=slot_id)
            else:
                add("timer_changed", slot=slot_id, fire_at_ms=after[2] if after else None)
        add("callbacks", rev=new.rev, active=sum(1 for s in new.slots.values() if s[0] is True))
    for execution_id, (status_now, job_id) in new.runs.items():
        if old.runs.get(execution_id, ("",))[0] != status_now:  # name: None for a job removed since
            add("cron_run", executionId=execution_id, status=status_now, jobId=job_id, name=new.job_names.get(job_id))
    for name, state in new.jobs.items():
        if old.jobs.get(name, state) != state:  # a job that changed state (paused:expired …)
            add("cron_job", name=name, state=state, was=old.jobs[name])
    for name, guard in new.guards.items():  # a spend guard began or stopped holding a job, or reading
        was = old.guards.get(name)
        if was is None and not guard["held"] and not guard["unreadable"]:
            continue
        if was is None or (was["held"], was["reason"], was["unreadable"]) != (guard["held"], guard["reason"],
                                                                              guard["unreadable"]):
            add("cron_guard", name=name, **guard)
    return events


def stranded_events(before: dict[str, Stranded], now: dict[str, Stranded], now_ms: int) -> list[dict[str, Any]]:
    """`stranded` when a session becomes stranded or what it holds changes (with the commands
    that fix it), `stranded_resolved` when it holds nothing any more or a session is live again."""
    events = []
    for session_id, entry in now.items():
        was = before.get(session_id)
        if was is None or (was.pending, was.timers, was.live) != (entry.pending, entry.timers, entry.live):
            events.append({"event": "stranded", "ts_ms": now_ms, **entry.to_json()})
    for session_id in sorted(before.keys() - now.keys()):
        events.append({"event": "stranded_resolved", "ts_ms": now_ms, "session": session_id})
    return events


def watch_events(session: Session, ws, *, clock: Clock = SYSTEM_CLOCK, interval_s: float = 0.25):
    """Yield the events of each look at the files, forever (an empty list when nothing changed,
    so that the caller can keep its own deadline)."""
    waiter = _waiter_for(session, ws)
    current = snapshot(session, ws, clock)
    stranded = {entry.id: entry for entry in stranded_sessions(session.project, clock)}
    yield [{"event": "watching", "ts_ms": clock.now_ms(), "session": session.id, "workspace": str(ws.root),
            "mode": waiter.mode, "pending": sorted(current.pending), "rev": current.rev, "state": current.state},
           *stranded_events({}, stranded, clock.now_ms())]
    next_rotation_check = time.monotonic() + ROTATION_CHECK_S
    try:
        while True:
            waiter.wait(interval_s)
            if time.monotonic() >= next_rotation_check:
                next_rotation_check = time.monotonic() + ROTATION_CHECK_S
                target = _followed_session(session, clock)
                before, stranded = stranded, {entry.id: entry for entry in stranded_sessions(session.project, clock)}
                if target is not None:  # the agent restarted or rotated: watch where it is now
                    waiter.close()
                    waiter = _waiter_for(target, ws)
                    current = snapshot(target, ws, clock)
                    yield [{"event": "session", "ts_ms": clock.now_ms(), "from": session.id, "to": target.id,
                            "pending": sorted(current.pending), "rev": current.rev, "state": current.state},
                           *stranded_events(before, stranded, clock.now_ms())]
                    session = target
                    continue
                later = snapshot(session, ws, clock, current)
                events = diff(current, later, clock.now_ms()) + stranded_events(before, stranded, clock.now_ms())
            else:
                later = snapshot(session, ws, clock, current)
                events = diff(current, later, clock.now_ms())
            current = later
            yield events
    finally:
        waiter.close()


ROTATION_CHECK_S = 1.0


def _waiter_for(session: Session, ws) -> ChangeWaiter:
    inboxes = inbox_dirs(session)
    return ChangeWaiter([session.dir, *(d.path for d in inboxes), *(d.done for d in inboxes), ws.scheduler])


def _followed_session(session: Session, clock: Clock) -> Session | None:
    """The session to follow once the watched one is no longer live: the one live session that
    is not older (the same rule as `inbox wait --follow`), or None to keep watching."""
    if session_info(session.dir, clock).state == "live":
        return None
    return rotation_target(session, clock)

"""One view of everything that will happen: `status`, the merged `next` timeline, and the
snapshots that `watch` diffs into events. Read-only: nothing here takes a lock or writes."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from . import callbacks as cb
from .clock import SYSTEM_CLOCK, Clock
from .errors import InvalidDataError, SxctlError, SystemRefusedError
from .inbox import count_since, deliverable_count, inbox_dirs, list_messages, message_names, rotation_target
from .project import (
    Session,
    SessionInfo,
    as_session,
    freshest_live,
    list_sessions,
    live_sessions,
    session_info,
    several_live_warning,
)
from .record import record

# --- stranded: what a restart or a rotation left where no agent reads it --------------------------

@record
class Stranded:
    """A session of the project that is not live, holding pending messages or active timers,
    while another session is live: nobody will read them where they are."""

    id: str
    state: str  # stale | stopped | unknown
    pending: int
    timers: int
    live: str  # the live session (the freshest), where they belong now

    def fixes(self) -> list[str]:
        """The commands that move them into the live session (a session id is a plain word,
        sessions.md §4, so it needs no quoting; one that starts with '-' is joined with '=')."""
        source = f"--from={self.id}" if self.id.startswith("-") else f"--from {self.id}"
        return ([f"sxctl inbox forward {source}"] if self.pending else []) \
            + ([f"sxctl callbacks move {source}"] if self.timers else [])

    def describe(self) -> str:
        held = " and ".join(part for part in (
            f"{self.pending} pending message(s)" if self.pending else "",
            f"{self.timers} active timer(s)" if self.timers else "") if part)
        return (f"session {self.id} ({self.state}) holds {held} that no agent will read: "
                f"the agent now runs in {self.live}")

    def to_json(self) -> dict[str, Any]:
        return {"session": self.id, "state": self.state, "pending": self.pending, "timers": self.timers,
                "live": self.live, "fix": self.fixes(), "message": self.describe()}


def stranded_sessions(project, clock: Clock = SYSTEM_CLOCK, infos: list[SessionInfo] | None = None
                      ) -> list[Stranded]:
    """The one definition of "stranded" (status, doctor, next and watch all ask here): every
    session that is not live and holds pending messages or active timers, while another session
    is live. A timer whose message the live session's table also has (active or retired) was
    carried over by a rotation (sessions.md §9) and is not counted. Newest session first."""
    infos = list_sessions(project, clock) if infos is None else infos
    live = freshest_live(infos)
    if live is None:  # no agent anywhere: nothing is read, and no other place to move it to
        return []
    carried = {slot.get("message") for slot in _table_slots(as_session(live, project, "live"))}
    found = []
    for info in infos:
        if info.state == "live":
            continue
        session = as_session(info, project, "flag")
        try:
            pending = sum(deliverable_count(inbox.path) for inbox in inbox_dirs(session))
        except OSError:  # an inbox this user cannot list (doctor's permissions check names it)
            pending = 0
        timers = sum(1 for slot in _table_slots(session) if cb.is_active(slot) and slot["message"] not in carried)
        if pending or timers:
            found.append(Stranded(info.id, info.state, pending, timers, live.id))
    return found


def _table_slots(session: Session) -> list[dict[str, Any]]:
    """The slots of a session's timer table (both copies in a worktree); none when the file is
    missing or unreadable (`status` and `doctor` report an unreadable table on their own)."""
    try:
        view = cb.view_table(session)
    except (SxctlError, OSError):
        return []
    return list(cb.doc_slots(view.winner.doc).values()) if view.winner is not None else []


def stranded_problem(entry: Stranded) -> dict[str, Any]:
    """A stranded session as a `status` problem: what, and the commands that fix it."""
    fixes = " and ".join(f"`{fix}`" for fix in entry.fixes())
    return {"code": "stranded_session", "message": f"{entry.describe()}; fix: {fixes}",
            "session": entry.id, "pending": entry.pending, "timers": entry.timers, "fix": entry.fixes()}


# --- status --------------------------------------------------------------------------------------

def _timers(session: Session, now_ms: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    try:
        view = cb.view_table(session)
    except InvalidDataError as error:
        return {"file_exists": True, "active": None, "capacity": cb.CAPACITY, "paused": None, "next_fire_ms": None,
                "invalid": error.reason}, None
    doc = view.winner.doc if view.winner else {}
    active = [s for s in cb.doc_slots(doc).values() if cb.is_active(s)]
    return {"file_exists": view.exists, "rev": cb.doc_rev(doc), "active": len(active), "capacity": cb.CAPACITY,
            "paused": cb.doc_paused(doc), "next_fire_ms": min((s["fire_at_ms"] for s in active), default=None)
            }, doc


def _inbox(session: Session, now_ms: int) -> dict[str, Any]:
    pending = list_messages(session, ("pending",))
    last_hour, kept = count_since(session, "consumed", now_ms - 3_600_000)  # no file in done/ is read
    return {
        "pending": len(pending),
        "oldest_pending_age_ms": max((now_ms - r.mtime_ms for r in pending), default=None),
        "consumed_last_hour": last_hour, "consumed_kept": kept,
    }


def _waiting(job: dict[str, Any], entry: dict[str, Any] | None, now_ms: int, project, clock: Clock, ws) -> bool:
    """Whether the pass holds this due job now (the pass's own rule, `gating.hold_state`): a job
    past its --hold-max is not waiting any more, it is given up at the next pass."""
    from .cron.admission import hold_state

    held = hold_state(job, entry or {}, now_ms, project=project, to="live", clock=clock, workspace=ws.root)
    return held is not None and held["status"] == "waiting"


def _cron(ws, now_ms: int, max_log_bytes: int, project, clock: Clock) -> dict[str, Any]:
    from .cron.jobs import is_overdue
    from .cron.ledger import recent_runs
    from .cron.policy import read_policy
    from .cron.receipts import run_consumption
    from .cron.store import read_store
    from .cron.views import job_state

    store = read_store(ws)
    if store is None:
        return {"store_exists": False, "jobs_by_state": {}, "active_claims": 0, "next_due_ms": None,
                "last_runs": [], "unknown_runs": [], "tick_running": False, "waiting": [], "paused_by_sxctl": []}
    policy = read_policy(ws)["jobs"]
    jobs = {job["id"]: job for job in store["jobs"]}
    by_state: dict[str, int] = {}
    for job in store["jobs"]:
        state = job_state(job, policy.get(job["id"]))
        by_state[state] = by_state.get(state, 0) + 1
    runs = recent_runs(ws.ledger, 50, max_log_bytes=max_log_bytes)
    brief = [{"name": jobs[r["jobId"]]["name"] if r["jobId"] in jobs else None, "jobId": r["jobId"],
              "executionId": r["executionId"], "status": r["status"], "startedAtMs": r["startedAtMs"],
              "trigger": r["trigger"]} for r in runs]
    for row, run in zip(brief[:5], runs, strict=False):
        row["consumption"] = run_consumption(run, jobs.get(run["jobId"]), project, clock, workspace=ws.root)
    scheduled = [job for job in store["jobs"] if job["lifecycle"]["status"] == "scheduled"]
    waiting = [job["name"] for job in scheduled
               if job["lifecycle"]["nextRunAtMs"] <= now_ms
               and _waiting(job, policy.get(job["id"]), now_ms, project, clock, ws)]
    return {
        "store_exists": True, "jobs_by_state": by_state, "active_claims": len(store["activeClaims"]),
        "next_due_ms": min((job["lifecycle"]["nextRunAtMs"] for job in scheduled), default=None),
        "last_runs": brief[:5], "unknown_runs": [r for r in brief if r["status"] == "unknown"],
        "tick_running": os.path.isdir(f"{os.path.realpath(ws.store_sentinel)}.lock"),
        "overdue": [job["name"] for job in store["jobs"] if is_overdue(job, now_ms) and job["name"] not in waiting],
        "waiting": waiting,
        "paused_by_sxctl": [{"name": job["name"], **policy[job["id"]]["paused"]} for job in store["jobs"]
                            if job["lifecycle"]["status"] == "paused" and policy.get(job["id"], {}).get("paused")],
    }


def status(session: Session | None, ws, *, clock: Clock = SYSTEM_CLOCK,
           max_log_bytes: int = 2_000_000) -> dict[str, Any]:
    """Liveness, timers, inbox, cron and the problems found, for one session (None: the project
    has no session folder yet, and the cron part still counts) and workspace."""
    now = clock.now_ms()
    if session is None:
        return _status_without_session(ws, now, max_log_bytes, clock)
    timers, _ = _timers(session, now)
    inbox = _inbox(session, now)
    cron = _cron_status(ws, now, max_log_bytes, session.project, clock)
    infos = list_sessions(session.project, clock)
    stranded = stranded_sessions(session.project, clock, infos)
    problems = []
    several = several_live_warning(infos)
    if several is not None:
        problems.append({"code": "several_live_sessions", "message": several,
                         "sessions": [info.id for info in live_sessions(infos)]})
    problems += [stranded_problem(entry) for entry in stranded]
    if session.state == "stopped" and inbox["pending"] and session.id not in {e.id for e in stranded}:
        problems.append({"code": "stopped_session_with_pending",
                         "message": f"session {session.id} is stopped: no agent is running, and {inbox['pending']} "
                                    "message(s) wait in it"})
    elif session.state != "live" and inbox["pending"] and session.id not in {e.id for e in stranded}:
        problems.append({"code": "stale_session_with_pending",
                         "message": f"session {session.id} is {session.state} and {inbox['pending']} message(s) "
                                    "are waiting; the agent may have rotated to a new folder"})
    if (inbox["consumed_kept"] or 0) > LARGE_HISTORY:
        problems.append({"code": "inbox_history_large",
                         "message": f"{inbox['consumed_kept']} consumed messages are kept in inbox/done/; "
                                    "`sxctl inbox prune --older-than 30d --keep 1000` trims them"})
    if "invalid" in timers:
        problems.append({"code": "timer_table_unreadable",
                         "message": f"callbacks.json cannot be read ({timers['invalid']}); the agent keeps its last "
                                    "good table and stops firing"})
    problems += _cron_problems(cron)
    return {
        "ok": True, **session.to_json(), "now_ms": now,
        "liveness": {"state": session.state, "updated_ms": session.liveness.updated_ms,
                     "stats_age_ms": session.liveness.age_ms},
        "timers": timers, "inbox": inbox, "cron": cron, "stranded": [entry.to_json() for entry in stranded],
        "problems": problems,
    }


#: consumed messages kept in done/ beyond which `status` (and `doctor`) suggest pruning
LARGE_HISTORY = 10_000


# --- next ----------------------------------------------------------------------------------------

def merged_next(session: Session, ws, count: int, zone, *, clock: Clock = SYSTEM_CLOCK) -> list[dict[str, Any]]:
    """Pending inbox messages (read at the next poll), timer fires (idle only) and cron fires,
    in one time-ordered list; every row says its source."""
    now = clock.now_ms()
    rows: list[dict[str, Any]] = []
    for message in list_messages(session, ("pending",), count):
        rows.append({"source": "inbox", "at_ms": now, "stem": message.stem,
                     "mode": message.message.mode if message.message else None, "preview": message.preview,
                     "pending_since_ms": message.mtime_ms})
    _, doc = _timers(session, now)
    for fire in cb.preview_fires(doc or {}, now, count):
        slot = cb.doc_slots(doc)[fire["slot"]]
        rows.append({"source": "callback", "at_ms": fire["at_ms"], "slot": fire["slot"],
                     "message": cb.list_preview(slot["message"]), "fire_no": fire["fire_no"],
                     "remaining_after": fire["remaining_after"], "overdue": fire["overdue"], "idle_only": True,
                     "paused": cb.doc_paused(doc or {})})
    from .cron.policy import read_policy
    from .cron.store import read_store
    from .cron.views import timeline

    store = read_store(ws)
    if store is not None:
        jobs = {job["id"]: job for job in store["jobs"]}
        policy = read_policy(ws)["jobs"]
        for fire in timeline(store, now, count, zone):
            waiting = fire["overdue"] and _waiting(jobs[fire["jobId"]], policy.get(fire["jobId"]), now,
                                                   session.project, clock, ws)
            rows.append({"source": "cron", "at_ms": fire["at_ms"], "name": fire["name"], "jobId": fire["jobId"],
                         "overdue": fire["overdue"], "paused": fire["paused"], "dst": fire["dst"],
                         "waiting": waiting})
    order = {"inbox": 0, "callback": 1, "cron": 2}
    rows.sort(key=lambda row: (row["at_ms"], order[row["source"]]))
    return rows[:count]


# --- watch ---------------------------------------------------------------------------------------

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
    runs: dict[str, str] = field(default_factory=dict)
    jobs_stamp: tuple = ()
    jobs: dict[str, str] = field(default_factory=dict)  # job name -> state (`paused:expired` …)


def snapshot(session: Session, ws, clock: Clock = SYSTEM_CLOCK, previous: Snapshot | None = None) -> Snapshot:
    snap = Snapshot()
    snap.state = session_info(session.dir, clock).state
    try:
        view = cb.view_table(session)
        if view.winner is not None:
            snap.rev = view.winner.rev
            snap.slots = {i: (s.get("active"), s.get("repeat_count"), s.get("fire_at_ms"))
                          for i, s in cb.doc_slots(view.winner.doc).items()}
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
    stamp = tuple(_stamp(path) for path in (ws.store, ws.policy))
    if previous is not None and stamp == previous.jobs_stamp:
        snap.jobs_stamp, snap.jobs = stamp, previous.jobs
    else:
        snap.jobs_stamp, snap.jobs = stamp, _job_states(ws)
    return snap


def _stamp(path) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _job_states(ws) -> dict[str, str]:
    from .cron.policy import read_policy
    from .cron.store import read_store
    from .cron.views import job_state

    try:
        store, policy = read_store(ws), read_policy(ws)["jobs"]
    except SxctlError:
        return {}
    return {job["name"]: job_state(job, policy.get(job["id"])) for job in (store or {"jobs": []})["jobs"]}


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
    from .inbox.folder import _unstamped, is_message_name

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
    unstamped = _unstamped(names)
    others = frozenset(name for name in unstamped if is_message_name(name))
    stamped = set(names).difference(unstamped)
    mark = MovedMark(mtime, max(stamped, default=""), others)
    if before is None:
        return mark, set()
    new = {name for name in stamped if name > before.latest} | (others - before.others)
    return mark, {name[:-5] for name in new}


def _ledger_runs(ws) -> dict[str, str]:
    from .cron.ledger import project_run, scan_ledger

    try:
        ledger = scan_ledger(ws.ledger)
    except InvalidDataError:
        return {}
    if ledger is None:
        return {}
    return {eid: project_run(group)["status"] for eid, group in ledger.groups.items() if group.start is not None}


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
    for execution_id, status_now in new.runs.items():
        if old.runs.get(execution_id) != status_now:
            add("cron_run", executionId=execution_id, status=status_now)
    for name, state in new.jobs.items():
        if old.jobs.get(name, state) != state:  # a job that changed state (paused:expired …)
            add("cron_job", name=name, state=state, was=old.jobs[name])
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
            import ctypes
            import ctypes.util

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
        import select

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


def _cron_status(ws, now: int, max_log_bytes: int, project, clock: Clock) -> dict[str, Any]:
    """The cron part of `status`; when the store, the policy file or the ledger cannot be read
    or is invalid, which file it is (`invalid_file`) and why, instead."""
    try:
        return _cron(ws, now, max_log_bytes, project, clock)
    except (InvalidDataError, SystemRefusedError) as error:
        return {"store_exists": None, "invalid": error.message, "invalid_file": error.file,
                "refused": isinstance(error, SystemRefusedError)}


#: the name of each cron file in the codes of its problems
_CRON_FILES = {"cron-jobs.json": "store", "cron-executions.jsonl": "ledger", "sxctl-policy.json": "policy"}


def _cron_problems(cron: dict[str, Any]) -> list[dict[str, Any]]:
    problems = []
    if "invalid" in cron:
        part = _CRON_FILES.get(os.path.basename(cron["invalid_file"] or ""), "store")
        problems.append({"code": f"cron_{part}_{'unreadable' if cron['refused'] else 'invalid'}",
                         "message": cron["invalid"], "file": cron["invalid_file"]})
    for name in cron.get("overdue", []) if not cron.get("tick_running") else []:
        problems.append({"code": "cron_overdue", "message": f"cron job {name} is overdue and no tick is running; "
                                                            "is `sxctl cron tick` in your crontab?"})
    for name in cron.get("waiting", []):
        problems.append({"code": "cron_waiting_for_agent",
                         "message": f"cron job {name} is due and waits for a live agent (see its --hold-max)"})
    for paused in cron.get("paused_by_sxctl", []):
        code = "cron_expired" if paused["reason"] == "expired" else "cron_paused_by_limit"
        problems.append({"code": code, "message": f"cron job {paused['name']}: {paused['message']}"})
    for run in cron.get("unknown_runs", []):
        if run["name"] is not None:
            what, check = f"of {run['name']}", f"sxctl cron runs {run['name']} --evidence"
        else:  # its job was removed since
            what, check = f"of removed job {run['jobId']}", "sxctl cron runs --all-jobs --evidence"
        problems.append({"code": "cron_unknown_run",
                         "message": f"run {run['executionId']} {what} ended unknown; check it with `{check}`"})
    return problems


def _status_without_session(ws, now: int, max_log_bytes: int, clock: Clock) -> dict[str, Any]:
    cron = _cron_status(ws, now, max_log_bytes, ws.root, clock)
    problems = [{"code": "no_session", "message": "no session folder yet: is the agent running in this project?"}]
    return {
        "ok": True, "session": None, "session_dir": None, "session_source": None, "now_ms": now,
        "liveness": {"state": "none", "updated_ms": None, "stats_age_ms": None},
        "timers": None, "inbox": None, "cron": cron, "stranded": [], "problems": problems + _cron_problems(cron),
    }

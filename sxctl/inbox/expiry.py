"""Expiry: what every scheduler pass (cron/run/lifetime_sweep.py) and `sxctl inbox expire` do with
message lifetimes (inbox/lifetimes.py) — withdraw the unread messages whose `--expires` passed,
note read deadlines that passed, settle the records of messages that ended, and for a job that
pings on read, tell its monitor — and the survey `status`, `doctor` and `metrics` all report."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import SxctlError
from ..fsio import atomic_write, remove_quietly
from ..jsondata import compact_json
from ..project import Session, as_session, list_sessions
from ..record import Factory, record
from .folder import InboxDir, inbox_dirs, is_message_name
from .lifetimes import (
    SETTLED,
    PingSender,
    open_path,
    open_records,
    read_ms,
    read_record,
    refine,
    settle_write,
    settled_path,
    sweep_lock,
    withdraw,
)

#: whether the pass sweeping ran a record's run and the record is of that run's message:
#: (its `run`, the record, the session it is in) -> bool
Owns = Callable[[dict[str, Any], dict[str, Any], Session], bool]


@record
class LifetimeEvent:
    """What a sweep did or found for one message: `expired` (withdrawn), `missed` (its read
    deadline passed unread: reported once), `read`, `retracted` (settled), `pinged` — or for a
    whole session (`stem` None), `refused` and why: a folder it may not act in."""

    session: str
    copy: str
    stem: str
    event: str
    at_ms: int
    late: bool = False  # read after its deadline
    why: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"session": self.session, "copy": self.copy, "stem": self.stem, "event": self.event,
                               "atMs": self.at_ms}
        if self.late:
            doc["late"] = True
        if self.why is not None:
            doc["why"] = self.why
        return doc


def sweep_session(session: Session, now_ms: int, *, owns: Owns | None = None, ping: PingSender | None = None,
                  dry_run: bool = False) -> list[LifetimeEvent]:
    """Withdraw the session's expired unread messages, note read deadlines that passed, settle
    records whose message ended. `owns(run, record, session)`: whether the pass sweeping ran that run
    and the record is its message's: it alone pings and settles them (`ping` sends)."""
    events: list[LifetimeEvent] = []
    for inbox in inbox_dirs(session):
        inbox.refuse_symlinks(inbox.path, inbox.lifetimes / SETTLED)  # it deletes and renames there
        if not os.path.isdir(inbox.lifetimes):
            continue
        with contextlib.nullcontext() if dry_run else sweep_lock(inbox):  # two sweeps at once take turns
            for stem, body in list(open_records(inbox)):
                try:
                    events += _sweep_one(session, inbox, stem, body, now_ms, owns, ping, dry_run)
                except SxctlError as error:  # this message only (a file in its way): the others go on
                    events.append(LifetimeEvent(session.id, inbox.copy, stem, "refused", now_ms, why=error.message))
    return events


def _sweep_one(session: Session, inbox: InboxDir, stem: str, body: dict[str, Any], now_ms: int,
               owns: Owns | None, ping: PingSender | None, dry_run: bool) -> list[LifetimeEvent]:
    events: list[LifetimeEvent] = []

    def event(what: str, late: bool = False) -> None:
        events.append(LifetimeEvent(session.id, inbox.copy, stem, what, now_ms, late))

    if os.path.lexists(inbox.temp_file(stem)):  # its send (or a move) holds the stem: not published yet
        return events
    run: dict[str, Any] = body.get("run") or {}
    reads = run.get("pingOn") == "read"
    mine = reads and ping is not None and owns is not None and owns(run, body, session)
    state = inbox.state_of(stem)
    if state == "pending":
        expires, read_by = body.get("expires_ms"), body.get("read_by_ms")
        if expires is not None and expires <= now_ms:
            if dry_run:
                event("expired")
                return events
            state = withdraw(inbox, stem, body, now_ms)
            if state == "expired":
                event("expired")
        elif read_by is not None and read_by <= now_ms:
            first, tell = "missed_ms" not in body, mine and not body.get("failPinged")  # each once, and
            if first:  # apart: an `inbox expire` that noted it first leaves the job's pass its ping
                event("missed")
            if (first or tell) and not dry_run:
                body = {**body, **({"missed_ms": now_ms} if first else {}), **({"failPinged": True} if tell else {})}
                atomic_write(open_path(inbox, stem), compact_json(body))  # before the ping: told once
                if tell:
                    assert ping is not None
                    ping(run, "fail", f"not read within its deadline ({_late_by(read_by, now_ms)} late)")
        if state == "pending" or dry_run:
            return events
    elif state == "retracted":
        state = refine(state, read_record(settled_path(inbox, stem)))
    if state == "missing":
        from .moves import moved_to

        if moved_to(inbox.path, stem, moving=True) is not None:  # forwarded: the target has its own record
            if not dry_run:
                remove_quietly(open_path(inbox, stem))
            return events
    if reads and not mine:
        return events  # its job's pass tells its monitor, then settles it
    if dry_run:
        return events
    if mine:
        assert ping is not None
        deadline, read_at = body.get("read_by_ms"), read_ms(inbox, stem) if state == "consumed" else None
        if state == "consumed":
            late = "" if deadline is None or read_at is None or read_at <= deadline else \
                f" {_late_by(deadline, read_at)} after its deadline"
            ping(run, "success", f"read{late}")
        elif not body.get("failPinged"):
            ping(run, "fail", {"expired": "expired unread: withdrawn", "retracted": "retracted unread",
                               "missing": "lost: its message is gone unread"}[state])
        event("pinged")
    if state == "missing":
        remove_quietly(open_path(inbox, stem))  # never published (its send died), or removed by hand
        return events
    end = "read" if state == "consumed" else state
    if end != "expired" or read_record(settled_path(inbox, stem)) is None:
        settle_write(inbox, stem, body, end, now_ms)
    remove_quietly(open_path(inbox, stem))
    if end == "read":
        read_at, read_by = read_ms(inbox, stem), body.get("read_by_ms")
        event("read", late=read_by is not None and read_at is not None and read_at > read_by)
    elif end == "retracted":
        event("retracted")
    return events


def _late_by(deadline_ms: int, at_ms: int) -> str:
    from ..timeparse import format_duration_ms

    return format_duration_ms(max(0, at_ms - deadline_ms))


def sweep_project(project: Path, now_ms: int, clock: Any = None, infos: list[Any] | None = None,
                  **options: Any) -> list[LifetimeEvent]:
    """`sweep_session` over every session of `project` that keeps lifetimes (`infos`: its sessions,
    when the caller listed them); one that cannot be
    swept (a link, a file where a folder should be) is a `refused` event, and the others are swept."""
    events: list[LifetimeEvent] = []
    for session in _sessions_with_lifetimes(project, clock, infos):
        try:
            events += sweep_session(session, now_ms, **options)
        except (SxctlError, OSError) as error:
            why = error.message if isinstance(error, SxctlError) else f"{error.strerror or error}: {error.filename}"
            events.append(LifetimeEvent(session.id, "none", "", "refused", now_ms, why=why))
    return events


def _sessions_with_lifetimes(project: Path, clock: Any, infos: list[Any] | None = None) -> Iterator[Session]:
    if infos is None:
        infos = list_sessions(project, clock) if clock is not None else list_sessions(project)
    for info in infos:
        session = as_session(info, project, "flag")
        if any(os.path.isdir(inbox.lifetimes) for inbox in inbox_dirs(session)):
            yield session


# --- what the views show ---------------------------------------------------------------------

#: how long a message withdrawn unread is a warning of `status` and `doctor`
RECENT_MS = 24 * 3_600_000


@record
class LifetimeSurvey:
    """The project's messages with a lifetime, as `status`, `doctor` and `metrics` report them:
    unread past their read deadline (`overdue`), unread past their expiry but not yet withdrawn
    (`expired_pending`: no pass or `inbox expire` ran since), and the ends kept in settled records
    (`expired`, read `late`)."""

    overdue: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    expired_pending: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    #: withdrawn unread in the last RECENT_MS: the agent never got to them (a warning for a day)
    expired_recent: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    #: open records sxctl cannot read: their messages never expire and have no deadline
    unreadable: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    expired: int = 0
    late: int = 0
    tracked: int = 0  # open records of pending messages

    def to_json(self) -> dict[str, Any]:
        return {"overdue": self.overdue, "expiredPending": self.expired_pending, "expiredRecently": self.expired_recent,
                "unreadable": self.unreadable, "expired": self.expired,
                "readLate": self.late, "tracked": self.tracked}


def survey(project: Path, now_ms: int, clock: Any = None, infos: list[Any] | None = None) -> LifetimeSurvey:
    """What every view reports of the project's lifetimes, computed in one place (`infos`: the
    project's sessions, when the caller listed them)."""
    found = LifetimeSurvey()
    for session in _sessions_with_lifetimes(project, clock, infos):
        for inbox in inbox_dirs(session):
            unreadable: list[str] = []
            for stem, body in open_records(inbox, unreadable):
                state = inbox.state_of(stem)
                if state == "consumed":  # read, not settled yet: late already, as its receipt says
                    at, by = read_ms(inbox, stem), body.get("read_by_ms")
                    found.late += at is not None and by is not None and at > by
                if state != "pending":
                    continue
                found.tracked += 1
                where = {"session": session.id, "stem": stem}
                expires, read_by = body.get("expires_ms"), body.get("read_by_ms")
                if expires is not None and expires <= now_ms:
                    found.expired_pending.append({**where, "expiresAtMs": expires})
                if read_by is not None and read_by <= now_ms:  # past both: both are true, and both are said
                    found.overdue.append({**where, "readByMs": read_by})
            found.unreadable += [{"session": session.id, "stem": stem} for stem in unreadable
                                 if inbox.state_of(stem) == "pending"]
            try:
                names = os.listdir(inbox.lifetimes / SETTLED)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in names:
                end = read_record(inbox.lifetimes / SETTLED / name) if is_message_name(name) else None
                if end is None:
                    continue
                if end.get("outcome") == "expired" and inbox.state_of(name[:-5]) == "retracted":
                    found.expired += 1
                    if (end.get("settled_ms") or 0) > now_ms - RECENT_MS:
                        found.expired_recent.append({"session": session.id, "stem": name[:-5],
                                                     "expiresAtMs": end.get("expires_ms")})
                elif end.get("outcome") == "read" and None not in (end.get("read_ms"), end.get("read_by_ms")) \
                        and end["read_ms"] > end["read_by_ms"]:
                    found.late += 1
    return found


def lifetime_problems(found: LifetimeSurvey) -> list[dict[str, Any]]:
    """The problems `status` lists and `doctor` warns of, one wording for both: `code`, `message`
    and the `fix`."""
    problems = []
    if found.overdue:
        named = ", ".join(f"{row['stem']} ({row['session']})" for row in found.overdue[:3])
        problems.append({"code": "messages_unread_past_deadline",
                         "message": f"{len(found.overdue)} message(s) not read within their --read-within: {named}"
                                    + (" …" if len(found.overdue) > 3 else ""),
                         "fix": "is the agent reading its inbox? `sxctl status`, `sxctl inbox list`"})
    if found.expired_recent:
        named = ", ".join(f"{row['stem']} ({row['session']})" for row in found.expired_recent[:3])
        problems.append({"code": "messages_expired_unread",
                         "message": f"{len(found.expired_recent)} message(s) expired unread and were withdrawn in "
                                    f"the last 24 hours: {named}" + (" …" if len(found.expired_recent) > 3 else ""),
                         "fix": "is the agent reading its inbox? `sxctl inbox list --retracted` lists them"})
    if found.unreadable:
        first = found.unreadable[0]
        problems.append({"code": "lifetime_records_unreadable",
                         "message": f"{len(found.unreadable)} pending message(s) have a lifetime record sxctl cannot "
                                    f"read, so they never expire: {first['stem']} ({first['session']})"
                                    + (" …" if len(found.unreadable) > 1 else ""),
                         "fix": f"look at .scorpiox/sessions/{first['session']}/inbox/.lifetimes/{first['stem']}.json "
                                "(remove it to drop the lifetime, or retract the message)"})
    if found.expired_pending:
        problems.append({"code": "messages_expired_not_withdrawn",
                         "message": f"{len(found.expired_pending)} message(s) expired unread but are still pending "
                                    "(no scheduler pass ran since)", "fix": "sxctl inbox expire"})
    return problems

"""Sending (spec inbox.md §4-6): one message published into a session's inbox under a fresh stem
(the keyed path is `keyed`), the configuration's inbox switch, and the soft or hard wait that
follows. What is sent is a `request.SendRequest`; publishing under a held stem is
`publishing.publish`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, NotFoundError, SxctlError
from ..fsio import ensure_private_dir
from ..interrupts import deferred_interrupts
from ..project import Session, check_rotation_after_write, resolve_config, warn_if_not_live
from ..record import record
from ..report import Reporter
from .folder import InboxDir, is_real_dir, primary_inbox
from .message import SOFT_WAIT_S
from .publishing import first_stem, publish
from .request import SendRequest


@record
class SendResult:
    """What `send` did; `to_json()` is the SCORPIOX BOT result shape plus sxctl's keys."""

    session: Session
    inbox: InboxDir
    stem: str
    mode: str
    state: str
    bytes: int
    image: str | None
    key: str | None
    duplicate: bool = False
    completed_abandoned: bool = False
    waited_ms: int = 0
    #: `off` when the configuration switches the agent's inbox off (the JSON key is `inbox_gate`)
    inbox_switch: str = "on"
    #: a keyed duplicate pending in a session no agent reads, while the session sent to is live
    stranded: bool = False
    #: a message `inbox forward` moved here: {"session", "stem"} it came from
    forwarded_from: dict[str, str] | None = None
    #: the lifetime this send gave its new message (inbox/lifetimes.py)
    lifetime: dict[str, Any] | None = None

    @property
    def consumed(self) -> bool:
        return self.state == "consumed"

    @property
    def path(self) -> Path:
        folder = self.inbox.folder_of(self.state) if self.state != "missing" else self.inbox.path
        return folder / f"{self.stem}.json"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ok": True, "inbox": True, "stem": self.stem, "mode": self.mode,
            "session": self.session.id, "consumed": self.consumed, "state": self.state,
            "project": str(self.session.project), "session_dir": str(self.session.dir),
            "path": str(self.path), "copy": self.inbox.copy, "bytes": self.bytes,
            "image": self.image, "duplicate": self.duplicate, "key": self.key,
            "waited_ms": self.waited_ms, "inbox_gate": self.inbox_switch,
            "session_source": self.session.source,
        }
        if self.completed_abandoned:
            doc["completed_abandoned"] = True
        if self.stranded:
            doc["stranded"] = True
        if self.forwarded_from is not None:
            doc["forwarded_from"] = self.forwarded_from
        if self.lifetime is not None:
            doc.update(expires_ms=self.lifetime["expires_ms"], read_by_ms=self.lifetime["read_by_ms"])
        if self.session.followed_from is not None:
            doc["followed_from"] = self.session.followed_from
        return doc


_SWITCH_TTL_S = 1.0
#: the resolved SCORPIOX_INBOX by project and environment: (monotonic time read, resolution)
_switch_cache: dict[tuple, tuple[float, Any]] = {}


def inbox_switch(session: Session, report: Reporter) -> str:
    """`off` when SCORPIOX_INBOX resolves to exactly 0 (sessions.md §8): warn, still write.
    A process that sends in a loop re-reads the configuration at most once a second."""
    env = os.environ
    cache_key = (str(session.project), env.get("HOME"), env.get("PATH"), env.get("SCORPIOX_INBOX"),
                 env.get("ACTIVE_PROFILE"))
    cached = _switch_cache.get(cache_key)
    if cached is not None and time.monotonic() - cached[0] < _SWITCH_TTL_S:
        resolved = cached[1]
    else:
        resolved = resolve_config("SCORPIOX_INBOX", session.project, report=report)
        _switch_cache[cache_key] = (time.monotonic(), resolved)
    if (resolved.value or "").strip() == "0":
        report.warn(
            f"SCORPIOX_INBOX=0 (from {resolved.source}): the agent does not poll its inbox; "
            "the message will wait"
        )
        return "off"
    return "on"


def send(
    session: Session,
    request: SendRequest,
    *,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    before_new: Callable[[], object] | None = None,
) -> SendResult:
    """Drop one message into the session's inbox atomically, then (optionally) wait for it.
    A keyed send calls `before_new` (under the project's key lock) only when it is about to
    write a new message, not for a duplicate: it may refuse by raising."""
    report = report or Reporter()
    inbox = primary_inbox(session)
    inbox.refuse_symlinks()
    if not is_real_dir(inbox.path):  # one lstat when it exists (sends run in loops)
        if not session.dir.is_dir():
            raise NotFoundError(f"session folder {session.dir} not found", code=ErrorCode.SESSION_NOT_FOUND)
        ensure_private_dir(inbox.path)
    switch = inbox_switch(session, report)
    warn_if_not_live(session, report)
    with deferred_interrupts() as held:  # Ctrl-C or SIGTERM now: the message is written, then named
        result = _write(session, inbox, request, switch, clock, report, before_new)
    if held.signal is not None:
        raise SxctlError(f"interrupted: {result.stem} was written and is {result.state} in {result.inbox.path}",
                         code=ErrorCode.INTERRUPTED, details={**result.to_json(), "ok": False})
    state, stem = result.state, result.stem
    session, inbox = result.session, result.inbox
    if request.no_wait and request.wait_s is None:
        return result
    from .wait import WaitOutcome, soft_wait, wait_for  # a --no-wait send in a loop never loads it

    if state != "pending" and request.wait_s is not None:
        # a keyed duplicate: waiting for a message that was retracted must not report success
        WaitOutcome(session, inbox, stem, state, 0).raise_unless_consumed(result.to_json())
    if state != "pending" or (request.wait_s is None and (request.no_wait or session.state != "live")):
        return result
    try:
        if request.wait_s is None:
            result.state, result.waited_ms = soft_wait(session, inbox, stem, SOFT_WAIT_S, clock, report)
            return result
        outcome = wait_for(session, inbox, stem, request.wait_s, follow=request.follow, clock=clock, report=report)
    except SxctlError as error:
        if error.code == "interrupted":  # the message was written: say where it is
            result.state, result.waited_ms = error.details["state"], error.details["waited_ms"]
            error.details = {**result.to_json(), "ok": False}
        raise
    result.session, result.inbox, result.stem = outcome.session, outcome.inbox, outcome.stem
    result.state, result.waited_ms = outcome.state, outcome.waited_ms
    outcome.raise_unless_consumed(result.to_json())
    return result


def _write(session: Session, inbox: InboxDir, request: SendRequest, switch: str, clock: Clock,
           report: Reporter, before_new: Callable[[], object] | None) -> SendResult:
    """The write of a send (keyed or fresh) and what it wrote."""
    place: Any = None  # where a keyed duplicate's message is, when a move took it or left it elsewhere
    if request.key is not None:
        from .keyed import project_key_lock, send_keyed  # an unkeyed send in a loop never loads the key step

        with project_key_lock(session):
            stem, state, duplicate, abandoned, place = send_keyed(session, inbox, request, clock, before_new)
    else:
        stem = _send_fresh(inbox, request, clock)
        state, duplicate, abandoned = "pending", False, False
    if not duplicate or abandoned:
        check_rotation_after_write(session, clock, report)

    result = SendResult(
        session, inbox, stem, request.mode, state, len(request.data),
        request.image.ext if request.image else None, request.key,
        duplicate=duplicate, completed_abandoned=abandoned, inbox_switch=switch,
        lifetime=request.lifetime if not duplicate else None,
    )
    if place is not None:
        result.session, result.inbox, result.forwarded_from = place.session, place.inbox, place.forwarded_from
        if place.session.id != session.id and state == "pending" and place.session.state != "live":
            where = f"the message of key {request.key!r} ({stem}) is pending in session {place.session.id}"
            if session.state == "live":  # left behind by a restart: say how to bring it here
                result.stranded = True
                report.warn(f"{where}, where no agent is live: `sxctl inbox forward --from {place.session.id}` "
                            f"moves it to the live session {session.id}")
            else:
                report.note(where)
    if duplicate and os.path.isdir(result.inbox.lifetimes):  # a duplicate (or a completion) keeps the first
        from .lifetimes import record_of, refined_state  # message's lifetime: the result says which; `expired`

        result.lifetime = record_of(result.inbox, result.stem)
        if result.state == "retracted":
            result.state = refined_state(result.inbox, result.stem)
    return result


def _send_fresh(inbox: InboxDir, request: SendRequest, clock: Clock) -> str:
    return first_stem(inbox, request.stem, request.priority, clock,
                      lambda stem: publish(inbox, stem, request.data, request.image, lifetime=request.lifetime))


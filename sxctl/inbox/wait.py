"""Waiting for a message to be consumed (spec inbox.md §8), and re-homing it after a session
rotation (sessions.md §9)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, ErrorCode, NotFoundError, SxctlError, WaitTimeoutError
from ..interrupts import sigterm_interrupts
from ..project import LIVE_WINDOW_MS, Session, as_session, freshest_live, list_sessions, newer_live, session_info
from ..record import Factory, record
from ..report import Reporter
from .folder import InboxDir, primary_inbox
from .message import POLL_S

# --- waiting -----------------------------------------------------------------------------------

def poll_state(inbox: InboxDir, stem: str, clock: Clock, deadline: float) -> str:
    while True:
        state = inbox.state_of(stem)
        if state != "pending" or clock.monotonic() >= deadline:
            return state
        clock.sleep(POLL_S)


@record
class WaitOutcome:
    """How a wait for a message ended: where the message is now, its state and how long it took."""

    session: Session
    inbox: InboxDir
    stem: str
    state: str
    waited_ms: int
    events: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    #: for a message still pending at the deadline: was an agent live in its session then, and
    #: which other session of the project was (the one `inbox forward` would move it to)
    agent_live: bool | None = None
    live_session: str | None = None
    liveness: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "ok": True, **self.session.to_json(), "stem": self.stem, "state": self.state,
            "consumed": self.state == "consumed", "waited_ms": self.waited_ms,
            "path": str(self.inbox.folder_of(self.state) / f"{self.stem}.json") if self.state != "missing" else None,
        }
        if self.agent_live is not None:
            doc.update(agent_live=self.agent_live, live_session=self.live_session)
        return doc

    def raise_unless_consumed(self, details: dict[str, Any] | None = None) -> None:
        """Map the final state to the spec's exit codes (inbox.md §8); the error carries
        `details` (default: this outcome's document)."""
        details = {**(self.to_json() if details is None else details), "ok": False, "state": self.state,
                   "consumed": False}
        where = f"{self.stem} in {self.inbox.path}"
        if self.state == "pending":
            why = ""
            if self.agent_live is False:  # nobody could have read it: say so, and what would
                details.update(agent_live=False, live_session=self.live_session)
                why = f": no agent is live in session {self.session.id} ({self.liveness})"
                if self.live_session is not None:
                    why += (f"; session {self.live_session} is live: `sxctl inbox forward --from {self.session.id}` "
                            "moves the message there")
            elif self.agent_live:
                details.update(agent_live=True, live_session=self.live_session)
                why = (f": the agent of session {self.session.id} counts as live ({self.liveness}) but has not read "
                       f"it: a long turn, or an agent that stopped less than {LIVE_WINDOW_MS // 1000} s ago")
            error = WaitTimeoutError(f"timed out after {self.waited_ms / 1000:g}s: {where} is still pending{why}",
                                     details=details)
            if self.agent_live is False:
                error.extra["reason"] = "no_live_agent"
            raise error
        if self.state == "retracted":
            raise ConflictError(f"{where} was retracted", code=ErrorCode.RETRACTED, details=details)
        if self.state == "expired":
            raise SxctlError(f"{where} expired unread and was withdrawn (to {self.inbox.retracted})",
                             code=ErrorCode.EXPIRED, details=details)
        if self.state == "missing":
            raise NotFoundError(f"{where} not found", code=ErrorCode.STEM_NOT_FOUND, details=details)


def wait_for(
    session: Session,
    inbox: InboxDir,
    stem: str,
    timeout_s: float,
    *,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> WaitOutcome:
    """Poll until `stem` leaves `pending` or the deadline (0 = none) passes.

    With `follow`, a message left behind by a session rotation is re-homed into the new live
    session (sessions.md §9); without it, one warning is given.
    """
    report = report or Reporter()
    emit = on_event or (lambda event: None)
    started = clock.monotonic()
    deadline = None if timeout_s == 0 else started + timeout_s
    emit({"event": "waiting", "ts_ms": clock.now_ms(), "stem": stem, "inbox": str(inbox.path)})
    where: list[Any] = [session, inbox, stem]  # where the message is now (a rotation or `inbox forward` moves it)
    try:
        with sigterm_interrupts():
            report.detail(f"waiting for {stem} to be consumed" + (f" (up to {timeout_s:g}s)" if timeout_s else ""))
            state = _wait_loop(where, stem, deadline, follow, clock, report, emit)
    except KeyboardInterrupt:
        session, inbox, stem = where  # where the message is now
        raise _interrupted(session, inbox, stem, started, clock) from None
    session, inbox, stem = where
    waited = round((clock.monotonic() - started) * 1000)
    emit({"event": "done", "ts_ms": clock.now_ms(), "stem": stem, "state": state, "waited_ms": waited})
    outcome = WaitOutcome(session, inbox, stem, state, waited)
    if state == "pending":  # timed out: was anybody there to read it?
        current = session_info(session.dir, clock)
        outcome.agent_live, outcome.liveness = current.state == "live", current.liveness.describe()
        live = freshest_live(list_sessions(session.project, clock))
        outcome.live_session = live.id if live is not None else None
    return outcome


def soft_wait(session: Session, inbox: InboxDir, stem: str, seconds: float, clock: Clock,
              report: Reporter) -> tuple[str, int]:
    """The short wait of a send given neither `--wait` nor `--no-wait` (a live agent mostly reads
    within it): (state, waited ms). Ctrl-C or SIGTERM end it as they end `wait_for`: exit 130
    saying where the written message is — a caller must not take it for unsent and send again."""
    started = clock.monotonic()
    try:
        with sigterm_interrupts():
            report.detail(f"waiting up to {seconds:g}s for {stem} to be consumed by the live agent")
            state = poll_state(inbox, stem, clock, started + seconds)
    except KeyboardInterrupt:
        raise _interrupted(session, inbox, stem, started, clock) from None
    return state, round((clock.monotonic() - started) * 1000)


def _interrupted(session: Session, inbox: InboxDir, stem: str, started: float, clock: Clock) -> SxctlError:
    state = inbox.state_of(stem)
    waited = round((clock.monotonic() - started) * 1000)
    return SxctlError(f"interrupted while waiting: {stem} is {state} in {inbox.path}", code=ErrorCode.INTERRUPTED,
                      details={"stem": stem, "state": state, "session": session.id, "waited_ms": waited})


def _wait_loop(where: list, stem: str, deadline: float | None, follow: bool, clock: Clock,
               report: Reporter, emit: Callable[[dict[str, Any]], None]) -> str:
    """Poll until `stem` leaves `pending` or the deadline passes; `where` ([session, inbox, stem])
    is kept up to date when a rotation re-homes the message or `inbox forward` moves it (the
    wait follows it into the session it was moved to)."""
    session, inbox, _ = where
    next_liveness_check = clock.monotonic()
    warned_stale = False
    expires = expiry_of(inbox, stem)  # a message with --expires: the wait withdraws it then
    while True:
        state = inbox.state_of(stem)
        if state == "missing":
            from . import places  # a send's wait loads the key look-ups only when its message moved on

            moved_session, moved_inbox, moved_stem, moved_state = places.follow(session, inbox, stem, state)
            if moved_inbox.path != inbox.path or moved_stem != stem:
                emit({"event": "forwarded", "ts_ms": clock.now_ms(), "stem": stem, "to_stem": moved_stem,
                      "from": str(inbox.path), "to": str(moved_inbox.path), "session": moved_session.id})
                report.note(f"{stem} was forwarded to {moved_session.id}" +
                            (f" as {moved_stem}" if moved_stem != stem else "") + "; waiting there")
                session, inbox, stem = where[:] = [moved_session, moved_inbox, moved_stem]
                state, expires = moved_state, expiry_of(moved_inbox, moved_stem)
        if state == "pending" and expires is not None and clock.now_ms() >= expires:
            state = expire_now(inbox, stem, clock.now_ms())
        now = clock.monotonic()
        if state != "pending" or (deadline is not None and now >= deadline):
            break
        if now >= next_liveness_check:
            next_liveness_check = now + 1.0
            current = session_info(session.dir, clock)
            if current.state != "live":
                target = rotation_target(session, clock) if follow else None
                if target is not None:
                    moved = rehome(session, inbox, stem, target, clock)
                    if moved is not None:
                        emit({"event": "rehomed", "ts_ms": clock.now_ms(), "stem": stem,
                              "from": str(inbox.path), "to": str(moved.path), "session": target.id})
                        report.note(f"re-homed {stem} from {session.id} to {target.id}")
                        session, inbox = where[:2] = [target, moved]
                        expires = expiry_of(moved, stem)
                        continue
                elif not follow and not warned_stale and session.state == "live":
                    warned_stale = True
                    report.warn(
                        f"the agent of session {session.id} stopped while {stem} is pending; nothing reads it "
                        "until an agent runs there (a new session: --follow re-homes it, or `sxctl inbox "
                        "forward` later)" if current.state == "stopped" else
                        f"session {session.id} turned {current.state} while {stem} is pending; "
                        "use --follow to re-home it after a rotation"
                    )
        clock.sleep(POLL_S)
    if state == "retracted":
        from .lifetimes import refined_state  # was it withdrawn because it expired?

        state = refined_state(inbox, stem)
    return state


def expiry_of(inbox: InboxDir, stem: str) -> int | None:
    """When the message expires (None: never): a wait loads the lifetimes only where they are kept."""
    if not os.path.isdir(inbox.lifetimes):
        return None
    from .lifetimes import expiry_of as recorded_expiry

    return recorded_expiry(inbox, stem)


def expire_now(inbox: InboxDir, stem: str, now_ms: int) -> str:
    """The message's expiry passed while it was waited for: withdrawn as every pass withdraws it."""
    from .lifetimes import expire_if_due

    return expire_if_due(inbox, stem, now_ms)


def rotation_target(session: Session, clock: Clock) -> Session | None:
    """The one live session the agent went on in after `session` (`newer_live`), or None when
    there is none or there are several."""
    newer = newer_live(session.id, list_sessions(session.project, clock))
    return as_session(newer[0], session.project, "live") if len(newer) == 1 else None


def rehome(session: Session, inbox: InboxDir, stem: str, target: Session,
           clock: Clock = SYSTEM_CLOCK) -> InboxDir | None:
    """Move a pending message (with its sidecar and keys) into `target`'s inbox, the way `inbox
    forward` moves one; None if it was consumed meanwhile, its stem is taken there, or a forward
    out of this session is running (the next look tries again)."""
    from .move import forward_lock, move_message  # a plain send's wait never re-homes: no move machinery

    try:
        with forward_lock(session):
            moved = move_message(session, inbox, stem, target, bump=False, clock=clock)
    except ConflictError as error:
        if error.code == "lock_busy":
            return None
        raise
    return primary_inbox(target) if moved.outcome == "forwarded" else None

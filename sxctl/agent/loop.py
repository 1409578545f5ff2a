"""`sxctl agent run`: the main loop of the reference agent, for demos, tests and scripts.

Nothing here prints: every observable step is an event passed to `emit`, which the CLI renders as
transcript lines or JSON Lines.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import date

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, ErrorCode, NotFoundError, SxctlError
from ..fsio import ensure_private_dir
from ..project import (
    LIVE_WINDOW_MS,
    ProjectLayout,
    Session,
    WorktreeCopies,
    is_valid_session_id,
    list_sessions,
    live_sessions,
    liveness_of,
    read_stats,
)
from .intake import Intake
from .parts import AgentOptions, Emit, new_session_id
from .timers import Timers
from .turns import TurnRunner

STATS_EVERY_S = 1.0


class ReferenceAgent:
    """The built-in stand-in for SCORPIOX CODE: a small consumer of the file protocol that does
    what the docs of the reference agent protocol (spec reference-agent.md) say the real agent
    does — claims inbox messages, fires timers, writes `stats.json` — so that sxctl can be
    demonstrated and tested end to end without the real agent.

    It is split the way the protocol is: `Timers` (the timer table), `Intake` (the inbox) and
    `TurnRunner` (turns on a worker thread, their buffers, and the stats); this class holds the
    session and runs the main loop that polls them in the protocol's order, so each part can be
    read against its section of the spec on its own.
    """

    def __init__(self, options: AgentOptions, emit: Emit, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.options = options
        self.emit_raw = emit
        self.clock = clock
        #: set by a signal (before or after `start`): finish the turn, then shut down
        self.stopping = threading.Event()
        #: why a stop was asked for before `started` was announced: announced right after it
        self.stop_reason: str | None = None  # why a stop was asked for (`request_stop`)
        self.stop_said = False
        self.announced = False
        self.idle_since = time.monotonic()

    def emit(self, event: str, **fields: object) -> None:
        self.emit_raw({"event": event, "ts_ms": self.clock.now_ms(), **fields})

    @property
    def turns(self) -> int:
        return self.runner.turns

    # --- start-up (reference-agent.md §1) ----------------------------------------------------------

    def start(self) -> None:
        sessions = ProjectLayout(self.options.project).sessions
        ensure_private_dir(sessions.parent)
        ensure_private_dir(sessions)
        if self.options.session_id:
            if not is_valid_session_id(self.options.session_id):
                raise SxctlError(f"invalid session id {self.options.session_id!r}", code=ErrorCode.INVALID_VALUE)
            sid = self.options.session_id
        else:
            sid = new_session_id(date.today(), lambda name: (sessions / name).exists())
        self.dir = sessions / sid
        ensure_private_dir(self.dir)
        self.session = Session(sid, self.dir, None, liveness_of(None, self.clock.now_ms()),
                               project=self.options.project, source="flag",
                               copies=WorktreeCopies("none", None, None))
        from filelock import FileLock, Timeout  # third-party: loaded only when an agent runs

        self.lock = FileLock(str(self.dir / ".sxctl-agent.lock"), timeout=0, mode=0o600)
        try:
            self.lock.acquire()
        except Timeout:
            raise ConflictError(f"another sxctl agent runs in session {sid}", code=ErrorCode.AGENT_OWNS_SESSION,
                                file=self.dir / ".sxctl-agent.lock") from None
        stats = read_stats(self.dir)
        if not self.options.force and liveness_of(stats, self.clock.now_ms(), self.dir).state == "live":
            self.lock.release()
            raise ConflictError(f"session {sid} is live (stats.json {LIVE_WINDOW_MS // 1000}s fresh): another agent "
                                "owns it; pass --force to take it anyway", code=ErrorCode.AGENT_OWNS_SESSION)
        inbox = self.dir / "inbox"
        ensure_private_dir(inbox)
        ensure_private_dir(inbox / "done")
        self.intake = Intake(inbox, self.emit)
        self.timers = Timers(self.session, self.clock, self.emit)
        self.runner = TurnRunner(self.options, self.session, self.clock, self.emit, self.stopping)
        self.timers.load()
        self.write_stats()
        self.emit("started", session=sid, session_dir=str(self.dir), pid=os.getpid())
        self.announced = True
        others = [info.id for info in live_sessions(list_sessions(self.options.project, self.clock)) if info.id != sid]
        if others:  # commands without --session now choose between agents, and may change their mind
            self.emit("warning", message=f"another agent is live in this project (session {', '.join(others)}): "
                      "commands without --session use the freshest of them; pin one with --session ID")
        if self.stopping.is_set():  # asked for while the agent started
            self._say_stopping()

    def write_stats(self, *, stopped: bool = False) -> None:
        self.runner.write_stats(self.timers.active_slots(), stopped=stopped)

    # --- the loop (reference-agent.md §2) ------------------------------------------------------------

    def run(self, capture_output: bool = False) -> int:
        runner = self.runner
        runner.capture_output = capture_output
        poll = self.options.poll_ms / 1000
        while True:
            try:
                self.finish_turn_if_done()
                if self.stopping.is_set():
                    self._say_stopping()
                    if runner.current is None:
                        break
                    time.sleep(poll / 4)
                    continue
                if self._step():
                    break
            except FileNotFoundError:
                if self.dir.is_dir():
                    raise
            if not self.dir.is_dir():  # moved or deleted under the agent: nothing it writes would be read
                raise NotFoundError(f"{self.dir}: the session folder is gone (the project was moved or deleted); "
                                    "start the agent again where the project is now",
                                    code=ErrorCode.SESSION_NOT_FOUND)
            time.sleep(poll)
        return self.shutdown()

    def _step(self) -> bool:
        """One round of the loop (reference-agent.md §2); True when the agent should stop."""
        runner = self.runner
        self.timers.adopt()
        before = runner.current
        if self._may_take_a_message():
            delivery = self.intake.take()
            if delivery is not None:
                runner.deliver(delivery.stem, delivery.mode, delivery.text, delivery.image)
        started = runner.current is not None and runner.current is not before
        if runner.current is None and not started and self._turns_left() != 0:
            self.fire_timer()
        elif runner.current is not None and not started:
            self.timers.note_deferrals()
        if time.monotonic() - runner.last_stats >= STATS_EVERY_S:
            self.write_stats()
        return self._should_exit()

    def fire_timer(self) -> bool:
        """Fire the earliest due slot (idle only); True when a turn started."""
        fired = self.timers.fire()
        if fired is None:
            return False
        slot_id, slot = fired
        self.runner.start("callback", str(slot_id), "auto", slot["message"])
        return True

    def finish_turn_if_done(self) -> None:
        """A finished turn: re-base the timers that fell due during it, write the stats, then
        start the turn its late interrupts or queued notes make."""
        follow_up = self.runner.finish_if_done()
        if follow_up is None:
            return
        self.timers.rebase(self.clock.now_ms())
        self.write_stats()
        self.idle_since = time.monotonic()
        self.runner.start_next(*follow_up)

    def _turns_left(self) -> int | None:
        """How many more turns `--max-turns` allows to start (None: no limit)."""
        return None if self.options.max_turns is None else self.options.max_turns - self.runner.turn_counter

    def _may_take_a_message(self) -> bool:
        """Take a message only if it is sure to be delivered within `--max-turns`: idle, into a new
        turn; busy, only while two more turns remain (a late interrupt and the queued notes can
        each start one). Everything else stays pending in the inbox."""
        left = self._turns_left()
        return left is None or left >= (1 if self.runner.current is None else 2)

    def _should_exit(self) -> bool:
        busy = self.runner.current is not None
        if self.options.max_turns is not None and self.runner.turns >= self.options.max_turns and not busy:
            return True
        if self.options.idle_exit_s is None or busy:
            if busy:
                self.idle_since = time.monotonic()
            return False
        horizon = self.clock.now_ms() + self.options.idle_exit_s * 1000
        soon = self.timers.due_by(horizon)
        pending = self.intake.has_pending()
        if soon or pending:
            self.idle_since = time.monotonic()
            return False
        return time.monotonic() - self.idle_since >= self.options.idle_exit_s

    def request_stop(self, signal_name: str) -> None:
        """Finish the current turn and stop. Safe in a signal handler: it only sets a flag — the
        loop announces `stopping` (after `started`, never before), since a handler that printed
        could wait forever for the printer's lock the interrupted loop holds."""
        if not self.stopping.is_set():
            self.stop_reason = signal_name
            self.stopping.set()

    def _say_stopping(self) -> None:
        if self.announced and not self.stop_said:
            self.stop_said = True
            self.emit("stopping", signal=self.stop_reason)

    def shutdown(self) -> int:
        worker = self.runner.worker
        if worker is not None and worker.is_alive():
            worker.join()
        self.finish_turn_if_done()
        dropped = self.runner.drop_buffers()
        for text in dropped:
            self.emit("dropped", text=text)
        if self.runner.interrupted:
            self.timers.rebase(self.clock.now_ms())
        # the clean-stop record, `"sxctl": {"stopped": true}`: the session is `stopped` from now on
        # (not live, so a restart need not wait 10 s; not `stale`, so nobody suspects a rotation)
        self.write_stats(stopped=True)
        self.emit("stopped", turns=self.runner.turns, dropped=len(dropped))
        self.lock.release()
        return 0

"""`sxctl agent run`: the consumer side of the protocol, for demos, tests and scripts.

The main thread polls (timers, inbox, stats); turns run on a worker thread so that the loop keeps
consuming while the agent is busy. Shared state is guarded by one lock. Nothing here prints:
every observable step is an event passed to `emit`, which the CLI renders as transcript lines or
JSON Lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from ..callbacks.protocol import WriteOptions, write_table
from ..callbacks.table import (
    FILE_NAME,
    CallbackTable,
    doc_paused,
    doc_rev,
    doc_slots,
    encode_table,
    is_active,
    new_table_doc,
    read_table,
)
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, InvalidDataError, SxctlError
from ..fsio import atomic_write, ensure_private_dir, link_create, open_regular, read_bytes_capped
from ..inbox.folder import is_message_name
from ..inbox.message import IMAGE_EXTS, MAX_IMAGE_BYTES, MAX_MESSAGE_BYTES, InboxMessage, image_type_ok
from ..project import LIVE_WINDOW_MS, Session, WorktreeCopies, is_valid_session_id, liveness_of, read_stats
from ..report import Reporter
from .parts import AgentOptions, Buffers, Turn, _git_branch, _signal_group, new_session_id

BOUNDARY_S = 0.5
DEFER_NOTE_S = 5.0
STATS_EVERY_S = 1.0

Emit = Callable[[dict[str, Any]], None]


class ReferenceAgent:
    def __init__(self, options: AgentOptions, emit: Emit, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.options = options
        self.emit_raw = emit
        self.clock = clock
        self.state = threading.Lock()
        self.buffers = Buffers()
        self.turns = 0
        self.turn_counter = 0
        self.current: Turn | None = None
        self.worker: threading.Thread | None = None
        self.proc: subprocess.Popen | None = None
        self.stopping = threading.Event()
        self.table_doc: dict[str, Any] = new_table_doc()
        self.table_stamp: tuple | None = None
        self.table_broken = False
        self.deferred_at: dict[int, float] = {}
        self.last_stats = 0.0
        self.idle_since = time.monotonic()
        self.interrupted = False

    # --- events ----------------------------------------------------------------------------------

    def emit(self, event: str, **fields: Any) -> None:
        self.emit_raw({"event": event, "ts_ms": self.clock.now_ms(), **fields})

    # --- start-up (§1) ----------------------------------------------------------------------------

    def start(self) -> None:
        sessions = self.options.project / ".scorpiox" / "sessions"
        ensure_private_dir(sessions.parent)
        ensure_private_dir(sessions)
        if self.options.session_id:
            if not is_valid_session_id(self.options.session_id):
                raise SxctlError(f"invalid session id {self.options.session_id!r}", code="invalid_value")
            sid = self.options.session_id
        else:
            sid = new_session_id(date.today(), lambda name: (sessions / name).exists())
        self.dir = sessions / sid
        ensure_private_dir(self.dir)
        self.session = Session(sid, self.dir, None, liveness_of(None, self.clock.now_ms()),
                               project=self.options.project, source="flag",
                               copies=WorktreeCopies("none", None, None))
        from filelock import FileLock, Timeout

        self.lock = FileLock(str(self.dir / ".sxctl-agent.lock"), timeout=0, mode=0o600)
        try:
            self.lock.acquire()
        except Timeout:
            raise ConflictError(f"another sxctl agent runs in session {sid}", code="agent_owns_session",
                                file=self.dir / ".sxctl-agent.lock") from None
        stats = read_stats(self.dir)
        if not self.options.force and stats is not None and liveness_of(stats, self.clock.now_ms()).state == "live":
            self.lock.release()
            raise ConflictError(f"session {sid} is live (stats.json {LIVE_WINDOW_MS // 1000}s fresh): another agent "
                                "owns it; pass --force to take it anyway", code="agent_owns_session")
        self.inbox = self.dir / "inbox"
        ensure_private_dir(self.inbox)
        ensure_private_dir(self.inbox / "done")
        self._load_table()
        self.write_stats()
        self.emit("started", session=sid, session_dir=str(self.dir), pid=os.getpid())

    def _load_table(self) -> None:
        path = self.dir / FILE_NAME
        if not path.exists():
            doc = {"rev": 1, "updated_ms": self.clock.now_ms(), "paused": False, "slots": []}
            try:
                link_create(path, encode_table(doc))
            except FileExistsError:
                pass
        table = read_table(self.dir)  # an unparseable table is exit 5 and never overwritten
        assert table is not None  # created just above; a table is never removed
        self._adopt(table, announce=False)
        if table.paused:  # a pause does not survive a restart

            def unpause(doc: dict[str, Any], now: int) -> None:
                doc["paused"] = False

            self._write(unpause, lambda doc: True)
            self.emit("callbacks_adopted", rev=doc_rev(self.table_doc))

    def child_env(self) -> dict[str, str]:
        return {**os.environ, "SX_SESSION_DIR": str(self.dir), "SX_SESSION_ID": self.session.id,
                "SX_CWD": str(self.options.project)}

    # --- timers -----------------------------------------------------------------------------------

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.dir / FILE_NAME)
        except FileNotFoundError:
            return None
        return (st.st_size, st.st_mtime_ns, st.st_ino)

    def _adopt(self, table: CallbackTable, announce: bool = True) -> None:
        self.table_doc = table.doc
        self.table_stamp = self._stamp()
        if announce:
            self.emit("callbacks_adopted", rev=table.rev)

    def adopt_timers(self) -> None:
        stamp = self._stamp()
        if stamp == self.table_stamp and not self.table_broken:
            return
        try:
            table = read_table(self.dir)
        except InvalidDataError as error:
            if not self.table_broken:
                self.emit("warning", message=f"[Callbacks] {error.message}; keeping the last good table")
            self.table_broken = True
            self.table_stamp = stamp
            return
        self.table_broken = False
        if table is None:
            return
        if table.rev != doc_rev(self.table_doc):
            self._adopt(table)
        else:
            self.table_stamp = stamp

    def _write(self, change: Callable[[dict[str, Any], int], Any], still_applies: Callable[[dict[str, Any]], bool]):
        """Write under the revision protocol; if the file moved, re-apply only when still valid."""

        class _Stale(Exception):
            pass

        def apply(doc: dict[str, Any], now: int, attempt: int) -> Any:
            if attempt and not still_applies(doc):
                raise _Stale
            return change(doc, now)

        try:
            result = write_table(self.session, apply, lambda doc, outcome: True,
                                    WriteOptions(verify_s=None, clock=self.clock, report=Reporter(), mirror=False))
        except (_Stale, ConflictError):
            self.adopt_timers()
            return None
        self.table_doc = result.doc
        self.table_stamp = self._stamp()
        return result

    def due_slot(self, now_ms: int) -> int | None:
        """The due active slot with the smallest fire time, then the lowest id."""
        slots = doc_slots(self.table_doc)
        due = [(s["fire_at_ms"], i) for i, s in slots.items() if is_active(s) and s["fire_at_ms"] <= now_ms]
        return min(due)[1] if due else None

    def fire_timer(self) -> bool:
        """Fire the earliest due slot (idle only); True when a turn started."""
        if self.table_broken or doc_paused(self.table_doc):
            return False
        now = self.clock.now_ms()
        slot_id = self.due_slot(now)
        if slot_id is None:
            return False
        self.adopt_timers()  # just before firing: re-read, and re-decide if rev moved
        slot_id = self.due_slot(now)
        if slot_id is None or doc_paused(self.table_doc):
            return False
        expected = doc_slots(self.table_doc)[slot_id]["fire_at_ms"]

        def still_applies(doc: dict[str, Any]) -> bool:
            slot = doc_slots(doc).get(slot_id)
            if not slot:
                return False
            return is_active(slot) and slot.get("fire_at_ms") == expected

        def fire(doc: dict[str, Any], fire_time: int) -> dict[str, Any]:
            slot = doc_slots(doc)[slot_id]
            if slot["repeat_count"] == -1:
                slot["fire_at_ms"] = fire_time + slot["delay_ms"]
            else:
                slot["repeat_count"] -= 1
                if slot["repeat_count"] <= 0:
                    slot["repeat_count"] = 0
                    slot["active"] = False
                else:
                    slot["fire_at_ms"] = fire_time + slot["delay_ms"]
            return dict(slot)

        result = self._write(fire, still_applies)
        if result is None:
            return False
        slot = result.outcome
        self.emit("callback_fired", slot=slot_id, repeat_count=slot["repeat_count"], retired=not slot["active"])
        self.start_turn("callback", str(slot_id), "auto", slot["message"])
        return True

    def note_deferrals(self) -> None:
        """While busy: each due slot is announced at most once per 5 s; the hold is in memory."""
        if doc_paused(self.table_doc):
            return
        now = self.clock.now_ms()
        for i, slot in doc_slots(self.table_doc).items():
            if is_active(slot) and slot["fire_at_ms"] <= now:
                last = self.deferred_at.get(i)
                if last is None or time.monotonic() - last >= DEFER_NOTE_S:
                    self.deferred_at[i] = time.monotonic()
                    self.emit("callback_deferred", slot=i)

    def rebase_after_turn(self, t_end: int) -> None:
        due = [i for i, slot in doc_slots(self.table_doc).items()
               if is_active(slot) and slot["fire_at_ms"] <= t_end]
        if not due or self.table_broken:
            return

        def rebase(doc: dict[str, Any], now: int) -> list[int]:
            moved = []
            for i, slot in doc_slots(doc).items():
                if is_active(slot) and slot["fire_at_ms"] <= t_end:
                    slot["fire_at_ms"] = t_end + slot["delay_ms"]
                    moved.append(i)
            return moved

        result = self._write(rebase, lambda doc: True)
        if result is not None and result.outcome:
            self.emit("callbacks_rebased", slots=result.outcome)
        self.deferred_at.clear()

    # --- inbox (§2.2) -----------------------------------------------------------------------------

    def take_one_message(self) -> None:
        try:
            # a message by the one rule; the agent claims only regular files (a FIFO or a link
            # there stays pending, listed as invalid by `inbox list`)
            names = sorted((e.name for e in os.scandir(self.inbox)
                            if is_message_name(e.name) and e.is_file(follow_symlinks=False)), key=os.fsencode)
        except FileNotFoundError:
            return
        if not names:
            return
        name = names[0]
        stem = name[: -len(".json")]
        done = self.inbox / "done"
        try:
            os.rename(self.inbox / name, done / name)  # the claim: retract cannot race past this
        except FileNotFoundError:
            return
        image = None
        for ext in IMAGE_EXTS:
            try:
                os.rename(self.inbox / f"{stem}.{ext}", done / f"{stem}.{ext}")
                image = image or done / f"{stem}.{ext}"
            except FileNotFoundError:
                pass
        text, mode, reason = self._read_claimed(done / name, image)
        if reason is not None:
            self.emit("inbox", stem=stem, mode=mode, action="invalid", reason=reason)
            return
        if image is not None and not self._image_ok(image):
            self.emit("warning", message=f"[Inbox] dropped image {image.name}: too large or not a valid image")
            image = None
        self.deliver(stem, mode, text or "", image)

    @staticmethod
    def _read_claimed(path: Path, image: Path | None) -> tuple[str | None, str, str | None]:
        try:
            raw = read_bytes_capped(path, MAX_MESSAGE_BYTES)
        except OSError as error:
            return None, "auto", f"unreadable ({error.strerror})"
        if not raw or len(raw) > MAX_MESSAGE_BYTES:
            return None, "auto", "empty or larger than 64000 bytes"
        message, _, invalid = InboxMessage.parse(raw)
        if invalid or message is None:
            return None, "auto", invalid or "invalid"
        if message.text is None and image is None:
            return None, message.mode, "no text and no image"
        return message.text, message.mode, None

    @staticmethod
    def _image_ok(path: Path) -> bool:
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                return False
            with os.fdopen(open_regular(path), "rb") as handle:
                head = handle.read(16)
        except OSError:
            return False
        return image_type_ok(path.suffix[1:], head)

    def deliver(self, stem: str, mode: str, text: str, image: Path | None) -> None:
        with self.state:
            busy = self.current is not None
            if busy and mode == "queue":
                accepted = self.buffers.add_queued(text)
                count = len(self.buffers.queue)
            elif busy:
                accepted = self.buffers.add_interrupt(text)
                count = len(self.buffers.interrupts)
        if not busy:
            self.emit("inbox", stem=stem, mode=mode, action="turn")
            self.start_turn("inbox", stem, mode, text, image)
        elif not accepted:
            kind = "queue" if mode == "queue" else "interrupt"
            self.emit("warning", message=f"[{'Queued' if kind == 'queue' else 'Interrupt'}] dropped: buffer full")
        elif mode == "queue":
            self.emit("inbox", stem=stem, mode=mode, action="queued", count=count, text=text)
        else:
            self.emit("inbox", stem=stem, mode=mode, action="interrupt", text=text)

    # --- turns (§3) -------------------------------------------------------------------------------

    def start_turn(self, source: str, ref: str, mode: str, text: str, image: Path | None = None) -> None:
        with self.state:
            self.turn_counter += 1
            turn = Turn(self.turn_counter, source, ref, mode, text, image)
            self.current = turn
            self.buffers.late_interrupts = False
        self.emit("turn_start", turn=turn.number, source=source, ref=ref, mode=mode, text=text,
                  image=str(image) if image else None)
        self.turn_started = time.monotonic()
        self.worker = threading.Thread(target=self._run_turn, args=(turn,), name=f"turn-{turn.number}", daemon=True)
        self.worker.start()

    def _boundary(self, turn: Turn, interrupts_file: Path | None) -> None:
        with self.state:
            pending = list(self.buffers.interrupts)
            self.buffers.interrupts.clear()
            self.buffers.late_interrupts = False
        if pending:
            text = "\n".join(pending)
            self.emit("interrupt_delivered", turn=turn.number, text=text)
            if interrupts_file is not None:
                with open(interrupts_file, "a", encoding="utf-8") as handle:
                    handle.write(text + "\n")

    def _run_turn(self, turn: Turn) -> None:
        exit_code = None
        try:
            if self.options.exec_cmd:
                exit_code = self._run_exec(turn)
            else:
                deadline = time.monotonic() + self.options.turn_seconds
                while time.monotonic() < deadline and not self.stopping.is_set():
                    time.sleep(min(BOUNDARY_S, max(0.0, deadline - time.monotonic())))
                    self._boundary(turn, None)
                if self.stopping.is_set() and time.monotonic() < deadline:
                    self.interrupted = True
        finally:
            self.turn_exit = exit_code
            self.turn_done = True

    def _run_exec(self, turn: Turn) -> int:
        interrupts = self.dir / f".sxctl-interrupts-{turn.number}.txt"
        env = self.child_env()
        env.update(SXCTL_TURN_SOURCE=turn.source, SXCTL_TURN_MODE=turn.mode, SXCTL_INTERRUPTS=str(interrupts),
                   SXCTL_TURN_IMAGE=str(turn.image) if turn.image else "")
        env["SXCTL_TURN_SLOT" if turn.source == "callback" else "SXCTL_TURN_STEM"] = turn.ref
        capture = self.capture_output
        assert self.options.exec_cmd is not None  # only --exec turns run a process
        self.proc = proc = subprocess.Popen(["/bin/sh", "-c", self.options.exec_cmd], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE if capture else None,
                                            stderr=subprocess.PIPE if capture else None, env=env,
                                            cwd=self.options.project, start_new_session=True)
        readers = []
        if capture:
            for stream_name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
                reader = threading.Thread(target=self._pump, args=(turn, stream_name, stream), daemon=True)
                reader.start()
                readers.append(reader)
        try:
            assert proc.stdin is not None
            proc.stdin.write(turn.text.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        stop_sent = None
        while self.proc.poll() is None:
            time.sleep(BOUNDARY_S / 5)
            self._boundary(turn, interrupts)
            if self.stopping.is_set():
                if stop_sent is None:
                    stop_sent = time.monotonic()
                    self.interrupted = True
                    _signal_group(self.proc, signal.SIGTERM)
                elif time.monotonic() - stop_sent > 5:
                    _signal_group(self.proc, signal.SIGKILL)
        for reader in readers:
            reader.join()
        try:
            os.unlink(interrupts)
        except FileNotFoundError:
            pass
        return self.proc.returncode

    def _pump(self, turn: Turn, stream_name: str, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.emit("output", turn=turn.number, stream=stream_name, line=raw.decode("utf-8", "replace").rstrip("\n"))

    def finish_turn_if_done(self) -> None:
        if self.current is None or not getattr(self, "turn_done", False):
            return
        if self.worker is not None:
            self.worker.join()
        turn = self.current
        duration = round((time.monotonic() - self.turn_started) * 1000)
        fields: dict[str, Any] = {"turn": turn.number, "duration_ms": duration}
        if self.options.exec_cmd:
            fields["exit_code"] = self.turn_exit
        stopping = self.stopping.is_set()  # then the buffers stay for shutdown to report as dropped
        with self.state:
            self.current = None
            self.turn_done = False
            self.proc = None
            late = self.buffers.interrupts if self.buffers.late_interrupts and not stopping else []
            if late:
                self.buffers.interrupts = []
            queued = [] if late or stopping else list(self.buffers.queue)
            if queued:
                self.buffers.queue.clear()
        self.turns += 1
        self.emit("turn_end", **fields)
        self.rebase_after_turn(self.clock.now_ms())
        self.write_stats()
        self.idle_since = time.monotonic()
        if late:
            self.start_turn("interrupt", "-", "interrupt", "\n".join(late))
        elif queued:
            self.emit("queue_flush", count=len(queued))
            self.start_turn("queue", "-", "queue", "\n\n".join(queued))

    # --- stats (§6) -------------------------------------------------------------------------------

    def write_stats(self, *, stopped: bool = False) -> None:
        now = self.clock.now_ms()
        slots = doc_slots(self.table_doc)
        active = [s for s in slots.values() if is_active(s)]
        next_fire = min((s["fire_at_ms"] for s in active), default=0)
        with self.state:
            busy = self.current is not None
            queued, interrupts = len(self.buffers.queue), len(self.buffers.interrupts)
        stats = {
            "updated_ms": now, "model": self.options.model, "cwd": str(self.options.project),
            "branch": _git_branch(self.options.project), "context_max": 0,
            "callbacks": {"active_count": len(active), "next_fire_ms": next_fire,
                          "remaining_s": max(0, -(-(next_fire - now) // 1000)) if next_fire else 0},
            "bash": {"running": self.proc is not None,
                     "command": (self.options.exec_cmd or "") if self.proc is not None else ""},
            "bgtasks": {"running": 0, "total": 0},
            "sxctl": {"agent": "reference", "pid": os.getpid(), "busy": busy, "turns": self.turns,
                      "queued": queued, "interrupts": interrupts, **({"stopped": True} if stopped else {})},
        }
        atomic_write(self.dir / "stats.json", (json.dumps(stats) + "\n").encode(),
                     temp=self.dir / f"stats.json.sxctl-{os.urandom(16).hex()}.tmp")
        self.last_stats = time.monotonic()

    # --- the loop (§2) ------------------------------------------------------------------------------

    def run(self, capture_output: bool = False) -> int:
        self.capture_output = capture_output
        self.turn_done = False
        poll = self.options.poll_ms / 1000
        while True:
            self.finish_turn_if_done()
            if self.stopping.is_set():
                if self.current is None:
                    break
                time.sleep(poll / 4)
                continue
            self.adopt_timers()
            started = False
            before = self.current
            if self._may_take_a_message():
                self.take_one_message()
            started = self.current is not None and self.current is not before
            if self.current is None and not started and self._turns_left() != 0:
                started = self.fire_timer()
            elif self.current is not None and not started:
                self.note_deferrals()
            if time.monotonic() - self.last_stats >= STATS_EVERY_S:
                self.write_stats()
            if self._should_exit():
                break
            time.sleep(poll)
        return self.shutdown()

    def _turns_left(self) -> int | None:
        """How many more turns `--max-turns` allows to start (None: no limit)."""
        return None if self.options.max_turns is None else self.options.max_turns - self.turn_counter

    def _may_take_a_message(self) -> bool:
        """Take a message only if it is sure to be delivered within `--max-turns`: idle, into a new
        turn; busy, only while two more turns remain (a late interrupt and the queued notes can
        each start one). Everything else stays pending in the inbox."""
        left = self._turns_left()
        return left is None or left >= (1 if self.current is None else 2)

    def _should_exit(self) -> bool:
        if self.options.max_turns is not None and self.turns >= self.options.max_turns and self.current is None:
            return True
        if self.options.idle_exit_s is None or self.current is not None:
            if self.current is not None:
                self.idle_since = time.monotonic()
            return False
        horizon = self.clock.now_ms() + self.options.idle_exit_s * 1000
        soon = any(is_active(s) and s["fire_at_ms"] <= horizon for s in doc_slots(self.table_doc).values())
        pending = any(is_message_name(name) for name in os.listdir(self.inbox))
        if soon or pending:
            self.idle_since = time.monotonic()
            return False
        return time.monotonic() - self.idle_since >= self.options.idle_exit_s

    def request_stop(self, signal_name: str) -> None:
        if not self.stopping.is_set():
            self.stopping.set()
            self.emit("stopping", signal=signal_name)

    def shutdown(self) -> int:
        if self.worker is not None and self.worker.is_alive():
            self.worker.join()
        self.finish_turn_if_done()
        with self.state:
            dropped = self.buffers.interrupts + self.buffers.queue
            self.buffers.interrupts, self.buffers.queue = [], []
        for text in dropped:
            self.emit("dropped", text=text)
        if self.interrupted:
            self.rebase_after_turn(self.clock.now_ms())
        # the clean-stop record, `"sxctl": {"stopped": true}`: the session is `stopped` from now on
        # (not live, so a restart need not wait 10 s; not `stale`, so nobody suspects a rotation)
        self.write_stats(stopped=True)
        self.emit("stopped", turns=self.turns, dropped=len(dropped))
        self.lock.release()
        return 0

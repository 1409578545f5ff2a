"""The reference agent's turns (reference-agent.md §3) and its stats (reference-agent.md §6): a turn
runs on a worker thread — sleeping `--turn-seconds`, or running `--exec` with the turn's text on stdin — so
that the main loop keeps consuming; interrupts reach it at each boundary, queued notes follow it.
Everything shared with the worker is guarded by one lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..fsio import atomic_write
from ..project import Session
from ..project.whose import pid_space
from .parts import AgentOptions, Announce, Buffers, Turn, git_branch, signal_group
from .usage_model import UsageModel

BOUNDARY_S = 0.5


class TurnRunner:
    """One turn at a time, the interrupt and queue buffers around it, and `stats.json`."""

    def __init__(self, options: AgentOptions, session: Session, clock: Clock, emit: Announce,
                 stopping: threading.Event) -> None:
        self.options, self.session, self.dir, self.clock, self.emit = options, session, session.dir, clock, emit
        self.stopping = stopping
        self.state = threading.Lock()
        self.buffers = Buffers()
        self.turns = 0
        self.turn_counter = 0
        self.current: Turn | None = None
        self.worker: threading.Thread | None = None
        self.proc: subprocess.Popen | None = None
        self.interrupted = False
        self.turn_done = False
        self.turn_exit: int | None = None
        self.turn_started = 0.0
        self.capture_output = False
        self.last_stats = 0.0
        self.usage = UsageModel(clock, tokens_per_turn=options.tokens_per_turn, rl_per_turn=options.rl_per_turn,
                                rl_window_s=options.rl_window_s)

    def child_env(self) -> dict[str, str]:
        return {**os.environ, "SX_SESSION_DIR": str(self.dir), "SX_SESSION_ID": self.session.id,
                "SX_CWD": str(self.options.project)}

    def deliver(self, stem: str, mode: str, text: str, image: Path | None) -> None:
        """A claimed message: a new turn when idle, else into the interrupt or queue buffer."""
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
            self.start("inbox", stem, mode, text, image)
        elif not accepted:
            kind = "queue" if mode == "queue" else "interrupt"
            self.emit("warning", message=f"[{'Queued' if kind == 'queue' else 'Interrupt'}] dropped: buffer full")
        elif mode == "queue":
            self.emit("inbox", stem=stem, mode=mode, action="queued", count=count, text=text)
        else:
            self.emit("inbox", stem=stem, mode=mode, action="interrupt", text=text)

    def start(self, source: str, ref: str, mode: str, text: str, image: Path | None = None) -> None:
        with self.state:
            self.turn_counter += 1
            turn = Turn(self.turn_counter, source, ref, mode, text, image)
            self.current = turn
            self.buffers.late_interrupts = False
        self.emit("turn_start", turn=turn.number, source=source, ref=ref, mode=mode, text=text,
                  image=str(image) if image else None)
        self.turn_started = time.monotonic()
        self.worker = threading.Thread(target=self._run, args=(turn,), name=f"turn-{turn.number}", daemon=True)
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

    def _run(self, turn: Turn) -> None:
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
                    signal_group(self.proc, signal.SIGTERM)
                elif time.monotonic() - stop_sent > 5:
                    signal_group(self.proc, signal.SIGKILL)
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

    def finish_if_done(self) -> tuple[list[str], list[str]] | None:
        """End a turn whose worker is done (`turn_end`); None while none is. Returns what the
        next turn carries — late interrupts, else the queued notes — for the caller to start it
        once the timers are re-based and the stats written. While stopping, the buffers stay for
        shutdown to report as dropped."""
        if self.current is None or not self.turn_done:
            return None
        if self.worker is not None:
            self.worker.join()
        turn = self.current
        duration = round((time.monotonic() - self.turn_started) * 1000)
        fields: dict[str, Any] = {"turn": turn.number, "duration_ms": duration}
        if self.options.exec_cmd:
            fields["exit_code"] = self.turn_exit
        stopping = self.stopping.is_set()
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
        self.usage.turn_ended(turn.text)
        self.emit("turn_end", **fields)
        return late, queued

    def start_next(self, late: list[str], queued: list[str]) -> None:
        """The turn that follows a finished one: its late interrupts, else its queued notes."""
        if late:
            self.start("interrupt", "-", "interrupt", "\n".join(late))
        elif queued:
            self.emit("queue_flush", count=len(queued))
            self.start("queue", "-", "queue", "\n\n".join(queued))

    def drop_buffers(self) -> list[str]:
        """At shutdown: the interrupts and queued notes no turn will carry."""
        with self.state:
            dropped = self.buffers.interrupts + self.buffers.queue
            self.buffers.interrupts, self.buffers.queue = [], []
        return dropped

    def write_stats(self, active_slots: list[dict[str, Any]], *, stopped: bool = False) -> None:
        """`stats.json` (reference-agent.md §6): the heartbeat that makes the session live, with the
        timers' summary and the stand-in usage counters."""
        now = self.clock.now_ms()
        next_fire = min((s["fire_at_ms"] for s in active_slots), default=0)
        with self.state:
            busy = self.current is not None
            queued, interrupts = len(self.buffers.queue), len(self.buffers.interrupts)
        stats = {
            "updated_ms": now, "model": self.options.model, "cwd": str(self.options.project),
            "branch": git_branch(self.options.project), "context_max": 0,
            "callbacks": {"active_count": len(active_slots), "next_fire_ms": next_fire,
                          "remaining_s": max(0, -(-(next_fire - now) // 1000)) if next_fire else 0},
            "bash": {"running": self.proc is not None,
                     "command": (self.options.exec_cmd or "") if self.proc is not None else ""},
            "bgtasks": {"running": 0, "total": 0},
            "usage": self.usage.block(), "history": self.usage.history,
            "sxctl": {"agent": "reference", "pid": os.getpid(), "pid_space": pid_space(), "busy": busy,
                      "turns": self.turns, "queued": queued, "interrupts": interrupts,
                      **({"stopped": True} if stopped else {})},
        }
        atomic_write(self.dir / "stats.json", (json.dumps(stats) + "\n").encode(),
                     temp=self.dir / f"stats.json.sxctl-{os.urandom(16).hex()}.tmp")
        self.last_stats = time.monotonic()

"""The reference agent's parts that are plain data or plain functions: its options, a turn, the
buffers of interrupts and queued notes, session names, process helpers, and the shape of the
function every part announces its events with."""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import ConflictError, ErrorCode
from .usage_model import DEFAULT_RL_PER_TURN, DEFAULT_RL_WINDOW_S, DEFAULT_TOKENS_PER_TURN

ADJECTIVES = ("quiet", "brave", "calm", "eager", "gentle", "happy", "jolly", "keen", "lucid", "merry", "nimble",
              "proud", "rapid", "sharp", "steady", "witty")
NOUNS = ("euler", "curie", "newton", "turing", "hopper", "lovelace", "gauss", "noether", "darwin", "kepler",
         "fermi", "bohr", "planck", "galois", "ramanujan", "hypatia")
INTERRUPT_BUFFER = 4096
QUEUE_BUFFER = 8192

#: `announce(event, **fields)`: one observable step of the agent (the loop stamps and emits it)
Announce = Callable[..., None]
#: where the agent's events go: one dict each, `{"event", "ts_ms", ...}`
Emit = Callable[[dict[str, Any]], None]


@dataclass
class AgentOptions:
    """How `agent run` runs the reference agent: which session, the turn command, timing and limits."""

    project: Path
    session_id: str | None = None
    exec_cmd: str | None = None
    turn_seconds: float = 1.0
    poll_ms: int = 200
    idle_exit_s: float | None = None
    max_turns: int | None = None
    model: str = "sxctl-reference"
    force: bool = False
    tokens_per_turn: int = DEFAULT_TOKENS_PER_TURN  # the stand-in usage counters (agent/usage_model.py)
    rl_per_turn: float = DEFAULT_RL_PER_TURN
    rl_window_s: float = DEFAULT_RL_WINDOW_S


@dataclass
class Turn:
    """One turn of the reference agent: what started it (`source`, `ref`) and the text it is given."""

    number: int
    source: str  # inbox | callback | queue | interrupt
    ref: str
    mode: str
    text: str
    image: Path | None = None


@dataclass
class Buffers:
    """The agent's in-memory interrupt and queue buffers (lost on shutdown, as upstream)."""

    interrupts: list[str] = field(default_factory=list)
    queue: list[str] = field(default_factory=list)
    late_interrupts: bool = False  # arrived after the last boundary of the running turn

    @staticmethod
    def _size(items: list[str]) -> int:
        return sum(len(item.encode()) for item in items)

    def add_interrupt(self, text: str) -> bool:
        if self._size(self.interrupts) + len(text.encode()) > INTERRUPT_BUFFER:
            return False
        self.interrupts.append(text)
        self.late_interrupts = True
        return True

    def add_queued(self, text: str) -> bool:
        if self._size(self.queue) + len(text.encode()) > QUEUE_BUFFER:
            return False
        self.queue.append(text)
        return True


def new_session_id(today: date, taken: Callable[[str], bool]) -> str:
    """`YYYY_MM_DD_<adjective>_<noun>` from the built-in words, retrying on a collision."""
    rng = random.Random()
    for _ in range(1000):
        candidate = f"{today:%Y_%m_%d}_{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}"
        if not taken(candidate):
            return candidate
    raise ConflictError("no free session name left for today", code=ErrorCode.NAME_TAKEN)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def git_branch(project: Path) -> str:
    try:
        head = (project / ".git" / "HEAD").read_text().strip()
    except OSError:
        return ""
    return head.rsplit("/", 1)[-1] if head.startswith("ref:") else head[:12]

"""Running the built-in reference agent (spec agent.md): it consumes the inbox and fires timers,
for demos, tests and CI."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# INBOX and TRANSCRIPT: the transcript lines of the agent's events (offered for the CLI's rendering)
from ..agent.loop import ReferenceAgent
from ..agent.parts import AgentOptions
from ..agent.transcript import INBOX, TRANSCRIPT  # noqa: F401
from ..agent.usage_model import DEFAULT_RL_PER_TURN, DEFAULT_RL_WINDOW_S, DEFAULT_TOKENS_PER_TURN
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NotFoundError
from ..record import record
from .scope import find_project


class AgentHandle:
    """A running reference agent, as `run_agent`'s `on_ready` gets it: ask it to stop."""

    def __init__(self, reference: ReferenceAgent) -> None:
        self._reference = reference

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for already."""
        return self._reference.stopping.is_set()

    def stop(self, reason: str) -> None:
        """Finish the current turn and stop (`reason`, e.g. a signal's name, is in the `stopping` event)."""
        self._reference.request_stop(reason)


@record
class AgentRun:
    """How a run of the reference agent ended."""

    session_id: str
    turns: int

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "session": self.session_id, "turns": self.turns}


def run_agent(
    on_event: Callable[[dict[str, Any]], None],
    *,
    init: bool = False,
    exec_cmd: str | None = None,
    turn_seconds: float = 1.0,
    poll_ms: int = 200,
    idle_exit: float | None = None,
    max_turns: int | None = None,
    model: str = "sxctl-reference",
    force: bool = False,
    session: str | None = None,
    project: str | os.PathLike | None = None,
    capture_output: bool = False,
    on_ready: Callable[[AgentHandle], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    tokens_per_turn: int = DEFAULT_TOKENS_PER_TURN,
    rl_per_turn: float = DEFAULT_RL_PER_TURN,
    rl_window: float = DEFAULT_RL_WINDOW_S,
) -> AgentRun:
    """Run the reference agent in a session until it stops (`idle_exit` seconds idle, `max_turns`,
    or asked to through its handle); every event goes to `on_event`. With `init`, a folder
    without a project becomes one. `on_ready` gets the agent's `AgentHandle` before the agent
    announces that it started (the CLI makes SIGINT/SIGTERM a clean stop through it).
    `tokens_per_turn`, `rl_per_turn` and `rl_window` (seconds) shape the stand-in `usage` block
    of its stats.json (reference-agent.md §6)."""
    try:
        root = find_project(project, session=session)
    except NotFoundError:
        if not init:
            raise
        root = Path(os.path.realpath(project or os.getcwd()))
    options = AgentOptions(project=root, session_id=session or None,
                           exec_cmd=exec_cmd, turn_seconds=turn_seconds, poll_ms=poll_ms,
                           idle_exit_s=idle_exit, max_turns=max_turns, model=model, force=force,
                           tokens_per_turn=tokens_per_turn, rl_per_turn=rl_per_turn, rl_window_s=rl_window)
    reference = ReferenceAgent(options, on_event, clock=clock)
    if on_ready is not None:  # before `started` is announced: a stop asked for right after it must be clean
        on_ready(AgentHandle(reference))
    reference.start()
    reference.run(capture_output=capture_output)
    return AgentRun(reference.session.id, reference.turns)

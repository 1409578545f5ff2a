"""Running the built-in reference agent (spec agent.md): it consumes the inbox and fires timers,
for demos, tests and CI."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NotFoundError
from ..record import record

if TYPE_CHECKING:
    from ..agent.loop import ReferenceAgent


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
    handle_signals: bool = True,
    clock: Clock = SYSTEM_CLOCK,
) -> AgentRun:
    """Run the reference agent in a session until it stops (SIGINT/SIGTERM, `idle_exit` seconds
    idle, or `max_turns`); every event goes to `on_event`. With `init`, a folder without a
    project becomes one. `handle_signals` (main thread only) makes SIGINT/SIGTERM a clean stop."""
    from ..agent.loop import ReferenceAgent
    from ..agent.parts import AgentOptions
    from .scope import find_project

    try:
        root = find_project(project, session=session)
    except NotFoundError:
        if not init:
            raise
        root = Path(os.path.realpath(project or os.getcwd()))
    options = AgentOptions(project=root, session_id=session or os.environ.get("SXCTL_SESSION") or None,
                           exec_cmd=exec_cmd, turn_seconds=turn_seconds, poll_ms=poll_ms,
                           idle_exit_s=idle_exit, max_turns=max_turns, model=model, force=force)
    reference = ReferenceAgent(options, on_event, clock=clock)
    if handle_signals:  # before `started` is announced: a stop asked for right after it must be clean
        _stop_on_signals(reference)
    reference.start()
    reference.run(capture_output=capture_output)
    return AgentRun(reference.session.id, reference.turns)


def _stop_on_signals(reference: ReferenceAgent) -> None:
    import signal

    def on_signal(signum, frame) -> None:
        if reference.stopping.is_set() and signum == signal.SIGINT:
            os._exit(130)
        reference.request_stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


@record
class DemoSummary:
    """How the demo tour went: checks passed and failed, and the project if it was kept."""

    passed: int
    failed: int
    steps: int
    project: Path | None
    ts_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"event": "summary", "ts_ms": self.ts_ms, "ok": self.failed == 0, "passed": self.passed,
                "failed": self.failed, "steps": self.steps, "project": str(self.project) if self.project else None}


def run_demo(show: Callable[[str], None], emit: Callable[[dict[str, Any]], None], *, as_json: bool = False,
             fast: bool = False, keep: bool = False, clock: Clock = SYSTEM_CLOCK) -> DemoSummary:
    """The whole protocol, live, against the reference agent in a throw-away project: every
    step a real `sxctl` command, checked. Transcript lines go to `show`, or with `as_json` one
    event per step to `emit`."""
    import shutil

    from ..demo import Demo

    tour = Demo(fast, as_json, show, emit)
    if not as_json:
        show(f"sxctl demo in {tour.project}\n")
    passed, failed = tour.run()
    if not keep:
        shutil.rmtree(tour.project, ignore_errors=True)
    return DemoSummary(passed, failed, len(tour.steps), tour.project if keep else None, clock.now_ms())

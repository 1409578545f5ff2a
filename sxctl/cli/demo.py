"""`sxctl demo`: the whole protocol, live, against the built-in agent in a throw-away project.

The tour (`demo_script`) drives `python -m sxctl` in subprocesses: it is a client of the CLI,
so it lives here and not behind the API."""

from __future__ import annotations

import shutil
import signal

import click

from ..errors import ExitStatus
from .output import Command, emit, emit_json, say, settings


@click.command("demo", cls=Command, streams="always")
@click.option("--keep", is_flag=True, help="Keep the demo project instead of removing it.")
@click.option("--fast", is_flag=True, help="Shorter turns (for CI).")
def demo(keep: bool, fast: bool) -> None:
    """Run the whole protocol live against the built-in agent, checking every step.

    Creates a throw-away project, starts `sxctl agent run` in it, then drives sessions, the
    inbox, timers and the scheduler; exits 1 if any check fails.

    \b
    Examples:
      sxctl demo
      sxctl demo --fast --json | jq -c 'select(.ok == false)'
    """
    from .demo_script import Demo  # the tour (and the agent's transcript lines) load when it runs

    s = settings()
    tour = Demo(fast, s.json, lambda text: say(text, lines=True), emit_json)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM as Ctrl-C: the project is removed
    try:
        if not s.json:
            say(f"sxctl demo in {tour.project}\n", lines=True)
        passed, failed = tour.run()
    finally:  # interrupted or not, the throw-away project goes (the tour has stopped its agent)
        signal.signal(signal.SIGTERM, previous)
        if not keep:
            shutil.rmtree(tour.project, ignore_errors=True)
    summary = {"event": "summary", "ts_ms": s.clock.now_ms(), "ok": failed == 0, "passed": passed, "failed": failed,
               "steps": len(tour.steps), "project": str(tour.project) if keep else None}
    kept = f"; project kept at {tour.project}" if keep else ""
    emit(summary, lambda: say(f"{passed} check(s) passed, {failed} failed{kept}"))
    if failed:
        raise click.exceptions.Exit(ExitStatus.INTERNAL)  # a failed check: exit 1, as documented


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # exit 130 (`interrupted`), after the tour's and this command's clean-up

"""`sxctl demo`: the whole protocol, live, against the built-in agent in a throw-away project."""

from __future__ import annotations

import click

from .output import Command, emit, emit_json, say, settings


@click.command("demo", cls=Command)
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
    from ..api import run_demo

    s = settings()
    result = run_demo(lambda text: say(text, lines=True), emit_json, as_json=s.json, fast=fast, keep=keep,
                      clock=s.clock)
    kept = f"; project kept at {result.project}" if result.project else ""
    emit(result.to_json(), lambda: say(f"{result.passed} check(s) passed, {result.failed} failed{kept}"))
    if result.failed:
        raise click.exceptions.Exit(1)



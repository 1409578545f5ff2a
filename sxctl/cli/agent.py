"""`sxctl agent run`: the built-in reference agent, rendered as a transcript or JSON Lines."""

from __future__ import annotations

import os
import signal
import sys
import threading

import click

from ..errors import ExitStatus
from .output import DURATION, Group, emit_json, say, settings


def renderer(as_json: bool):
    """A thread-safe event printer (turns run on a worker thread): JSON Lines or the transcript."""
    from ..api.agent import INBOX, TRANSCRIPT  # the agent part loads when the agent runs (not for --help)

    lock = threading.Lock()

    def render(event: dict) -> None:
        with lock:
            if as_json:
                emit_json(event)
                return
            kind = event["event"]
            if kind == "inbox":
                line = INBOX.get(event["action"])
                if line:
                    say(line(event), lines=True)
            elif kind == "warning":
                say(f"sxctl: warning: {event['message']}", err=True)
            elif kind == "dropped":
                say(f"[Dropped] {event['text']}", err=True, lines=True)
            elif kind in TRANSCRIPT:
                say(TRANSCRIPT[kind](event), lines=True)
            sys.stdout.flush()

    return render


@click.group("agent", cls=Group)
def agent() -> None:
    """A small built-in agent that consumes the inbox and fires timers, for demos, tests and CI.

    \b
    Example:
      sxctl agent run --init --exec 'llm -m gpt-4o-mini'
    """


@agent.command("run", streams="always")
@click.option("--init", is_flag=True, help="Create ./.scorpiox/ if no project is found.")
@click.option("--exec", "exec_cmd", metavar="CMD", help="Run CMD for each turn (turn text on stdin).")
@click.option("--turn-seconds", type=DURATION, default="1", show_default=True, metavar="DURATION",
              help="How long a default turn keeps the agent busy.")
@click.option("--poll-ms", type=click.IntRange(10), default=200, show_default=True)
@click.option("--idle-exit", "idle_exit", type=DURATION, metavar="DURATION",
              help="Stop after this long idle with nothing pending or due.")
@click.option("--max-turns", type=click.IntRange(1), help="Stop after N turns.")
@click.option("--model", default="sxctl-reference", show_default=True)
@click.option("--force", is_flag=True, help="Adopt a session whose stats.json looks live.")
@click.option("--tokens-per-turn", type=click.IntRange(1, 10_000_000), default=1500, show_default=True,
              metavar="N", help="Stand-in usage: tokens each turn adds to usage.total_tokens.")
@click.option("--rl-per-turn", type=click.FloatRange(0, 1), default=0.02, show_default=True, metavar="FRACTION",
              help="Stand-in usage: what each turn adds to usage.rl_5h while it is in the window.")
@click.option("--rl-window", type=DURATION, default="5h", show_default=True, metavar="DURATION",
              help="Stand-in usage: how long a turn counts in rl_5h (rl_5h falls as turns leave it).")
def run(init, exec_cmd, turn_seconds, poll_ms, idle_exit, max_turns, model, force, tokens_per_turn, rl_per_turn,
        rl_window) -> None:
    """Run the reference agent in a session: inbox turns, interrupts, queue, timers, stats.json.

    \b
    Examples:
      sxctl agent run --init --json
      sxctl --session 2026_09_21_quiet_euler agent run --exec 'cat >> turns.log' --idle-exit 30
    """
    from ..api import run_agent

    s = settings()
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_agent(renderer(s.json), init=init, exec_cmd=exec_cmd, turn_seconds=turn_seconds, poll_ms=poll_ms,
                  idle_exit=idle_exit, max_turns=max_turns, model=model, force=force,
                  session=s.session or os.environ.get("SXCTL_SESSION") or None, project=s.project,
                  capture_output=s.json, on_ready=_stop_on_signals, clock=s.clock, tokens_per_turn=tokens_per_turn,
                  rl_per_turn=rl_per_turn, rl_window=rl_window)
    finally:  # the agent's handlers end with it: a caller in the same process keeps its own Ctrl-C
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stop_on_signals(agent) -> None:
    """SIGINT and SIGTERM finish the current turn and stop the agent; a second Ctrl-C while it
    stops ends the process at once (exit 130)."""

    def on_signal(signum, frame) -> None:
        if agent.stopping and signum == signal.SIGINT:
            os._exit(ExitStatus.INTERRUPTED)
        agent.stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

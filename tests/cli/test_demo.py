"""`sxctl demo --fast` runs the whole tour against the reference agent and every check passes.

The tour mostly waits for the agent's turns, so its two forms (JSON Lines, and the human
transcript with `--keep`) run side by side, started with the run (conftest.start_demo)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import demo_tours

pytestmark = pytest.mark.slow


def test_demo_passes_as_json_and_keeps_the_project_when_asked(tmp_path):
    tours = demo_tours(tmp_path)
    out, err, code = tours["json"].out, tours["json"].err, tours["json"].code
    human_out, human_code = tours["human"].out, tours["human"].code

    events = [json.loads(line) for line in out.splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    failed = [(s["command"], c["check"]) for s in steps for c in s["checks"] if not c["ok"]]
    assert failed == [] and code == 0, err
    summary = events[-1]
    assert summary["event"] == "summary" and summary["ok"] is True and summary["failed"] == 0
    assert summary["passed"] >= 30 and summary["project"] is None
    assert all({"event", "ts_ms", "n", "command", "exit", "ok", "output"} <= set(s) for s in steps)
    commands = " ".join(s["command"] for s in steps)
    for verb in ("session which", "inbox send", "inbox retract", "callbacks set", "callbacks list", "cron tick",
                 "cron runs", "--fault-inject after-start"):
        assert verb in commands

    lines = human_out.splitlines()
    failed_checks = [shown for n, line in enumerate(lines) if "✗" in line for shown in lines[max(0, n - 6):n + 1]]
    assert human_code == 0, "\n".join(failed_checks) or human_out[-2000:]
    last = human_out.strip().splitlines()[-1]
    assert last.startswith(f"{last.split()[0]} check(s) passed, 0 failed; project kept at ")
    kept = last.rsplit(" ", 1)[1]
    assert (Path(kept) / ".scorpiox" / "sessions").is_dir()
    assert "✓" in human_out and "✗" not in human_out


def test_the_tour_does_not_take_a_fired_timer_for_an_idle_agent():
    """The agent reports `callback_fired` just before the timer's `turn_start`; a tour step sent
    in between met a busy agent (the `busy` check failed on a loaded machine)."""
    from sxctl.cli.demo_script import AgentWatch

    watch = AgentWatch.__new__(AgentWatch)
    watch.events = [{"event": "turn_start", "source": "inbox"}, {"event": "turn_end"},
                    {"event": "callback_fired"}]
    assert watch.wait_idle(timeout=0.1) is False
    watch.events += [{"event": "turn_start", "source": "callback"}]
    assert watch.wait_idle(timeout=0.1) is False  # the timer's turn runs
    watch.events += [{"event": "turn_end"}]
    assert watch.wait_idle(timeout=0.1) is True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_demo_removes_its_project(project, tmp_path, signum):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    demo = subprocess.Popen([sys.executable, "-m", "sxctl", "demo", "--fast"], cwd=tmp_path,
                            env=project.env(TMPDIR=str(scratch)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    first = demo.stdout.readline()
    assert first.startswith("sxctl demo in ") and list(scratch.glob("sxctl-demo-*"))
    demo.send_signal(signum)
    _, err = demo.communicate(timeout=60)
    assert demo.returncode == 130 and err.strip().splitlines()[-1] == "sxctl: interrupted", err
    assert "Traceback" not in err and list(scratch.glob("sxctl-demo-*")) == []

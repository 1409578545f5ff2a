"""`sxctl demo --fast` runs the whole tour against the reference agent and every check passes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def test_demo_fast_passes_within_a_minute(project):
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sxctl", "demo", "--fast", "--json"], cwd=project.root.parent,
                          env=project.env(), capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    failed = [(s["command"], c["check"]) for s in steps for c in s["checks"] if not c["ok"]]
    assert failed == [] and proc.returncode == 0, proc.stderr
    summary = events[-1]
    assert summary["event"] == "summary" and summary["ok"] is True and summary["failed"] == 0
    assert summary["passed"] >= 30 and summary["project"] is None
    assert all({"event", "ts_ms", "n", "command", "exit", "ok", "output"} <= set(s) for s in steps)
    commands = " ".join(s["command"] for s in steps)
    for verb in ("session which", "inbox send", "inbox retract", "callbacks set", "callbacks list", "cron tick",
                 "cron runs", "--fault-inject after-start"):
        assert verb in commands
    assert elapsed < 60


def test_demo_keeps_the_project_when_asked(project, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sxctl", "demo", "--fast", "--keep"], cwd=tmp_path,
                          env=project.env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{last.split()[0]} check(s) passed, 0 failed; project kept at ")
    kept = last.rsplit(" ", 1)[1]
    assert (__import__("pathlib").Path(kept) / ".scorpiox" / "sessions").is_dir()
    assert "✓" in proc.stdout and "✗" not in proc.stdout

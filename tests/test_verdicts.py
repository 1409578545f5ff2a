"""Verdicts that data which lies cannot fool: `doctor` on a heartbeat it cannot trust, every
validation path on sxctl's policy file as well as comis's files, the exit code of a file the
operating system refuses, a ledger a tail read sees to its start, and output cut by a closed pipe."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sxctl.clock import FakeClock

from .conftest import EXAMPLES

HOUR = 3_600_000


def checks(result, name: str) -> list[dict]:
    return [c for c in result.json()["checks"] if c["check"] == name]


def scheduled(project, *, at_ms: int) -> Path:
    """A live agent, a job scheduled every hour, and one pass at `at_ms` (its heartbeat)."""
    project.session()
    assert project.run("cron", "add", "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "x",
                       clock=FakeClock(at_ms)).code == 0
    assert project.run("cron", "tick", clock=FakeClock(at_ms)).code == 0
    beat = project.root / ".scheduler" / "sxctl-tick.json"
    assert json.loads(beat.read_text())["lastPassMs"] == at_ms
    return beat


# --- item 12: a ledger read to its start, and a closed pipe ---------------------------------------------

@pytest.fixture
def ledger_ws(project):
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    shutil.copy(EXAMPLES / "cron-jobs.json", scheduler / "cron-jobs.json")
    return scheduler / "cron-executions.jsonl"


def test_a_tail_read_that_reaches_the_start_rejects_a_terminal_without_start(project, ledger_ws):
    """The first row is the terminal of another job's run whose start is gone: comis rejects the
    ledger, and so does every read that gets that far."""
    rows = (EXAMPLES / "cron-executions.jsonl").read_text().splitlines(keepends=True)
    ledger_ws.write_text("".join(rows[1:]))
    before = ledger_ws.read_bytes()
    for args in (["next-check-in"], ["--all-jobs"], ["stretch-reminder"]):
        result = project.run("cron", "runs", *args, "--json")
        assert result.code == 5, (args, result.out)
        error = result.json()["error"]
        assert "Cron execution terminal has no start (line 1;" in error["message"] and error["file"] == str(ledger_ws)
    assert ledger_ws.read_bytes() == before


def test_a_tail_read_of_interleaved_runs_waits_for_their_starts(project, ledger_ws):
    """Two runs whose rows interleave (start A, start B, terminal A, terminal B) are a valid
    ledger: reading its tail for one run must not take A's start, still ahead, for missing."""
    rows = [json.loads(line) for line in (EXAMPLES / "cron-executions.jsonl").read_text().splitlines()]
    first, second = rows[2:4], rows[4:6]  # two runs of next-check-in, the later one settled later
    ordered = [first[0], second[0], first[1], second[1]]
    ledger_ws.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in ordered))
    tail = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--json")
    assert tail.code == 0, tail.out
    exact = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--exact", "--json")
    assert tail.json()["runs"] == exact.json()["runs"] and len(tail.json()["runs"]) == 1
    ordered = [first[0], second[0], second[1], first[1]]  # the earlier run settled last
    ledger_ws.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in ordered))
    tail = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--json")
    exact = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--exact", "--json")
    assert tail.code == 0 and tail.json()["runs"] == exact.json()["runs"], tail.out


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("flags", [["--json"], []], ids=["json", "human"])
def test_output_cut_by_a_closed_pipe_exits_141(project, unbuffered, flags):
    """`sxctl cron next … | head -c 10`: whatever the output and however Python buffers it, the
    reader going away is exit 141 and silence, never a 0 for a document cut short."""
    env = project.env()
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)  # far less than the output: the writer must block
    proc = subprocess.Popen([sys.executable, "-m", "sxctl", "cron", "next", "--cron", "* * * * *", "-n", "1000",
                             *flags], stdout=write_end, stderr=subprocess.PIPE, cwd=project.root, env=env)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb", buffering=0) as reader:
            assert len(reader.read(10)) == 10
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 141, err
        assert err == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

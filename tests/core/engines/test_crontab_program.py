"""crontab(1) that misbehaves: its output read up to the cap (exit 5, naming it), never without
end; it and every process it started killed when it is too slow (exit 6) or says too much; and
`doctor` saying so in its `crontab entry` check instead of nothing."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from sxctl.engines import crontab as crontab_engine
from sxctl.engines.outside import OUTSIDE_FILE_CAP


def stand_in(project, body: str) -> Path:
    """Replace the crontab stand-in on PATH (tests/conftest.py) with `body`; the file where it
    writes the pid of the child it leaves behind."""
    pid_file = project.home.parent / "child.pid"
    script = project.home.parent / "bin" / "crontab"
    script.write_text(f'#!/bin/sh\npid_file="{pid_file}"\n{body}')
    return pid_file


def gone(pid: int) -> bool:
    """Whether the process is gone (killed and reaped by init), waiting up to 10 s for it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if ") Z " in Path(f"/proc/{pid}/stat").read_text():  # a zombie: killed, not yet reaped
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def reap():
    """The children the stand-ins leave: killed at the end whatever the test found."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_an_endless_crontab_l_is_refused_at_the_cap_and_its_children_killed(project, reap):
    """The attack: `crontab -l` that never ends (`yes`) grew sxctl to GBs. Here it says more than
    the cap and keeps its output open (a child holds it): refused at the cap, not after 30 s."""
    pid_file = stand_in(project, f'[ "$1" = -l ] || exit 1\nsleep 600 & echo $! > "$pid_file"\n'
                                 f'head -c {OUTSIDE_FILE_CAP + 1} /dev/zero\nwait\n')
    started = time.monotonic()
    result = project.run("cron", "export", "--target", "crontab", "--install", "--json")
    reap.append(int(pid_file.read_text()))
    assert time.monotonic() - started < 20
    assert result.code == 5, result.out
    assert result.json()["error"]["message"] == (f"invalid data in crontab -l: its output is larger than {OUTSIDE_FILE_CAP} bytes; "
                                                 "not read further")
    assert gone(reap[0])
    [check] = [c for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "crontab entry"]
    assert check["status"] == "fail" and f"larger than {OUTSIDE_FILE_CAP} bytes" in check["message"]


def test_a_crontab_that_hangs_is_killed_with_every_process_it_started(project, reap, monkeypatch):
    monkeypatch.setattr(crontab_engine, "CRONTAB_TIMEOUT_S", 1.0)
    pid_file = stand_in(project, 'sleep 600 & echo $! > "$pid_file"\nwait\n')
    result = project.run("cron", "export", "--target", "crontab", "--install", "--json")
    reap.append(int(pid_file.read_text()))
    assert result.code == 6 and result.json()["error"]["message"] == "crontab -l did not finish within 1 s"
    assert gone(reap[0])  # not left running after the timeout


def test_crontab_still_reads_writes_and_says_why_it_failed(project):
    """The capped run keeps what crontab(1) answers: the table written and read back, and its
    own error (exit 1 with "no crontab" is an empty crontab)."""
    install = project.run("cron", "export", "--target", "crontab", "--install", "--json")
    assert install.code == 0 and install.json()["action"] == "installed", install.out
    stand_in(project, 'echo "crontab: your crontab is locked by the admin" >&2; exit 1\n')
    refused = project.run("cron", "export", "--target", "crontab", "--install", "--json")
    assert refused.code != 0
    assert refused.json()["error"]["message"] == "crontab -l failed: crontab: your crontab is locked by the admin"

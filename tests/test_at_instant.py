"""tools/at_instant.py, which `.ci/run` uses to run the quick suite at fixed instants: every
process of the command, and the ones it starts, sees the one moved clock."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import datetime

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime is not installed (.ci/run installs it)")

PRINT_TIMES = ("import subprocess, sys, time; print(time.time()); sys.stdout.flush(); "
               "subprocess.run([sys.executable, '-c', 'import time; print(time.time())'])")


@pytest.mark.real_time
def test_the_command_and_its_children_run_at_the_instant():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "at_instant.py"), "2027-03-28T00:59:00Z", "--tz",
                             "Europe/Berlin", "--", sys.executable, "-c", PRINT_TIMES],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    target = datetime.fromisoformat("2027-03-28T00:59:00+00:00").timestamp()
    parent, child = (float(line) for line in result.stdout.split())
    assert 0 <= parent - target < 30 and 0 <= child - parent < 30  # one clock, running on


def test_an_instant_without_an_offset_is_refused():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "at_instant.py"), "2027-03-28T00:59:00", "--",
                             "true"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "has no offset" in result.stderr

"""The suite is hermetic: what the caller has in its environment changes no test's outcome.

tests/conftest.py's autouse `hermetic` fixture scrubs and pins the environment of every test; this
file checks the fixture, and runs the files whose tests read the environment most in a fresh
pytest under hostile values of every variable sxctl reads (CI runs the whole suite that way)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PINNED, REPO, SCRUBBED_PREFIXES, TEST_KNOBS

# The files whose tests read the environment most (each failed under these values before the
# fixture): the cron verbs and the pass, the views, the session choice, the terminal output.
ENV_READERS = [
    "tests/core/cron/test_cron_store.py",
    "tests/core/cron/test_cron_tick.py",
    "tests/core/cron/test_cron_schedule.py",
    "tests/core/observe/test_observe.py",
    "tests/core/inbox/test_history.py",
    "tests/core/project/test_sessions.py",
    "tests/cli/test_escapes.py",
]

# .ci/run exports these in front of the test-suite run; each names a folder that is not there,
# a session that does not exist, a log cap nothing fits in, a delivery that always fails, a zone
# far from UTC, a terminal too narrow for a table.
HOSTILE = {
    "SXCTL_MAX_LOG_BYTES": "10", "SXCTL_SESSION": "nope", "SXCTL_PROJECT": "/nonexistent",
    "SX_SESSION_DIR": "/nonexistent", "SXCTL_DELIVER_CMD": "false", "SCORPIOX_HOME": "/nonexistent",
    "COMIS_HOME": "/nonexistent", "TZ": "Pacific/Kiritimati", "COLUMNS": "20", "NO_COLOR": "",
    "HOME": "/nonexistent", "SXCTL_WORKSPACE": "/nonexistent", "SXCTL_AGENT": "nope", "SCORPIOX_INBOX": "0",
    "SX_SESSION_ID": "nope", "LC_ALL": "C", "SXCTL_HOST": "../nope",
}

#: read when the module is collected, before any fixture scrubs the environment: .ci/run starts
#: the whole suite under HOSTILE, and then every file already runs the way the slow test below
#: runs a few (it would repeat them, a tenth of the suite's time, for nothing)
SUITE_RUNS_HOSTILE = all(os.environ.get(name) == value for name, value in HOSTILE.items())


def variables_sxctl_reads() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "sxctl").rglob("*.py"):
        found |= set(re.findall(r"\b(?:SXCTL|SX|SCORPIOX|COMIS)_[A-Z_]+\b", path.read_text()))
    return found


def test_every_test_starts_scrubbed_and_pinned(hermetic):
    leaked = sorted(k for k in os.environ if k.startswith(SCRUBBED_PREFIXES) and k not in TEST_KNOBS)
    assert leaked == []
    assert "NO_COLOR" not in os.environ and "FORCE_COLOR" not in os.environ
    assert {k: os.environ[k] for k in PINNED} == PINNED
    assert Path(os.environ["HOME"]) == hermetic and list(hermetic.iterdir()) == []
    assert Path.cwd() != REPO and list(Path.cwd().iterdir()) == []
    assert time.strftime("%z", time.localtime(0)) == "+0000"
    assert Path(shutil.which("crontab") or "").parent == hermetic.parent / "bin"
    assert Path(shutil.which("systemctl") or "").parent == hermetic.parent / "bin"


def test_crontab_and_systemctl_are_stand_ins(project):
    """No test reads or replaces the crontab of the user running the suite, or starts a unit."""
    assert project.run("cron", "export", "--target", "crontab", "--install").code == 0
    table = Path(os.environ["HOME"]).parent / "crontab"
    assert f"cd {project.root}" in table.read_text()
    refused = subprocess.run(["systemctl", "--user", "daemon-reload"], capture_output=True, text=True)
    assert refused.returncode == 1 and "never run the real systemctl" in refused.stderr


def test_the_invoke_fixture_runs_the_cli_in_that_environment(invoke, tmp_path):
    (tmp_path / ".scorpiox").mkdir()
    result = invoke("config", "get", "SCORPIOX_INBOX", "--json", cwd=tmp_path)
    assert result.code == 0 and result.json()["source"] != "env", result.out
    added = invoke("config", "get", "SCORPIOX_INBOX", "--json", cwd=tmp_path, env={"SCORPIOX_INBOX": "0"})
    assert added.json()["source"] == "env"
    assert invoke("config", "get", "SCORPIOX_INBOX").code == 3  # the hermetic working folder is no project


def test_the_suites_own_knobs_are_no_variables_of_sxctl():
    """The scrub keeps TEST_KNOBS (a seed to repeat a run, the model test's size); sxctl must
    never read one, or a knob would leak into what a test sees."""
    assert TEST_KNOBS & variables_sxctl_reads() == set()
    assert HOSTILE.keys() - {"TZ", "COLUMNS", "NO_COLOR", "HOME", "SCORPIOX_HOME", "LC_ALL"} <= variables_sxctl_reads()


def test_every_variable_sxctl_reads_gets_a_hostile_value():
    """The man pages' ENVIRONMENT table names what sxctl reads and what it only sets for the
    programs it runs; each one it reads is exported in CI's hostile run."""
    from sxctl.cli.environment import ENVIRONMENT
    read = {name for name, what in ENVIRONMENT.items() if not what.startswith("Set for")}
    assert read <= HOSTILE.keys()


def test_ci_runs_the_whole_suite_under_the_same_hostile_values():
    ci = (REPO / ".ci" / "run").read_text()
    exported = dict(re.findall(r"\b([A-Z_]+)=(\S*)", ci.split("hostile=(", 1)[1].split(")", 1)[0]))
    assert exported == HOSTILE


@pytest.mark.slow
def test_the_files_that_read_the_environment_pass_under_hostile_values(tmp_path):
    if SUITE_RUNS_HOSTILE:
        pytest.skip("the whole suite runs under the hostile values (.ci/run): these files already did")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SXCTL_STRESS"))}
    env.update(dict.fromkeys(variables_sxctl_reads(), "/nonexistent"))
    env.update(HOSTILE)
    env.update({"FORCE_COLOR": "1", "LC_ALL": "C", "LANG": "C", "XDG_CONFIG_HOME": "/nonexistent",
                "XDG_STATE_HOME": "/nonexistent", "PYTHONPATH": str(REPO)})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--color=no", "-m", "not slow", "--basetemp", str(tmp_path / "basetemp"), *ENV_READERS],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d{2,} passed\b", done.stdout), done.stdout[-2000:]

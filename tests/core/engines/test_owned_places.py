"""One rule for every file sxctl writes where a user points it (engines/outside.py
`refuse_owned_place`): never inside the project's .scorpiox/ or .scheduler/ folders, as the path
reads or where its symlinks lead — `cron tick --log .scheduler/cron-jobs.json` appended log text
to the comis store and stopped the scheduler; a log in an inbox is a message for the agent.
Refused with exit 2 before anything is written, the pass not run."""

from __future__ import annotations

import os
import time

import pytest

from sxctl.clock import FakeClock
from tests.conftest import SID


def _store_state(project) -> tuple[bytes, bool]:
    """The store's bytes and whether a pass left its heartbeat."""
    scheduler = project.root / ".scheduler"
    return (scheduler / "cron-jobs.json").read_bytes(), (scheduler / "sxctl-tick").exists()


@pytest.fixture
def scheduled(project):
    project.session(SID)
    assert project.run("cron", "add", "later", "--every", "1h", "--payload", "heartbeat-event",
                       "--text", "x").code == 0
    return project


def _places(project, tmp_path) -> dict[str, str]:
    inbox = project.root / ".scorpiox" / "sessions" / SID / "inbox"
    linked = tmp_path / "logs"
    linked.symlink_to(project.root / ".scheduler")
    return {"the store": ".scheduler/cron-jobs.json", "a new file of the scheduler": ".scheduler/tick.log",
            "an inbox": str(inbox / "1999999999_000000000.json"), "through a linked folder": str(linked / "tick.log"),
            "the .scheduler folder's own name": str(project.root / "sub" / ".." / ".scheduler" / "x"),
            "in another case (a case-insensitive disk)": ".SCHEDULER/tick.log"}


@pytest.mark.parametrize("flag", ["--log", "--metrics-file"])
def test_a_pass_never_writes_its_log_or_metrics_into_the_agents_or_the_schedulers_folders(scheduled, tmp_path,
                                                                                          flag):
    before = _store_state(scheduled)
    for what, place in _places(scheduled, tmp_path).items():
        result = scheduled.run("cron", "tick", flag, place)
        assert result.code == 2, (what, result.err)
        assert "inside a .scorpiox/ or .scheduler/ folder" in result.err and place in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1, result.err
        assert not (scheduled.root / place).exists() or what == "the store", what
        assert _store_state(scheduled) == before, what  # nothing written, the pass not run
    assert scheduled.run("cron", "list").code == 0


def test_a_tick_log_that_is_another_name_of_the_store_is_refused_not_appended_to(scheduled, tmp_path):
    """A hard link outside the folders is the store itself: appending writes into it."""
    store = scheduled.root / ".scheduler" / "cron-jobs.json"
    alias = tmp_path / "tick.log"
    os.link(store, alias)
    before = _store_state(scheduled)
    result = scheduled.run("cron", "tick", "--log", str(alias))
    assert result.code == 5 and "hard links" in result.err and str(alias) in result.err, result.err
    assert _store_state(scheduled) == before


def test_a_log_outside_the_folders_is_still_written(scheduled, tmp_path):
    log = tmp_path / "state" / "tick.log"
    assert scheduled.run("-q", "cron", "tick", "--dry-run", "--log", str(log)).code == 0
    assert not log.exists()  # newcomer: a --dry-run that printed nothing left an empty file
    #                          (without -q it notes "nothing due": tests/core/cron/test_cron_tick.py)
    later = FakeClock(int(time.time() * 1000) + 2 * 3_600_000)  # the hourly job is due: the pass says what it did
    assert scheduled.run("cron", "tick", "--log", str(log), clock=later).code == 0
    assert log.read_bytes().strip()


@pytest.mark.parametrize("target, option, place", [
    ("crontab", "--crontab-file", ".scheduler/crontab"),
    ("crontab", "--crontab-file", ".scorpiox/crontab"),
    ("systemd", "--unit-dir", ".scheduler/units"),
    ("systemd", "--unit-dir", ".scorpiox/sessions"),
])
@pytest.mark.parametrize("action", ["--install", "--uninstall"])
def test_an_engine_file_is_never_installed_into_the_agents_or_the_schedulers_folders(scheduled, target, option,
                                                                                      place, action):
    listing = sorted(str(p.relative_to(scheduled.root)) for p in scheduled.root.rglob("*"))
    result = scheduled.run("cron", "export", "--target", target, action, option, place)
    assert result.code == 2 and "inside a .scorpiox/ or .scheduler/ folder" in result.err, result.err
    assert sorted(str(p.relative_to(scheduled.root)) for p in scheduled.root.rglob("*")) == listing


def test_an_exported_crontab_line_never_carries_a_log_inside_the_folders(scheduled):
    """The entry's `--log ${XDG_STATE_HOME:-$HOME/.local/state}/sxctl/tick-….log` as sh expands it
    here, after the entry's `cd PROJECT` (a relative XDG_STATE_HOME is the project's)."""
    inside = str(scheduled.root / ".scorpiox" / "state")
    for env in ({"XDG_STATE_HOME": inside}, {"HOME": inside, "XDG_STATE_HOME": ""}, {"XDG_STATE_HOME": ".scheduler"}):
        result = scheduled.run("cron", "export", "--target", "crontab", env=scheduled.env(**env))
        assert result.code == 2 and "the crontab entry's log" in result.err and result.out == "", result.err
        assert "/sxctl/tick-" in result.err, result.err  # the file the entry names
    assert scheduled.run("cron", "export", "--target", "crontab").code == 0

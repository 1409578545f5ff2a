"""A recent heartbeat that is not a live agent here (issue 40, item 10): an agent that died, a
session folder copied with its project. Only sound evidence overrules the 10 s window: a pid
looked up in the process table it belongs to, a `cwd` that exists here and is another project."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from sxctl.clock import FakeClock
from sxctl.project.whose import pid_space
from tests.conftest import SID, now_ms


def rows(project, *args, clock=None) -> dict[str, dict]:
    result = project.run(*args, "session", "list", "--json", clock=clock)
    assert result.code == 0, result.err
    return {row["id"]: row for row in result.json()["sessions"]}


@pytest.mark.slow
def test_an_agent_that_died_or_a_copied_session_is_not_live_though_its_heartbeat_is_recent(
        project, agents, tmp_path):
    agent = agents(project, "--turn-seconds", "0.1")
    os.kill(agent.proc.pid, signal.SIGSTOP)  # its heartbeat stays as it is while the project is copied
    stats = json.loads((agent.dir / "stats.json").read_text())
    within_the_window = FakeClock(stats["updated_ms"] + 2_000)
    copy = tmp_path / "copy"
    shutil.copytree(project.root, copy, symlinks=True)
    os.kill(agent.proc.pid, signal.SIGCONT)

    assert rows(project, clock=within_the_window)[SID]["state"] == "live"
    copied = rows(project, "--project", str(copy), clock=within_the_window)[SID]
    assert copied["state"] == "stale"
    assert copied["stale_reason"] == f"it was written by an agent working in {project.root}"
    sent = project.run("--project", str(copy), "inbox", "send", "hello?", "--json", clock=within_the_window)
    assert sent.code == 0 and sent.json()["session_source"] == "newest"  # not "live": no agent reads the copy
    assert "no agent reads it" in sent.err

    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.proc.wait(timeout=30)
    died = rows(project, clock=within_the_window)[SID]
    assert (died["state"], died["stale_reason"]) == ("stale", f"its agent (pid {agent.proc.pid}) is gone")
    shown = project.run("session", "show", "--json", clock=within_the_window).json()
    assert shown["state"] == "stale" and shown["session_source"] == "newest"
    assert f"state     stale (stats 2.0s old, but its agent (pid {agent.proc.pid}) is gone)" in \
        project.run("session", "show", clock=within_the_window).out
    # a restart into the same session needs neither --force nor 10 s of waiting
    again = agents(project, "--turn-seconds", "0.1")
    assert again.named("started")[0]["pid"] != agent.proc.pid
    assert rows(project)[SID]["state"] == "live"


def _gone_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_sound_evidence_overrules_a_recent_heartbeat(project, tmp_path, worktree_pair):
    wt, _, mirror = worktree_pair  # the main checkout's mirror of a worktree's session: cwd is the worktree
    gone = _gone_pid()
    other = tmp_path / "another-project"
    (other / ".scorpiox").mkdir(parents=True)
    linked = tmp_path / "linked-project"  # its .scorpiox is a link to this project's: the same session folders
    linked.mkdir()
    (linked / ".scorpiox").symlink_to(project.root / ".scorpiox")
    cases = {
        "2026_09_22_dead_here": ({"sxctl": {"pid": gone, "pid_space": pid_space()}}, "stale"),
        "2026_09_22_dead_elsewhere": ({"sxctl": {"pid": gone, "pid_space": "linux:another-host"}}, "live"),
        "2026_09_22_no_space": ({"sxctl": {"pid": gone}}, "live"),
        "2026_09_22_alive_here": ({"sxctl": {"pid": os.getpid(), "pid_space": pid_space()}}, "live"),
        "2026_09_22_other_project": ({"cwd": str(other)}, "stale"),
        "2026_09_22_linked_project": ({"cwd": str(linked)}, "live"),
        "2026_09_22_other_host_path": ({"cwd": "/nonexistent/home/dev/myapp"}, "live"),
        "2026_09_22_below_the_project": ({"cwd": str(project.root / "src")}, "live"),
        "2026_09_22_relative_cwd": ({"cwd": "."}, "live"),
    }
    (project.root / "src").mkdir()
    for sid, (stats, _) in cases.items():
        project.session(sid, stats=stats)
    found = rows(project, clock=FakeClock(now_ms()))
    assert {sid: found[sid]["state"] for sid in cases} == {sid: state for sid, (_, state) in cases.items()}
    assert found["2026_09_22_other_project"]["stale_reason"] == f"it was written by an agent working in {other}"
    assert found[mirror.name]["state"] == "live" and found[mirror.name]["copy"] == "mirror"


@pytest.mark.parametrize("stats", [
    {"cwd": "/x\u0000y"},  # no path holds a NUL: realpath raised ValueError ("internal error", exit 1)
    {"cwd": "/" + "d" * 300},  # too long a name: named as if a file sxctl needed (exit 8)
    {"sxctl": {"pid": 2 ** 31, "pid_space": "HERE"}},  # os.kill raised OverflowError (exit 1)
    {"sxctl": {"pid": 2 ** 70, "pid_space": "HERE"}},
])
def test_a_heartbeat_naming_an_impossible_cwd_or_pid_is_no_evidence_and_no_crash(project, stats):
    """Forged by anyone who can write the session folder: every command that reads sessions
    crashed while the heartbeat was recent. Such a field is no evidence: the session is live."""
    if "sxctl" in stats:
        stats = {"sxctl": {**stats["sxctl"], "pid_space": pid_space()}}
    project.session(stats=stats)
    assert rows(project)[SID]["state"] == "live"
    for args in (("doctor", "--json"), ("status", "--json"), ("cron", "tick", "--json")):
        result = project.run(*args)
        assert result.code in (0, 9) and "internal" not in result.err and result.json(), (args, result.err)
    sent = project.run("inbox", "send", "hello", "--no-wait", "--json")
    assert sent.code == 0 and sent.json()["session"] == SID, sent.err

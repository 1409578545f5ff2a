"""A send or a timer pinned to the session an agent restart left (issue 40, items 2 and 3), with the
reference agent restarted into a new session: refused (exit 4 `session_superseded`, naming the
live session and the fix) or, with `--follow`, delivered there and said so; the CI step of the
scripting guide survives a restart while it waits, and its re-run finds the forwarded message."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SID, tree

pytestmark = pytest.mark.slow

NEW = "2026_09_21_brave_curie"  # the session the agent restarts into (same day: newer)


def pending_message(folder: Path) -> Path:
    """The first message pending in a session's inbox, once a sender (another process) wrote it."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = sorted((folder / "inbox").glob("*.json"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no message appeared in {folder / 'inbox'}")


def killed_while_frozen(agent) -> None:
    """The agent dies (SIGKILL) without reading what was sent while it was frozen (SIGSTOP)."""
    os.kill(agent.proc.pid, signal.SIGKILL)
    agent.proc.wait(timeout=30)


def turns_with(agent, text: str) -> list[dict]:
    return [e for e in list(agent.events) if e["event"] == "turn_start" and e.get("text") == text]


def table_of(folder: Path) -> list[str]:
    doc = json.loads((folder / "callbacks.json").read_text())
    return [slot["message"] for slot in doc["slots"] if slot.get("active")]


def test_a_send_or_a_timer_pinned_to_the_session_a_restart_left_is_refused_or_follows(project, agents):
    old = agents(project, "--turn-seconds", "0.1")
    assert project.run("callbacks", "set", "old tick", "--every", "1h", "--no-verify").code == 0
    first = project.run("inbox", "send", "report", "--key", "report-1", "--wait", "20", "--json")
    assert first.code == 0 and first.json()["state"] == "consumed", first.err
    assert old.stop() == 0  # the agent restarts into a new session
    new = agents(project, "--turn-seconds", "0.1", session=NEW)
    before = tree(old.dir)

    for pin in ({"args": ("--session", SID)}, {"env": {"SXCTL_SESSION": SID}}, {"env": {"SX_SESSION_DIR": str(old.dir)}}):
        env = project.env(**pin.get("env", {}))
        args = pin.get("args", ())
        refused = project.run(*args, "inbox", "send", "hello", "--wait", "10", "--json", env=env)
        assert refused.code == 4, (pin, refused.out, refused.err)
        error = refused.json()["error"]
        assert (error["code"], error["session"], error["live_session"]) == ("session_superseded", SID, NEW)
        human = project.run(*args, "inbox", "send", "hello", env=env)
        [line] = human.err.strip().splitlines()[-1:]
        assert human.code == 4 and line.startswith(f"sxctl: session {SID} is stopped (stats "), human.err
        assert f"a newer session, {NEW}, is live: a message in {SID} would never reach the agent; add --follow " \
               f"to use {NEW} instead, or pin --session {NEW}" in line
        timer = project.run(*args, "callbacks", "set", "tick", "--every", "1m", "--json", env=env)
        assert timer.code == 4 and timer.json()["error"]["code"] == "session_superseded"
        for verb in (("callbacks", "edit", "0", "--every", "2m"), ("callbacks", "resume")):
            result = project.run(*args, *verb, env=env)
            assert result.code == 4 and f"`sxctl callbacks move --from {SID}` carries its timers" in result.err
    assert tree(old.dir) == before  # nothing was written into the session nobody reads
    assert project.run("--session", SID, "inbox", "send", "new text", "--key", "report-2").code == 4
    # a key that names a message already is a duplicate wherever it is pinned: nothing new is written
    again = project.run("--session", SID, "inbox", "send", "report", "--key", "report-1", "--json")
    assert again.code == 0 and (again.json()["duplicate"], again.json()["state"]) == (True, "consumed")
    assert tree(old.dir) == before

    followed = project.run("--session", SID, "inbox", "send", "hello", "--follow", "--wait", "20", "--json")
    assert followed.code == 0, followed.err
    doc = followed.json()
    assert (doc["session"], doc["session_source"], doc["followed_from"], doc["state"]) == (NEW, "follow", SID,
                                                                                        "consumed")
    assert f"session {SID} is stopped and a newer session, {NEW}, is live: a message goes there (--follow)" \
        in followed.err
    assert len(turns_with(new, "hello")) == 1 and turns_with(old, "hello") == []
    timer = project.run("--session", SID, "callbacks", "set", "tick", "--every", "1m", "--follow", "--json",
                        "--no-verify")
    assert timer.code == 0 and (timer.json()["session"], timer.json()["followed_from"]) == (NEW, SID)
    assert table_of(new.dir) == ["tick"] and table_of(old.dir) == ["old tick"]

    assert new.stop() == 0  # no live session at all: the pinned send stands, with its warning
    lone = project.run("--session", SID, "inbox", "send", "for later", "--json")
    assert lone.code == 0 and lone.json()["session"] == SID and lone.json()["state"] == "pending"
    assert f"session {SID} is stopped" in lone.err and "no agent is running" in lone.err


def _ci_step(name: str, **values: str) -> str:
    spec = importlib.util.spec_from_file_location("ci_step", REPO / "tools" / "ci_step.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.step_script(module.GUIDE.read_text(), name, values)


def test_the_guides_ci_step_survives_an_agent_restart_while_it_waits_and_a_rerun_finds_the_message(
        project, agents, tmp_path):
    """docs/guides/scripting.md's GitHub Actions step, run as written: the agent restarts into a new
    session while the step waits (its message unread), and the step still succeeds (--follow);
    run again with the same key, it finds the forwarded message, read once."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sxctl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m sxctl "$@"\n')
    (bin_dir / "sxctl").chmod(0o755)
    env = project.env(GITHUB_WORKSPACE=str(project.root), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    step = _ci_step("Tell the agent about the failure", **{"github.run_id": "7", "github.ref_name": "main"})
    text = "CI run 7 failed on main: read the log and fix it"

    old = agents(project, "--turn-seconds", "0.1")
    os.kill(old.proc.pid, signal.SIGSTOP)  # the agent hangs, then dies: what the step sends waits unread
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", step], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stem = pending_message(old.dir).stem
        killed_while_frozen(old)
        new = agents(project, "--turn-seconds", "0.1", session=NEW)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:  # a step without --follow waits its 10 minutes
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == f"sent {stem} to {NEW} (auto): consumed\n"
    assert f"re-homed {stem} from {SID} to {NEW}" in err
    new.wait_for(lambda e: e["event"] == "turn_start" and e.get("text") == text)

    rerun = subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout == (f"sent {stem} to {NEW} (auto) (duplicate of an earlier send with this key) "
                            f"(forwarded from {SID}): consumed\n")
    assert len(turns_with(new, text)) == 1


def test_a_wait_without_follow_times_out_over_a_restart_and_a_rerun_with_follow_delivers(project, agents):
    """Without --follow a restart mid-wait is exit 6, and so is a plain re-run with the key (the
    message waits in the old session); the re-run with --follow moves it and waits there."""
    step = ("inbox", "send", "--key", "ci-8", "--wait", "3", "ci 8 failed", "--json")
    old = agents(project, "--turn-seconds", "0.1")
    os.kill(old.proc.pid, signal.SIGSTOP)
    proc = subprocess.Popen([sys.executable, "-m", "sxctl", *step], cwd=project.root, env=project.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stem = pending_message(old.dir).stem
    killed_while_frozen(old)
    new = agents(project, "--turn-seconds", "0.1", session=NEW)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 6 and json.loads(out)["session"] == SID, err
    plain = project.run(*step)
    assert plain.code == 6 and plain.json()["stranded"] is True and plain.json()["session"] == SID
    rescued = project.run("inbox", "send", "--key", "ci-8", "--wait", "60", "--follow", "ci 8 failed", "--json")
    assert rescued.code == 0, rescued.err
    assert (rescued.json()["session"], rescued.json()["stem"], rescued.json()["state"]) == (NEW, stem, "consumed")
    assert len(turns_with(new, "ci 8 failed")) == 1


@pytest.mark.parametrize("damaged", ['{"updated_ms":1,"updated_ms":2}', "{}", '{"updated_ms": 17', ""])
def test_a_pinned_session_whose_stats_json_is_damaged_is_refused_while_a_newer_one_is_live(project, damaged):
    """An unreadable stats.json (state unknown) was written by an agent once: a send pinned there
    was reported sent ("ok": true, pending in the old session) while the agent read the new one."""
    old = project.session(SID)
    (old / "stats.json").write_text(damaged)
    project.session(NEW)
    for run in (project.run, project.process):  # in-process, and the plain send's own path
        refused = run("--session", SID, "inbox", "send", "hi", "--no-wait", "--json")
        assert refused.code == 4 and refused.json()["error"]["code"] == "session_superseded", refused.out
    assert not list((old / "inbox").glob("*.json")) if (old / "inbox").is_dir() else True
    followed = project.run("--session", SID, "inbox", "send", "hi", "--no-wait", "--follow", "--json")
    assert followed.code == 0 and followed.json()["session"] == NEW


def test_every_view_of_a_pinned_session_the_agent_left_says_where_it_works_now(project):
    """`status`, `next`, `callbacks list` of a session pinned by SXCTL_SESSION after a restart
    showed its empty timers and a stopped agent, with no word of the live session."""
    project.session(SID, live=False)
    project.session(NEW)
    env = project.env(SXCTL_SESSION=SID)
    for args in (("status",), ("next",), ("callbacks", "list"), ("inbox", "list")):
        result = project.run(*args, env=env)
        assert result.code == 0, (args, result.err)
        assert f"the agent works in a newer session, {NEW}" in result.err, (args, result.err)
    live = project.run("status", env=project.env())
    assert "newer session" not in live.err


def test_publishing_the_table_of_a_pinned_session_the_agent_left_is_refused(project):
    """`callbacks publish` there said "Published" (and "no agent is running") for a table no
    agent reads, while `callbacks set` refused: it makes timers fire, so it is refused too."""
    old = project.session(SID)
    assert project.run("callbacks", "set", "tick", "--every", "1h", "--no-verify").code == 0
    project.session(SID, live=False)
    project.session(NEW)
    before = tree(old)
    refused = project.run("--session", SID, "callbacks", "publish", "--json")
    assert refused.code == 4 and refused.json()["error"]["code"] == "session_superseded", refused.out
    assert f"`sxctl callbacks move --from {SID}` carries its timers" in refused.json()["error"]["message"]
    assert tree(old) == before

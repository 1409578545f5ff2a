"""Stopped is not rotated, and a restart strands what was sent while the agent was down (issue 24,
items 2 and 3): a cleanly stopped agent's session is `stopped`; a non-live session holding pending
messages or active timers while another session is live is *stranded*, and `status`, `doctor`,
`next` and `watch --json` name it, with its counts and the commands that fix it; two live agents
in one project are a warning that says which one is used and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import follow_json, now_ms

OLD = "2026_09_21_quiet_euler"
NEW = "2026_09_22_brave_curie"
FORWARD = f"sxctl inbox forward --from {OLD}"
MOVE = f"sxctl callbacks move --from {OLD}"


def _timer(folder, message="remind me", *, active=True, slot=0):
    """A callbacks.json with one slot (callbacks.md §1)."""
    table = {"rev": 3, "updated_ms": now_ms(), "paused": False,
             "slots": [{"id": slot, "active": active, "message": message, "delay_ms": 600_000,
                        "repeat_count": 5, "fire_at_ms": now_ms() + 600_000}]}
    (folder / "callbacks.json").write_text(json.dumps(table))


def _pending(folder, *texts):
    (folder / "inbox").mkdir(exist_ok=True)
    for n, text in enumerate(texts):
        (folder / "inbox" / f"{1789972202 + n}_000000000.json").write_text(json.dumps({"text": text}))


def _stopped(project, session_id=OLD, age_ms=3_000):
    return project.session(session_id, age_ms=age_ms, stats={"sxctl": {"agent": "reference", "stopped": True}})


# --- stopped is a state of its own (fast: the stats the reference agent writes on a clean stop) ----

def test_a_session_whose_agent_stopped_cleanly_is_stopped_everywhere(project):
    _stopped(project)
    which = project.run("session", "which", "--json")
    assert which.code == 0 and which.json()["state"] == "stopped"
    assert [row["state"] for row in project.run("session", "list", "--json").json()["sessions"]] == ["stopped"]
    assert project.run("session", "list").out.splitlines()[1].split()[:2] == [OLD, "stopped"]
    assert "state     stopped (stats " in project.run("session", "show").out
    status = project.run("status", "--json").json()
    assert status["liveness"]["state"] == "stopped"
    human = project.run("status")
    assert f"session  {OLD}  stopped (stats " in human.out and "rotated" not in human.out
    project.session(OLD, live=False)  # no marker: crashed, frozen or rotated, as before
    assert project.run("session", "which", "--json").json()["state"] == "stale"
    sent = project.run("inbox", "send", "hello")
    assert "is stale (stats" in sent.err and "may have rotated" in sent.err


def test_a_send_to_a_stopped_session_warns_no_agent_is_running(project):
    _stopped(project)
    sent = project.run("inbox", "send", "are you there?")
    assert sent.code == 0 and "written, not yet consumed" in sent.out
    assert f"sxctl: warning: session {OLD} is stopped (stats " in sent.err
    assert "no agent is running" in sent.err and "rotated" not in sent.err
    timer = project.run("cb", "set", "later", "--every", "1m")
    assert timer.code == 0 and "no agent is running" in timer.err and "rotated" not in timer.err
    problems = project.run("status", "--json").json()["problems"]
    assert [p["code"] for p in problems] == ["stopped_session_with_pending"]
    assert problems[0]["message"] == f"session {OLD} is stopped: no agent is running, and 1 message(s) wait in it"


# --- stranded: the one definition, seen by every view (fast) --------------------------------------

@pytest.fixture
def stranded(project):
    """OLD stopped with two pending messages and an active timer; NEW live with nothing."""
    old = _stopped(project, age_ms=60_000)
    _pending(old, "first while down", "second while down")
    _timer(old, "poll the deploy")
    project.session(NEW)
    return old


def test_status_names_the_stranded_session_its_counts_and_the_fix(project, stranded):
    doc = project.run("status", "--json").json()
    assert doc["session"] == NEW and doc["liveness"]["state"] == "live"
    [entry] = doc["stranded"]
    assert entry == {"session": OLD, "state": "stopped", "pending": 2, "timers": 1, "live": NEW,
                     "fix": [FORWARD, MOVE],
                     "message": f"session {OLD} (stopped) holds 2 pending message(s) and 1 active timer(s) that "
                                f"no agent will read: the agent now runs in {NEW}"}
    [problem] = [p for p in doc["problems"] if p["code"] == "stranded_session"]
    assert problem["session"] == OLD and problem["fix"] == [FORWARD, MOVE]
    assert FORWARD in problem["message"] and MOVE in problem["message"]
    human = project.run("status").out
    assert f"session {OLD} (stopped) holds 2 pending message(s) and 1 active timer(s)" in human
    assert f"`{FORWARD}`" in human and f"`{MOVE}`" in human
    # the old session named explicitly: the same problem, once (not also "stale with pending")
    pinned = project.run("--session", OLD, "status", "--json").json()
    assert [p["code"] for p in pinned["problems"]] == ["stranded_session"]


def test_doctor_fails_on_stranded_messages_and_warns_on_stranded_timers_only(project, stranded):
    result = project.run("doctor", "--json")
    assert result.code == 9
    doc = json.loads(result.out)
    [check] = [c for c in doc["checks"] if c["check"] == "stranded"]
    assert check["status"] == "fail" and check["fix"] == f"{FORWARD} && {MOVE}"
    assert f"session {OLD} (stopped) holds 2 pending message(s)" in check["message"]
    human = project.run("doctor")
    assert "FAIL  stranded" in human.out and f"fix: {FORWARD} && {MOVE}" in human.out
    for message in (stranded / "inbox").glob("*.json"):
        message.unlink()  # forwarded: only the timer is left
    [check] = [c for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "stranded"]
    assert check["status"] == "warn" and check["fix"] == MOVE
    assert f"session {OLD} (stopped) holds 1 active timer(s)" in check["message"]


def test_next_names_what_it_will_not_show(project, stranded):
    doc = project.run("next", "--json").json()
    assert doc["session"] == NEW and doc["rows"] == []
    assert [(s["session"], s["pending"], s["timers"], s["fix"]) for s in doc["stranded"]] == [
        (OLD, 2, 1, [FORWARD, MOVE])]
    human = project.run("next").out
    assert "nothing scheduled" in human
    assert f"stranded  session {OLD} (stopped) holds 2 pending message(s)" in human and FORWARD in human


def test_inbox_list_of_the_live_session_says_what_waits_in_the_one_the_agent_left(project, stranded):
    """Newcomer: after a restart `inbox list` said "no pending messages" while the messages sent
    during it waited in the old session (status and doctor said so; the inbox view hid it)."""
    listed = project.run("inbox", "list")
    assert listed.code == 0 and listed.out == "no pending messages\n"
    assert f"sxctl: warning: 2 pending message(s) wait in session {OLD}, which the agent left: `{FORWARD}` " \
           "moves them here" in listed.err
    doc = project.run("inbox", "list", "--json").json()
    assert doc["messages"] == [] and [(s["session"], s["pending"], s["fix"][0]) for s in doc["stranded"]] == [
        (OLD, 2, FORWARD)]  # in the document too (a monitor with -q reads no warning)
    assert "wait in session" not in project.run("--session", OLD, "inbox", "list").err  # it lists them itself


def test_watch_json_emits_a_stranded_event(project, stranded):
    result = project.run("watch", "--json", "--duration", "0.5")
    events = [json.loads(line) for line in result.out.splitlines()]
    assert events[0]["event"] == "watching" and events[0]["session"] == NEW
    [event] = [e for e in events if e["event"] == "stranded"]
    assert (event["session"], event["state"], event["pending"], event["timers"], event["live"], event["fix"]) == (
        OLD, "stopped", 2, 1, NEW, [FORWARD, MOVE])


def test_what_is_not_stranded(project):
    """No live session (nobody could read it anywhere), a timer the rotation carried over, an
    empty old session, a second live session: none of these is stranded."""
    old = project.session(OLD, live=False)
    _pending(old, "waits")
    assert project.run("status", "--json").json()["stranded"] == []  # nothing is live
    _timer(old, "carried over")
    new = project.session(NEW)
    _timer(new, "carried over", active=False)  # the rotation copied the table; it retired since
    (old / "inbox" / "1789972202_000000000.json").unlink()
    doc = project.run("status", "--json").json()
    assert doc["stranded"] == [] and "stranded_session" not in [p["code"] for p in doc["problems"]]
    assert [c["status"] for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "stranded"] == [
        "ok"]


def test_the_stranded_definition_is_one_function(project, stranded):
    from sxctl.observe import Stranded, stranded_sessions

    [one] = stranded_sessions(project.root)
    assert (one.id, one.pending, one.timers, one.live, one.fixes()) == (OLD, 2, 1, NEW, [FORWARD, MOVE])
    # an id may start with '-' (sessions.md §4): joined with '=', it cannot be read as an option
    assert Stranded("-odd", "stale", 1, 0, NEW).fixes() == ["sxctl inbox forward --from=-odd"]


def test_sx_session_dir_naming_a_stopped_session_says_so_not_rotated(project, stranded):
    result = project.run("session", "which", env=project.env(SX_SESSION_DIR=str(stranded)))
    assert result.out == f"{OLD}\n"  # the agent's own variable still wins (sessions.md §3 rule 3)
    assert f"session {OLD} (from SX_SESSION_DIR) is stopped (stats " in result.err
    assert f"but {NEW} is live; the agent stopped; another runs there" in result.err
    assert "rotated" not in result.err


# --- two live agents (fast) -----------------------------------------------------------------------

def test_two_live_sessions_warn_and_say_which_is_used_and_why(project):
    from sxctl.clock import FakeClock

    project.session(OLD, age_ms=2_000)
    project.session(NEW, age_ms=0)
    clock = FakeClock(now_ms())  # the same ages in every command's text
    result = project.run("session", "which", "--json", clock=clock)
    assert result.json()["session"] == NEW
    warning = (f"sxctl: warning: 2 agents are live in this project: using {NEW} (the freshest: stats ")
    assert warning in result.err and f"also live: {OLD} (stats " in result.err
    [text] = result.json()["warnings"]
    assert text.startswith(f"2 agents are live in this project: using {NEW}")
    assert project.run("-q", "session", "which").err == ""
    assert project.run("--session", OLD, "session", "which").err == ""  # pinned: nothing to choose
    status = project.run("status", "--json", clock=clock).json()
    [problem] = [p for p in status["problems"] if p["code"] == "several_live_sessions"]
    assert problem["sessions"] == [NEW, OLD] and problem["message"] == text
    [agent] = [c for c in project.run("doctor", "--json", clock=clock).json()["checks"] if c["check"] == "agent"]
    assert agent["status"] == "warn" and agent["message"] == text and "--session" in agent["fix"]


# --- end to end with the reference agent -----------------------------------------------------------

@pytest.mark.slow
def test_sigterm_leaves_a_stopped_session_and_sends_say_no_agent_is_running(project):
    from tests.conftest import Agent

    agent = Agent(project, "--turn-seconds", "0.1", session=OLD)
    assert agent.stop() == 0
    which = project.run("session", "which", "--json")
    assert which.json()["session"] == OLD and which.json()["state"] == "stopped"
    assert project.run("session", "list", "--json").json()["sessions"][0]["state"] == "stopped"
    status = project.run("status")
    assert f"{OLD}  stopped" in status.out and "rotated" not in status.out
    sent = project.run("inbox", "send", "anyone?")
    assert "no agent is running" in sent.err and "rotated" not in sent.err
    assert project.run("status", "--json").json()["problems"][0]["code"] == "stopped_session_with_pending"


@pytest.mark.slow
def test_a_restart_strands_what_was_sent_while_the_agent_was_down(project):
    from tests.conftest import Agent

    first = Agent(project, "--turn-seconds", "0.1", session=OLD)
    assert first.stop() == 0
    assert project.run("inbox", "send", "sent while down").code == 0
    assert project.run("inbox", "send", "also sent while down", "--wait", "0.2").code == 6
    assert project.run("cb", "set", "poll the deploy", "--every", "10m").code == 0
    second = Agent(project, "--turn-seconds", "0.1", session=NEW)
    watcher = subprocess.Popen([sys.executable, "-m", "sxctl", "watch", "--json", "--duration", "3"],
                               cwd=project.root, env=project.env(), stdout=subprocess.PIPE, text=True)
    try:
        status = project.run("status", "--json").json()
        assert status["session"] == NEW
        [entry] = status["stranded"]
        assert (entry["session"], entry["state"], entry["pending"], entry["timers"], entry["fix"]) == (
            OLD, "stopped", 2, 1, [FORWARD, MOVE])
        assert FORWARD in project.run("status").out
        doctor = project.run("doctor", "--json")
        assert doctor.code == 9
        [check] = [c for c in doctor.json()["checks"] if c["check"] == "stranded"]
        assert check["status"] == "fail" and OLD in check["message"] and "2 pending" in check["message"]
        assert check["fix"].startswith(FORWARD)
        upcoming = project.run("next", "--json").json()
        assert [(s["session"], s["pending"], s["timers"]) for s in upcoming["stranded"]] == [(OLD, 2, 1)]
        assert FORWARD in project.run("next").out
        out, _ = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        second.stop()
    events = [json.loads(line) for line in out.splitlines()]
    [event] = [e for e in events if e["event"] == "stranded"]
    assert (event["session"], event["pending"], event["timers"], event["live"], event["fix"]) == (
        OLD, 2, 1, NEW, [FORWARD, MOVE])


@pytest.mark.slow
def test_two_live_reference_agents_in_one_project_are_a_warning(project):
    from tests.conftest import Agent

    agents = [Agent(project, "--turn-seconds", "0.1", session=OLD),
              Agent(project, "--turn-seconds", "0.1", session=NEW)]
    try:
        result = project.run("session", "which", "--json")
        chosen = result.json()["session"]
        other = NEW if chosen == OLD else OLD
        assert f"2 agents are live in this project: using {chosen} (the freshest: stats " in result.err
        assert f"also live: {other}" in result.err
        assert result.json()["warnings"] and chosen in result.json()["warnings"][0]
        sent = project.run("inbox", "send", "which one?", "--no-wait")
        assert "2 agents are live in this project" in sent.err
        codes = [p["code"] for p in project.run("status", "--json").json()["problems"]]
        assert "several_live_sessions" in codes
    finally:
        for agent in agents:
            agent.stop()


def test_watch_follows_a_restart_and_then_names_what_stayed_behind(project):
    """The watched session stops, an agent starts in a new one: the `session` event, then a
    `stranded` event for the messages left in the old session."""
    old = project.session(OLD)
    _pending(old, "left behind")
    watcher, events = follow_json(project, "watch", "--json", "--duration", "6")
    try:
        assert events and events[0]["event"] == "watching" and events[0]["session"] == OLD
        _stopped(project, age_ms=0)
        project.session(NEW)
        deadline = time.monotonic() + 20
        while not any(e["event"] == "stranded" for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
            project.session(NEW)  # keep it live
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    followed = next(i for i, e in enumerate(events) if e["event"] == "session" and e.get("to") == NEW)
    stranded_at = next(i for i, e in enumerate(events) if e["event"] == "stranded")
    assert followed < stranded_at and events[stranded_at]["session"] == OLD
    assert events[stranded_at]["pending"] == 1 and events[stranded_at]["fix"] == [FORWARD]


def test_an_old_session_whose_inbox_cannot_be_listed_does_not_break_the_views(project, stranded):
    """An archived session whose inbox cannot be listed (here a symlink loop: ELOOP, whoever runs
    the test): status, next and doctor still answer, and the session that can be read is named."""
    other = _stopped(project, "2026_09_20_cool_newton")
    (other / "inbox").symlink_to(other / "inbox")
    doc = project.run("status", "--json").json()
    assert [(s["session"], s["pending"]) for s in doc["stranded"]] == [(OLD, 2)]
    assert [s["session"] for s in project.run("next", "--json").json()["stranded"]] == [OLD]
    assert project.run("doctor", "--json").code == 9  # the stranded messages, not a crash


def test_what_an_agent_would_skip_is_not_a_stranded_message(project):
    """A FIFO, a folder or a symbolic link named like a message is not taken by any agent (nor
    listed as a message by `inbox list`): it does not fail doctor as stranded."""
    old = project.session(OLD, live=False)
    inbox = old / "inbox"
    inbox.mkdir(exist_ok=True)
    os.mkfifo(inbox / "1789972201_000000000.json")
    (inbox / "1789972202_000000000.json").mkdir()
    (inbox / "1789972203_000000000.json").symlink_to("/tmp")
    project.session(NEW)
    assert project.run("status", "--json").json()["stranded"] == []
    [check] = [c for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "stranded"]
    assert check["status"] == "ok", check


def test_thousands_of_stranded_sessions_are_one_problem_not_thousands_of_checks(project):
    for n in range(30):
        _pending(project.session(f"2026_11_{10 + n % 18:02d}_old_{n}", live=False), "x")
    project.session(NEW)
    result = project.run("doctor", "--json")
    stranded = [c for c in result.json()["checks"] if c["check"] == "stranded"]
    assert len(stranded) == 5 and "26 more sessions hold 26 pending message(s)" in stranded[-1]["message"]
    assert result.json()["error"]["message"].startswith("1 check(s) failed: stranded"), result.out

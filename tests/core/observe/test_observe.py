"""`sxctl status`, `sxctl next` and `sxctl watch` (JSON stream and the live view in a pty)."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time

import pytest

from sxctl.clock import FakeClock
from tests.conftest import EXAMPLES, example_table, follow_json

NOW = 1_789_974_090_000
SID = "2026_09_21_quiet_euler"


@pytest.fixture
def prepared(project):
    """All three surfaces from the examples: a live session with timers and two pending messages,
    and the workspace's cron store and ledger."""
    folder = project.root / ".scorpiox" / "sessions" / SID
    (folder / "inbox").mkdir(parents=True)
    example_table(folder / "callbacks.json")
    shutil.copy(EXAMPLES / "stats.json", folder / "stats.json")
    for message in (EXAMPLES / "inbox").iterdir():
        shutil.copy(message, folder / "inbox" / message.name)
    (project.root / ".scheduler").mkdir()
    for name in ("cron-jobs.json", "cron-executions.jsonl"):
        shutil.copy(EXAMPLES / name, project.root / ".scheduler" / name)
    return folder


def invoke(project, *args):
    result = project.run(*args, clock=FakeClock(NOW))
    assert result.code == 0, result.err
    return result.json()


def test_status_counts_every_surface(project, prepared):
    doc = invoke(project, "status", "--json")
    assert doc["session"] == SID and doc["liveness"] == {"state": "live", "updated_ms": NOW, "stats_age_ms": 0}
    assert doc["timers"] == {"file_exists": True, "rev": 12, "active": 2, "capacity": 8, "paused": False,
                             "next_fire_ms": 1789974102000, "unpublished_edit": None}
    assert doc["inbox"]["pending"] == 2 and doc["inbox"]["consumed_last_hour"] == 0
    cron = doc["cron"]
    assert cron["jobs_by_state"] == {"scheduled": 2, "done": 1, "paused:operator": 1}
    assert cron["active_claims"] == 0 and cron["next_due_ms"] == 1789975800000
    assert [(r["name"], r["status"]) for r in cron["last_runs"]] == [
        ("next-check-in", "unknown"), ("next-check-in", "dispatched"), ("stretch-reminder", "completed")]
    assert [r["executionId"] for r in cron["unknown_runs"]] == ["8a61f0d2-94c3-4b7e-a5d8-2e6f1c0b7a94"]
    assert [p["code"] for p in doc["problems"]] == ["cron_unknown_run"]


def test_status_problems(project, prepared):
    stats = json.loads((prepared / "stats.json").read_text())
    stats["updated_ms"] = NOW - 3_600_000
    (prepared / "stats.json").write_text(json.dumps(stats))
    (prepared / "callbacks.json").write_text('{"slots": "nope"}')
    store = json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())
    store["jobs"][0]["lifecycle"]["nextRunAtMs"] = NOW - 600_000
    (project.root / ".scheduler" / "cron-jobs.json").write_text(json.dumps(store, separators=(",", ":")) + "\n")
    codes = [p["code"] for p in invoke(project, "--session", SID, "status", "--json")["problems"]]
    # the overdue job sends to the live session and none is live: it waits for the agent (an
    # overdue job with a live agent is `cron_overdue`: tests/core/cron/test_scheduling.py)
    assert codes == ["stale_session_with_pending", "timer_table_unreadable", "cron_waiting_for_agent",
                     "cron_unknown_run"]


def test_status_prints_a_few_problems_of_a_kind_and_counts_the_rest(project):
    """Twelve due jobs and no live agent: `status` printed twelve `waits for a live agent` lines
    (a thousand for a thousand jobs); it prints five, and how many more `--json` lists."""
    folder = project.root / ".scorpiox" / "sessions" / SID
    (folder / "inbox").mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": NOW - 3_600_000, "model": "m"}))
    for n in range(12):
        assert project.run("cron", "add", f"due{n}", "--in", "1m", "--payload", "heartbeat-event", "--text", "x",
                           clock=FakeClock(NOW - 120_000)).code == 0
    shown = project.run("--session", SID, "status", clock=FakeClock(NOW))
    lines = [line for line in shown.out.splitlines() if "waits for a live agent" in line]
    assert len(lines) == 5, shown.out
    assert "problem  … and 7 more cron_waiting_for_agent (`sxctl status --json` lists every one)" in shown.out
    codes = [p["code"] for p in invoke(project, "--session", SID, "status", "--json")["problems"]]
    assert codes.count("cron_waiting_for_agent") == 12


def test_next_merges_the_three_sources_in_time_order(project, prepared):
    doc = invoke(project, "next", "-n", "9", "--json")
    rows = [(r["source"], r["at_ms"], r.get("stem") or r.get("slot") if r["source"] != "cron" else r["name"])
            for r in doc["rows"]]
    assert rows == [
        ("cron", 1789971300000, "ci-watch"),  # paused: shown once, at its frozen time
        ("inbox", NOW, "03_1789974090_125000000"),  # read at the next poll, in name order
        ("inbox", NOW, "1789972202_061734902"),
        ("callback", 1789974102000, 0), ("callback", 1789974132000, 0), ("callback", 1789974150000, 3),
        ("callback", 1789974162000, 0), ("callback", 1789974192000, 0), ("callback", 1789974210000, 3),
    ]
    assert doc["rows"][0]["paused"] is True and doc["rows"][3]["idle_only"] is True
    later = invoke(project, "next", "-n", "40", "--json")["rows"]
    assert [r["at_ms"] for r in later] == sorted(r["at_ms"] for r in later) and len(later) == 40
    (prepared / "callbacks.json").unlink()
    without_timers = invoke(project, "next", "-n", "5", "--json")["rows"]
    assert [(r["source"], r.get("name")) for r in without_timers] == [
        ("cron", "ci-watch"), ("inbox", None), ("inbox", None), ("cron", "next-check-in"), ("cron", "next-check-in")]


def test_next_in_a_project_with_jobs_but_no_session_yet_lists_the_cron_fires(project):
    """#40: `next` was exit 3 "no sessions" where `status` and `cron next` worked."""
    added = project.run("cron", "add", "beat", "--every", "1h", "--anchor", "2026-09-21T09:00Z", "--payload",
                        "heartbeat-event", "--text", "t", clock=FakeClock(NOW))
    assert added.code == 0, added.err
    result = project.run("next", "-n", "2", clock=FakeClock(NOW))
    assert result.code == 0, result.err
    assert [line.split()[:2] for line in result.out.splitlines()[1:]] == [["2026-09-21", "09:00:00"],
                                                                         ["2026-09-21", "10:00:00"]]
    assert "no session folder yet" in result.err
    doc = project.run("next", "-n", "2", "--json", clock=FakeClock(NOW)).json()
    assert (doc["session"], doc["stranded"]) == (None, [])
    assert [(r["source"], r["name"]) for r in doc["rows"]] == [("cron", "beat"), ("cron", "beat")]
    assert project.run("next", "--session", SID, clock=FakeClock(NOW)).code == 3  # a named session must exist


@pytest.mark.slow
def test_watch_json_follows_the_agent(project):
    from tests.conftest import Agent

    agent = Agent(project, "--turn-seconds", "0.1")
    watcher, events = follow_json(project, "--session", SID, "watch", "--json", "--duration", "12", first_within=10)
    try:
        assert events and events[0]["event"] == "watching" and events[0]["mode"] in ("inotify", "polling")
        stem = project.run("inbox", "send", "watched message", "--wait", "10", "--json").json()["stem"]
        assert project.run("cb", "set", "watched timer", "--every", "1", "--repeat", "1", "--first-in", "1").code == 0
        agent.wait_for(lambda e: e["event"] == "callback_fired", timeout=10)
        project.run("cron", "add", "watched", "--in", "60", "--payload", "heartbeat-event", "--text", "w")
        store_path = project.root / ".scheduler" / "cron-jobs.json"
        store = json.loads(store_path.read_text())
        store["jobs"][0]["schedule"]["atMs"] = store["jobs"][0]["lifecycle"]["nextRunAtMs"] = NOW
        store_path.write_text(json.dumps(store, separators=(",", ":")) + "\n")
        assert project.run("cron", "tick").code == 0
        deadline = time.monotonic() + 10
        while not any(e["event"] == "cron_run" and e["status"] == "dispatched" for e in events) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
        agent.stop()
    kinds = [(e["event"], e.get("stem") or e.get("slot") or e.get("status")) for e in events]
    assert ("inbox_consumed", stem) in kinds, kinds
    if ("inbox_pending", stem) in kinds:  # a polling watch can miss a message the agent reads within a poll
        assert kinds.index(("inbox_pending", stem)) < kinds.index(("inbox_consumed", stem))
    set_at = next(i for i, e in enumerate(events) if e["event"] == "timer_set" and e["slot"] == 0)
    fired_at = next(i for i, e in enumerate(events) if e["event"] == "timer_fired" and e["slot"] == 0)
    assert set_at < fired_at and events[fired_at]["retired"] is True
    assert any(e["event"] == "cron_run" and e["status"] == "dispatched" and e["name"] == "watched" for e in events)
    assert all(isinstance(e["ts_ms"], int) for e in events)


@pytest.mark.slow
@pytest.mark.parametrize("quit_with", ["q", "ctrl-c"])
def test_live_view_in_a_terminal_exits_cleanly(project, quit_with):
    pexpect = pytest.importorskip("pexpect")
    project.session(SID)
    env = {**project.env(), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    env.pop("NO_COLOR", None)
    import io

    screen = io.BytesIO()
    # A terminal user's Ctrl-C: the test runner may have been started in the background by a
    # non-interactive shell, which hands SIGINT down as ignored (POSIX); a terminal does not.
    child = pexpect.spawn(sys.executable, ["-m", "sxctl", "watch"], cwd=str(project.root), env=env,
                          dimensions=(30, 100), timeout=20,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    child.logfile_read = screen
    child.expect("sxctl watch")
    child.expect("press q to quit")
    if quit_with == "q":
        child.send("q")
    else:
        child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    output = screen.getvalue()
    assert b"Traceback" not in output
    entered, left = output.find(b"\x1b[?1049h"), output.rfind(b"\x1b[?1049l")
    assert 0 <= entered < left  # the full-screen view used the alternate screen and left it
    assert b"\x1b[?25h" in output[left - 20:]  # and the cursor is shown again


@pytest.mark.slow
def test_watch_json_follows_an_agent_restart_into_its_new_session(project):
    from tests.conftest import Agent

    first = Agent(project, "--turn-seconds", "0.1")
    watcher, events = follow_json(project, "watch", "--json", "--duration", "30")
    second = None
    try:
        assert events[0]["event"] == "watching" and events[0]["session"] == SID
        assert first.stop() == 0
        second = Agent(project, "--turn-seconds", "0.1", session="2026_09_22_brave_curie")
        deadline = time.monotonic() + 20
        while not any(e["event"] == "session" and "to" in e for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        stem = project.run("--session", "2026_09_22_brave_curie", "inbox", "send", "after the restart", "--wait", "10",
                           "--json").json()["stem"]
        deadline = time.monotonic() + 20
        while not any(e["event"] == "inbox_consumed" and e.get("stem") == stem for e in events) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
        if second is not None:
            second.stop()
    rotated = next(i for i, e in enumerate(events) if e["event"] == "session" and "to" in e)
    assert events[rotated]["from"] == SID and events[rotated]["to"] == "2026_09_22_brave_curie"
    consumed = next(i for i, e in enumerate(events) if e["event"] == "inbox_consumed" and e.get("stem") == stem)
    assert rotated < consumed


def test_the_change_waiter_watches_folders_created_after_it_started(tmp_path):
    from sxctl.observe import ChangeWaiter

    later = tmp_path / "done"
    waiter = ChangeWaiter([tmp_path, later])
    try:
        assert waiter.mode == "inotify" and waiter.unwatched == [str(later)]
        later.mkdir()
        waiter.wait(0)  # retries the folder that was missing
        assert waiter.unwatched == []
        (later / "m.json").write_text("{}")
        started = time.monotonic()
        waiter.wait(30)  # woken by the event, not the timeout
        assert time.monotonic() - started < 10
    finally:
        waiter.close()


def test_a_cron_run_event_names_its_job():
    from sxctl.observe.watching import Snapshot, diff

    old = Snapshot(runs={"e1": ("started", "j1")}, job_names={"j1": "nightly"})
    new = Snapshot(runs={"e1": ("completed", "j1"), "e2": ("started", "gone")}, job_names={"j1": "nightly"})
    runs = [e for e in diff(old, new, 5) if e["event"] == "cron_run"]
    assert [(e["executionId"], e["status"], e["jobId"], e["name"]) for e in runs] == [
        ("e1", "completed", "j1", "nightly"), ("e2", "started", "gone", None)]


def test_watch_into_a_pipe_streams_json_lines_without_json(project):
    """`watch` whose output is not a terminal (CliRunner's is not) prints the same JSON Lines as
    `watch --json`, one event a line, as its help says."""
    project.session(SID, live=True)
    piped = project.run("--session", SID, "watch", "--duration", "0.2")
    assert piped.code == 0
    events = [json.loads(line) for line in piped.out.splitlines()]
    assert events[0]["event"] == "watching" and events[0]["session"] == SID
    assert "standard output is not a terminal" in " ".join(project.run("watch", "--help").out.split())

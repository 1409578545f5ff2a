"""The reference agent end to end, as a subprocess, observed through its --json events."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.conftest import SID, now_ms

pytestmark = pytest.mark.slow

def eventually(read, accept, timeout=20.0):
    """What `read()` returns once `accept` holds for it (polled): for files the agent writes
    after the event that announces the change."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if accept(value) or time.monotonic() >= deadline:
            return value
        time.sleep(0.02)


def read_json(path):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def test_a_message_becomes_a_turn_and_stats_are_written(project, agents):
    agent = agents(project, "--turn-seconds", "0.2")
    result = project.run("inbox", "send", "hello agent", "--wait", "10", "--json")
    assert result.code == 0 and result.json()["consumed"] is True
    [turn] = agent.wait_for(lambda e: e["event"] == "turn_start")
    assert (turn["source"], turn["ref"], turn["mode"], turn["text"]) == ("inbox", result.json()["stem"], "auto",
                                                                       "hello agent")
    agent.wait_for(lambda e: e["event"] == "turn_end")
    stats = eventually(lambda: read_json(agent.dir / "stats.json"), lambda s: s and s["sxctl"]["turns"] >= 1)
    assert stats["model"] == "sxctl-reference" and stats["sxctl"]["turns"] >= 1
    assert abs(stats["updated_ms"] - now_ms()) < 5000
    assert (agent.dir / "callbacks.json").exists()
    assert agent.stop() == 0
    assert agent.named("stopping")[0]["signal"] == "SIGTERM" and agent.named("stopped")[0]["turns"] == 1


def test_interrupt_is_delivered_at_a_boundary_and_queue_joined_into_one_follow_up(project, agents):
    agent = agents(project, "--turn-seconds", "2")
    project.run("inbox", "send", "long task", "--no-wait")
    agent.wait_for(lambda e: e["event"] == "turn_start")
    project.run("inbox", "send", "stop and look at this", "--mode", "interrupt", "--no-wait")
    project.run("inbox", "send", "~first note", "--no-wait")
    project.run("inbox", "send", "~second note", "--no-wait")
    delivered = agent.wait_for(lambda e: e["event"] == "interrupt_delivered")[0]
    assert delivered["turn"] == 1 and delivered["text"] == "stop and look at this"
    queued = agent.wait_for(lambda e: e["event"] == "inbox" and e["action"] == "queued", count=2)
    assert [q["count"] for q in queued] == [1, 2]
    flush = agent.wait_for(lambda e: e["event"] == "queue_flush")[0]
    assert flush["count"] == 2
    follow_up = agent.wait_for(lambda e: e["event"] == "turn_start" and e["source"] == "queue")[0]
    assert follow_up["text"] == "first note\n\nsecond note" and follow_up["turn"] == 2
    assert len(agent.named("turn_start")) == 2  # the interrupt joined turn 1; it did not start a turn


def test_timer_fires_the_set_number_of_times_and_retires(project, agents):
    agent = agents(project, "--turn-seconds", "0.1")
    assert project.run("cb", "set", "timer ping", "--every", "1", "--repeat", "2", "--first-in", "0").code == 0
    fired = agent.wait_for(lambda e: e["event"] == "callback_fired", count=2, timeout=15)
    assert [(f["slot"], f["repeat_count"], f["retired"]) for f in fired] == [(0, 1, False), (0, 0, True)]
    turns = agent.wait_for(lambda e: e["event"] == "turn_start" and e["source"] == "callback", count=2)
    assert [t["text"] for t in turns] == ["timer ping", "timer ping"]
    slot = json.loads((agent.dir / "callbacks.json").read_text())["slots"][0]
    assert slot["active"] is False and slot["repeat_count"] == 0  # retired: it cannot fire again
    listing = project.run("cb", "list").out
    assert listing == "No active callbacks.\n"


def test_timer_due_mid_turn_is_deferred_then_rebased(project, agents):
    agent = agents(project, "--turn-seconds", "3")
    project.run("inbox", "send", "busy for a while", "--no-wait")
    agent.wait_for(lambda e: e["event"] == "turn_start")
    assert project.run("cb", "set", "poll", "--every", "4", "--repeat", "3", "--first-in", "1").code == 0
    agent.wait_for(lambda e: e["event"] == "callback_deferred")
    end = agent.wait_for(lambda e: e["event"] == "turn_end")[0]
    rebased = agent.wait_for(lambda e: e["event"] == "callbacks_rebased")[0]
    assert rebased["slots"] == [0]
    slot = json.loads((agent.dir / "callbacks.json").read_text())["slots"][0]
    assert abs(slot["fire_at_ms"] - (end["ts_ms"] + 4000)) < 1500  # one full delay after the turn ended
    assert not any(e["event"] == "callback_fired" and e["ts_ms"] < end["ts_ms"] for e in agent.events)


def test_cron_tick_dispatches_and_the_agent_consumes(project, agents):
    agent = agents(project, "--turn-seconds", "0.1")
    assert project.run("cron", "add", "ping", "--in", "60", "--payload", "heartbeat-event", "--text", "cron ping").code == 0
    path = project.root / ".scheduler" / "cron-jobs.json"
    data = json.loads(path.read_text())
    data["jobs"][0]["schedule"]["atMs"] = data["jobs"][0]["lifecycle"]["nextRunAtMs"] = now_ms() - 500
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    report = project.run("cron", "tick", "--json").json()
    [run] = report["runs"]
    turn = agent.wait_for(lambda e: e["event"] == "turn_start")[0]
    assert turn["text"] == "cron ping" and turn["ref"] == run["outcome"]["stem"]
    evidence = project.run("cron", "runs", "ping", "--json").json()["runs"][0]
    assert evidence["status"] == "dispatched"


def test_a_second_agent_on_the_same_session_is_refused(project, agents):
    agents(project)
    result = project.run("--session", SID, "agent", "run", "--json")
    assert result.code == 4 and result.json()["error"]["code"] == "agent_owns_session"


def test_live_session_without_our_lock_needs_force(project):
    project.session(SID, live=True)
    result = project.run("--session", SID, "agent", "run", "--max-turns", "1", "--json")
    assert result.code == 4 and "--force" in result.json()["error"]["message"]


def test_exec_handler_gets_the_turn_and_the_environment(project, agents, tmp_path):
    out = tmp_path / "turn.txt"
    agent = agents(project, "--exec", f"cat > {out}; env | grep -E '^(SX_|SXCTL_TURN)' | sort >> {out}; "
                                                 "echo done-by-exec")
    stem = project.run("inbox", "send", "run the tests", "--no-wait", "--json").json()["stem"]
    end = agent.wait_for(lambda e: e["event"] == "turn_end")[0]
    assert end["exit_code"] == 0
    output = agent.wait_for(lambda e: e["event"] == "output")[0]
    assert output["line"] == "done-by-exec" and output["stream"] == "stdout"
    text = out.read_text()
    assert text.startswith("run the tests")
    assert f"SXCTL_TURN_STEM={stem}" in text and f"SX_SESSION_DIR={agent.dir}" in text
    assert "SXCTL_TURN_SOURCE=inbox" in text


def test_invalid_inbox_files_are_skipped_and_retracted_ones_never_seen(project, agents):
    agent = agents(project, "--turn-seconds", "0.1")
    (agent.dir / "inbox" / "0_bad.json").write_text("{not json")
    skipped = agent.wait_for(lambda e: e["event"] == "inbox" and e["action"] == "invalid")[0]
    assert skipped["stem"] == "0_bad" and (agent.dir / "inbox" / "done" / "0_bad.json").exists()


def test_shutdown_drops_buffered_notes_and_reports_them(project, agents):
    agent = agents(project, "--turn-seconds", "5")
    project.run("inbox", "send", "long", "--no-wait")
    agent.wait_for(lambda e: e["event"] == "turn_start")
    project.run("inbox", "send", "~never sent", "--no-wait")
    agent.wait_for(lambda e: e["event"] == "inbox" and e["action"] == "queued")
    assert agent.stop() == 0
    assert agent.named("stopped")[0]["dropped"] == 1
    assert agent.named("dropped")[0]["text"] == "never sent"
    stats = read_json(agent.dir / "stats.json")  # written before `stopped`
    assert stats["sxctl"]["busy"] is False


@pytest.mark.real_time
def test_max_turns_stops_after_exactly_n_turns_while_messages_keep_arriving(project, agents):
    from sxctl.inbox.request import SendRequest
    from sxctl.inbox.sending import send
    from sxctl.project import select_session

    agent = agents(project, "--turn-seconds", "0.4", "--max-turns", "2")
    session = select_session(project.root, SID)
    stop = threading.Event()
    sent: list[str] = []

    def keep_sending():
        n = 0
        while not stop.is_set():
            text = f"message {n}"
            send(session, SendRequest(text, no_wait=True))
            sent.append(text)
            n += 1
            stop.wait(0.1)

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        code = agent.proc.wait(timeout=60)
    finally:
        stop.set()
        sender.join()
    agent.reader.join(timeout=10)
    assert code == 0
    starts = agent.named("turn_start")
    assert len(starts) == 2 and agent.named("stopped")[0]["turns"] == 2
    delivered = "\n".join([s["text"] for s in starts] + [e["text"] for e in agent.named("interrupt_delivered")])
    done = sorted((agent.dir / "inbox" / "done").glob("*.json"))
    taken = [json.loads(path.read_text())["text"] for path in done]
    assert taken and all(text in delivered for text in taken), (taken, delivered)
    pending = list((agent.dir / "inbox").glob("*.json"))
    assert len(taken) + len(pending) == len(sent)  # the rest stayed pending


def test_a_cleanly_stopped_agent_can_be_restarted_at_once(project, agents):
    first = agents(project, "--turn-seconds", "0.1")
    assert first.stop() == 0
    stats = json.loads((first.dir / "stats.json").read_text())
    assert stats["sxctl"]["stopped"] is True
    assert project.run("--session", SID, "session", "show", "--json").json()["state"] == "stopped"
    second = agents(project, "--turn-seconds", "0.1")  # no agent_owns_session, no 10 s wait
    assert second.named("started")
    assert second.stop() == 0


def test_a_stop_asked_for_while_starting_is_announced_after_started(project):
    """`run_agent(on_ready=…)` may stop the agent before it announced itself: a follower still
    reads `started` first, then `stopping`, then `stopped`, and the run ends."""
    from sxctl import run_agent

    events: list[dict] = []
    run = run_agent(events.append, project=str(project.root), session=SID, poll_ms=10,
                    on_ready=lambda handle: handle.stop("test"))
    names = [event["event"] for event in events]
    assert names[:2] == ["started", "stopping"] and names[-1] == "stopped", names
    assert events[1]["signal"] == "test" and run.turns == 0


def test_an_agent_started_beside_a_live_one_warns_which_session_commands_will_use(project):
    """A second `agent run` without --session makes a second live session: it says so, since
    commands without --session now choose between the two."""
    from sxctl import run_agent

    project.session(SID, live=True)
    events: list[dict] = []
    run = run_agent(events.append, project=str(project.root), poll_ms=10,
                    on_ready=lambda handle: handle.stop("test"))
    [warning] = [event["message"] for event in events if event["event"] == "warning"]
    assert warning == (f"another agent is live in this project (session {SID}): commands without --session "
                       "use the freshest of them; pin one with --session ID")
    assert run.session_id != SID
    project.session(SID, live=False)
    alone: list[dict] = []
    run_agent(alone.append, project=str(project.root), session=run.session_id, poll_ms=10,
              on_ready=lambda handle: handle.stop("test"))
    assert [event for event in alone if event["event"] == "warning"] == []


def test_an_agent_whose_project_is_moved_stops_with_one_line_saying_so(project, agents):
    """Moving the project under a running agent crashed it with a temp file's name; it now stops
    (exit 3) saying its session folder is gone and where to start it again."""
    agent = agents(project, "--turn-seconds", "0.1")
    moved = project.root.with_name("moved")
    project.root.rename(moved)
    assert agent.proc.wait(timeout=20) == 3
    agent.reader.join(timeout=10)
    assert agent.proc.stderr.read() == ""
    [error] = [event for event in agent.events if "error" in event]  # --json: the error document
    message = json.dumps(error)
    assert "the session folder is gone (the project was moved or deleted)" in message, agent.events
    assert str(project.root / ".scorpiox" / "sessions" / SID) in message
    moved.rename(project.root)  # the fixture's project again, for the clean-up


def test_a_stop_asked_for_while_an_event_is_being_printed_prints_nothing_itself(project):
    """SIGTERM's handler announced `stopping` itself: arriving while the loop printed an event, it
    waited for the printer's lock the loop held, and the agent never stopped (a hung CI step).
    A stop only sets a flag; the loop announces it."""
    from sxctl import run_agent

    handles, events, nested = [], [], []
    inside = threading.Event()

    def on_event(event: dict) -> None:
        if inside.is_set():
            nested.append(event["event"])
        events.append(event["event"])
        if event["event"] == "inbox" and not handles[0].stopping:  # printed by the loop itself
            inside.set()
            handles[0].stop("test")  # as a signal handler runs: in the middle of this print
            inside.clear()

    project.session(SID, live=False)
    assert project.run("--session", SID, "inbox", "send", "hello", "--no-wait").code == 0
    run_agent(on_event, project=str(project.root), session=SID, poll_ms=10, turn_seconds=0.05,
              on_ready=handles.append)
    assert nested == [] and "stopping" in events and events[-1] == "stopped", (nested, events)

"""`sxctl cron tick` / `cron run`: dispatch, reconciliation, catch-up, ownership, gates."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from sxctl.clock import FakeClock
from sxctl.cron.run.ledger import scan_ledger
from tests.conftest import EXAMPLES, REPO, inbox_messages, now_ms, start_together

NOW = 1_789_974_090_000


def rows(project):
    path = project.root / ".scheduler" / "cron-executions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def store(project):
    return json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())


def tick(project, *args, env=None):
    return project.run("cron", "tick", "--json", *args, env=env)


def make_due(project, name, *, at_ms=None):
    """Move a job's next run into the past (as if its time had come)."""
    data = store(project)
    for job in data["jobs"]:
        if job["name"] == name:
            job["lifecycle"]["nextRunAtMs"] = at_ms if at_ms is not None else now_ms() - 1000
            if job["schedule"]["kind"] == "at":
                job["schedule"]["atMs"] = job["lifecycle"]["nextRunAtMs"]
    (project.root / ".scheduler" / "cron-jobs.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")


def test_one_shot_runs_once_and_ends_terminal(project):
    folder = project.session()
    assert project.run("cron", "add", "ping", "--in", "60", "--payload", "heartbeat-event", "--text", "cron ping").code == 0
    make_due(project, "ping")
    result = tick(project)
    assert result.code == 0, result.err
    report = result.json()
    [run] = report["runs"]
    assert (run["name"], run["trigger"], run["status"]) == ("ping", "scheduled", "dispatched")
    assert run["outcome"]["kind"] == "inbox_dispatch" and run["outcome"]["sessionId"] == folder.name
    assert run["outcome"]["mode"] == "auto"
    assert inbox_messages(folder) == [{"stem": run["outcome"]["stem"], "text": "cron ping", "mode": "auto"}]
    job = store(project)["jobs"][0]
    assert job["lifecycle"]["status"] == "one_shot_terminal"
    assert job["lifecycle"]["terminalExecutionId"] == run["executionId"] and store(project)["activeClaims"] == []
    assert [r["recordType"] for r in rows(project)] == ["started", "terminal"]
    again = tick(project).json()
    assert again["runs"] == [] and len(inbox_messages(folder)) == 1
    assert project.run("cron", "validate").code == 0


def test_heartbeat_next_heartbeat_is_queue_and_agent_turn_uses_turn_mode(project):
    folder = project.session()
    project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat",
                "--wake-mode", "next-heartbeat")
    project.run("cron", "add", "turn", "--every", "1h", "--payload", "agent-turn", "--text", "do the thing")
    make_due(project, "hb")
    make_due(project, "turn")
    report = tick(project, "--turn-mode", "interrupt").json()
    assert {r["name"]: r["outcome"]["mode"] for r in report["runs"]} == {"hb": "queue", "turn": "interrupt"}
    texts = {m["text"] for m in inbox_messages(folder)}
    assert texts == {"beat", "do the thing"}
    for job in store(project)["jobs"]:
        assert job["lifecycle"]["status"] == "scheduled" and job["lifecycle"]["nextRunAtMs"] > now_ms()
    turn_rows = [r for r in rows(project) if r["workKind"] == "agent_turn"]
    assert turn_rows[0]["rootRunId"] == f"root-cron-{turn_rows[0]['executionId']}"


def test_no_live_session_past_the_hold_limit_is_a_precondition_failure(project):
    project.session(live=False)
    project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat",
                "--hold-max", "0")
    make_due(project, "hb")
    result = tick(project)
    assert result.code == 0
    [run] = result.json()["runs"]
    assert (run["status"], run["errorKind"]) == ("failed", "precondition")
    assert run["outcome"] == {"kind": "pre_dispatch_failure", "stage": "executor_precondition",
                              "errorKind": "precondition"}
    assert result.err == ""  # told once, in the report: given up, not also a failed dispatch
    [row] = result.json()["outcomes"]
    assert (row["fate"], row["count"], row["holdMaxMs"]) == ("given_up", 1, 0)
    assert "no live session" in run["reason"]
    shown = project.run("status").out
    assert "no live agent or session to send to" in shown, shown
    fires = project.run("cron", "next", "hb", "-n", "1", "--json").json()["fires"]
    assert fires[0]["waiting"]["status"] == "given_up"  # --hold-max 0: the next one will not wait either
    assert "waits for a live agent" not in project.run("cron", "next", "hb", "-n", "1").out


@pytest.mark.parametrize(
    ("command", "timeout", "expected"),
    [
        ("cat > \"$OUT\"; echo msg-42", "60", {"status": "accepted", "deliveredChunks": 1, "lastMessageId": "msg-42"}),
        ("cat > /dev/null; exit 3", "60", {"status": "rejected", "errorKind": "platform", "deliveredChunks": 0,
                                           "failedChunks": 1}),
        ("sleep 30", "0.5", {"status": "unknown", "errorKind": "timeout", "deliveredChunks": 0, "failedChunks": 1,
                             "ambiguousChunks": 1}),
    ],
)
def test_delivery_through_the_deliver_command(project, tmp_path, command, timeout, expected):
    project.session()
    out = tmp_path / "delivered.txt"
    project.run("cron", "add", "dl", "--every", "1h", "--payload", "delivery", "--text", "Time to stretch.")
    make_due(project, "dl")
    env = project.env(SXCTL_DELIVER_CMD=command, OUT=str(out))
    started = time.monotonic()
    result = tick(project, "--deliver-timeout", timeout, env=env)
    assert result.code == 0, result.err
    [run] = result.json()["runs"]
    delivery = run["outcome"]["delivery"]
    assert {k: v for k, v in delivery.items() if k != "settledAtMs"} == expected
    if expected["status"] == "accepted":
        assert out.read_text() == "Time to stretch." and run["status"] == "completed"
    if expected["status"] == "unknown":
        assert time.monotonic() - started < 20 and run["status"] == "unknown"
    assert project.run("cron", "validate").code == 0


def test_delivery_without_a_command_is_not_bound(project):
    project.session()
    project.run("cron", "add", "dl", "--every", "1h", "--payload", "delivery", "--text", "x")
    make_due(project, "dl")
    [run] = tick(project).json()["runs"]
    assert run["outcome"] == {"kind": "pre_dispatch_failure", "stage": "executor_not_bound",
                              "errorKind": "precondition"}


def test_deliver_command_sees_the_documented_environment(project, tmp_path):
    project.session()
    out = tmp_path / "env.txt"
    project.run("cron", "add", "dl", "--every", "1h", "--payload", "delivery", "--text", "x", "--to", "live")
    make_due(project, "dl")
    env = project.env(SXCTL_DELIVER_CMD=f"env | grep ^SXCTL_ | sort > {out}")
    tick(project, env=env)
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert seen["SXCTL_JOB_NAME"] == "dl" and seen["SXCTL_TRIGGER"] == "scheduled"
    assert seen["SXCTL_TARGET_PROJECT"] == str(project.root) and seen["SXCTL_TARGET_CONVERSATION"] == "live"
    assert {"SXCTL_JOB_ID", "SXCTL_EXECUTION_ID", "SXCTL_SCHEDULED_FOR_MS", "SXCTL_TARGET_SESSION"} <= set(seen)


def test_overdue_every_job_runs_once_as_catchup_and_reports_skipped(project):
    folder = project.root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler"
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": NOW}))
    ten_minutes_ago = NOW - 600_000
    project.run("cron", "add", "minutely", "--every", "1m", "--anchor", "2026-09-21T00:00:00Z",
                "--payload", "heartbeat-event", "--text", "beat", clock=FakeClock(ten_minutes_ago - 30_000))
    result = project.run("cron", "tick", "--json", clock=FakeClock(NOW))
    assert result.code == 0, result.err
    report = result.json()
    [run] = report["runs"]
    # added at 06:51:00, so the first occurrence was 06:52:00; the tick comes at 07:01:30
    assert run["trigger"] == "catchup" and run["scheduledForMs"] == 1789973520000
    assert run["skipped_occurrences"] == 9  # 06:53 … 07:01, all at or before the claim
    assert (run["skipped_first_ms"], run["skipped_last_ms"]) == (1789973580000, 1789974060000)
    assert report["skipped_missed_total"] == 9
    [row] = report["outcomes"]  # one outcome: the catch-up run stands for the 10 occurrences
    assert (row["fate"], row["count"], row["firstMs"], row["lastMs"]) == ("ran", 10, 1789973520000, 1789974060000)
    assert result.err == ""
    assert store(project)["jobs"][0]["lifecycle"]["nextRunAtMs"] == 1789974120000  # 07:02, after now
    assert len(inbox_messages(folder)) == 1


def test_max_runs_defers_the_rest(project):
    project.session()
    for n in range(4):
        project.run("cron", "add", f"j{n}", "--every", "1h", "--payload", "heartbeat-event", "--text", f"t{n}")
        make_due(project, f"j{n}")
    report = tick(project, "--max-runs", "2").json()
    assert [r["name"] for r in report["runs"]] == ["j0", "j1"]
    assert [d["name"] for d in report["deferred"]] == ["j2", "j3"]
    assert [r["name"] for r in tick(project).json()["runs"]] == ["j2", "j3"]


def test_missing_store_is_nothing_to_do(project):
    result = tick(project)
    assert result.code == 0 and result.json()["store_exists"] is False
    assert not (project.root / ".scheduler").exists()
    assert project.run("cron", "tick", "-q").out == ""


def test_a_pass_with_nothing_due_says_so_unless_quiet(project):
    """It printed nothing at all, as a pass that never ran does. It says nothing was due and
    which job is due next (a note: `-q`, the exported entry's flag, keeps a quiet log quiet)."""
    start = (now_ms() // 60_000) * 60_000
    project.session()
    assert project.run("cron", "init").code == 0
    idle = project.run("cron", "tick", clock=FakeClock(start))
    assert idle.code == 0 and idle.out == "" and idle.err == "sxctl: nothing due: no job is scheduled\n", idle.err
    assert project.run("cron", "add", "later", "--every", "1h", "--anchor", "2020-01-01T00:30Z", "--payload",
                       "heartbeat-event", "--text", "x", clock=FakeClock(start)).code == 0
    idle = project.run("cron", "tick", clock=FakeClock(start))
    anchor = 1_577_838_600_000  # 2020-01-01T00:30Z
    due = anchor + ((start - anchor) // 3_600_000 + 1) * 3_600_000
    shown = time.strftime("%H:%M", time.gmtime(due / 1000))
    day = "" if due // 86_400_000 == start // 86_400_000 else time.strftime("%Y-%m-%d ", time.gmtime(due / 1000))
    assert idle.code == 0 and idle.out == ""
    assert idle.err.startswith(f"sxctl: nothing due; next run: later at {day}{shown} UTC"), idle.err
    guide = (REPO / "docs" / "guides" / "scheduler.md").read_text()  # it said `next due:` (a newcomer's finding)
    assert "`sxctl: nothing due; next run: nightly at 02:00\nUTC`" in guide
    quiet = project.run("-q", "cron", "tick", clock=FakeClock(start))
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")
    document = project.run("cron", "tick", "--json", clock=FakeClock(start))
    assert document.json()["runs"] == [] and document.json()["occurrences"] == {"total": 0}


def test_an_idle_pass_names_the_run_cron_next_shows_not_one_the_pass_will_skip(project):
    """The note named comis's next run: a job due next outside its active hours was "next due"
    while `cron next` showed another job first. It names the timeline's first run."""
    start = 1_796_630_400_000  # 2026-12-07T08:00Z, a Monday
    project.session()
    assert project.run("cron", "add", "quiet", "--every", "10m", "--anchor", "2026-12-07 08:00", "--active-hours",
                       "11:00-12:00", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "x",
                       clock=FakeClock(start - 60_000)).code == 0
    assert project.run("cron", "add", "hourly", "--cron", "30 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
                       "--text", "y", clock=FakeClock(start - 60_000)).code == 0
    project.run("cron", "tick", "-q", clock=FakeClock(start))  # 08:00: quiet's run is skipped
    idle = project.run("cron", "tick", clock=FakeClock(start + 60_000))
    shown = project.run("cron", "next", "-n", "1", "--json", clock=FakeClock(start + 60_000)).json()["fires"][0]
    assert shown["name"] == "hourly" and idle.err == "sxctl: nothing due; next run: hourly at 09:30 UTC (will wait for agent)\n", idle.err


@pytest.mark.real_time
def test_busy_lock(project):
    project.run("cron", "init")
    lockdir = project.root / ".scheduler" / "cron-jobs.lock.lock"
    lockdir.mkdir()
    busy = tick(project)
    assert busy.code == 4 and busy.json()["error"]["code"] == "lock_busy"
    ok = tick(project, "--busy-ok")
    assert ok.code == 0 and ok.json()["skipped"] == "lock_busy"


def test_built_in_jobs_make_tick_refuse_unless_forced(project):
    project.session()
    project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat")
    data = store(project)
    data["jobs"].append({"id": "reflect-default", "name": "reflection", "agentId": "default",
                         "schedule": {"kind": "every", "everyMs": 60000, "anchorMs": 0},
                         "lifecycle": {"status": "scheduled", "nextRunAtMs": 1000, "consecutiveDependencyErrors": 0},
                         "source": "built_in", "payload": {"kind": "internal_action", "action": "reflection"}})
    (project.root / ".scheduler" / "cron-jobs.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
    make_due(project, "hb")
    refused = tick(project)
    assert refused.code == 4 and refused.json()["error"]["code"] == "built_in_present"
    forced = tick(project, "--force")
    assert forced.code == 0 and [r["name"] for r in forced.json()["runs"]] == ["hb"]
    assert "--force" in forced.err


def test_dry_run_writes_nothing(project):
    project.session()
    project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat")
    make_due(project, "hb")
    before = {p.name: p.read_bytes() for p in (project.root / ".scheduler").iterdir() if p.is_file()}
    report = tick(project, "--dry-run").json()
    assert [(r["name"], r["status"]) for r in report["runs"]] == [("hb", "would_run")]
    after = {p.name: p.read_bytes() for p in (project.root / ".scheduler").iterdir() if p.is_file()}
    assert after == before and not (project.root / ".scheduler" / "cron-jobs.lock.lock").exists()


def test_cron_run_force_is_manual_and_keeps_the_lifecycle(project):
    folder = project.session()
    project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat", "--paused")
    before = store(project)["jobs"][0]["lifecycle"]
    doc = project.run("cron", "run", "hb", "--json").json()
    assert doc["triggered"] is True and doc["mode"] == "force" and doc["jobName"] == "hb"
    assert doc["run"]["trigger"] == "manual" and doc["run"]["status"] == "dispatched"
    assert store(project)["jobs"][0]["lifecycle"] == before
    assert len(inbox_messages(folder)) == 1
    due = project.run("cron", "run", "--mode", "due", "--json").json()
    assert due["mode"] == "due" and due["executionIds"] == []


# --- reconciliation -----------------------------------------------------------------------------------

def _claimed_example(project, *, start=False, terminal=False):
    """The examples' store with a claim on next-check-in, and a ledger with its start/terminal."""
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    shutil.copy(EXAMPLES / "cron-executions.jsonl", scheduler / "cron-executions.jsonl")
    data = json.loads((EXAMPLES / "cron-jobs.json").read_text())
    job = data["jobs"][0]
    claim = {"executionId": "dead-pass-1", "bootId": "sxctl-dead", "jobId": job["id"], "agentId": "default",
             "rootRunId": None, "scheduledForMs": 1789975800000 - 1_800_000, "claimedAtMs": 1789974000500,
             "trigger": "scheduled", "workKind": "heartbeat_event"}
    data["activeClaims"].append(claim)
    (scheduler / "cron-jobs.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
    base = {k: claim[k] for k in ("executionId", "bootId", "jobId", "agentId", "scheduledForMs", "trigger")}
    lines = []
    if start:
        lines.append({**base, "recordType": "started", "workKind": "heartbeat_event", "rootRunId": None,
                      "startedAtMs": 1789974000600})
    if terminal:
        lines.append({**base, "recordType": "terminal", "workKind": "heartbeat_event", "terminalAtMs": 1789974000700,
                      "durationMs": 100, "outcome": {"kind": "inbox_dispatch", "sessionId": "s", "stem": "x",
                                                     "mode": "queue"}})
    with open(scheduler / "cron-executions.jsonl", "a") as handle:
        for line in lines:
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    return claim


@pytest.mark.parametrize(
    ("start", "terminal", "counter", "outcome"),
    [
        (False, False, "recoveredBeforeStart",
         {"kind": "pre_dispatch_failure", "stage": "start_record_recovery", "errorKind": "internal"}),
        (True, False, "ownerLostAfterStart",
         {"kind": "unsettled", "reason": "owner_lost_after_start", "rootRunId": None, "errorKind": "internal"}),
        (True, True, "settledFromTerminal", {"kind": "inbox_dispatch", "sessionId": "s", "stem": "x", "mode": "queue"}),
    ],
)
def test_reconciliation_of_a_dead_pass(project, start, terminal, counter, outcome):
    claim = _claimed_example(project, start=start, terminal=terminal)
    result = project.run("cron", "tick", "--json", clock=FakeClock(NOW))
    assert result.code == 0, result.err
    report = result.json()
    assert report["reconciled"][counter] == 1 and report["reconciled"]["executionIds"] == ["dead-pass-1"]
    assert report["runs"] == []  # never replayed: its nextRunAtMs had already moved on
    group = scan_ledger(project.root / ".scheduler" / "cron-executions.jsonl").groups["dead-pass-1"]
    assert group.terminal["outcome"] == outcome and group.terminal["bootId"] == "sxctl-dead"
    if not start:
        assert group.start["startedAtMs"] == claim["claimedAtMs"]
    assert store(project)["activeClaims"] == []
    assert project.run("cron", "validate").code == 0


def test_orphan_starts_stop_the_pass_unless_terminalized(project):
    _claimed_example(project, start=True)
    data = store(project)
    data["activeClaims"] = []
    (project.root / ".scheduler" / "cron-jobs.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
    refused = tick(project)
    assert refused.code == 5 and refused.json()["error"]["code"] == "orphan_start"
    assert "dead-pass-1" in refused.json()["error"]["message"]
    done = tick(project, "--terminalize-orphans")
    assert done.code == 0 and done.json()["reconciled"]["ownerLostAfterStart"] == 1
    assert tick(project).code == 0


# --- wake gates (node) -------------------------------------------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


@needs_node
@pytest.mark.parametrize(
    ("script", "expect"),
    [
        ("console.log('HEARTBEAT_OK')", "skip"),
        ("console.log(JSON.stringify({wake: true, context: 'CI failed on main'}))", "woke"),
        ("process.exit(2)", "failed_open"),
        ("// prints nothing", "woke"),
    ],
)
def test_wake_gates(project, tmp_path, script, expect):
    folder = project.session()
    gate = tmp_path / "gate.js"
    gate.write_text(script)
    project.run("cron", "add", "gated", "--every", "1h", "--payload", "agent-turn", "--text", "fix CI",
                "--wake-gate", str(gate))
    make_due(project, "gated")
    [run] = tick(project).json()["runs"]
    if expect == "skip":
        assert run["status"] == "skipped" and run["outcome"]["kind"] == "wake_gate_skip"
        assert run["outcome"]["delivery"] == {"status": "not_requested"} and inbox_messages(folder) == []
        return
    assert run["outcome"]["wakeGate"]["status"] == expect
    [message] = inbox_messages(folder)
    if "context" in script:
        assert message["text"] == "fix CI\n\n[wake-gate context]\nCI failed on main"
    if expect == "failed_open":
        assert run["outcome"]["wakeGate"]["errorKind"] == "internal"
    assert project.run("cron", "validate").code == 0


def test_no_gates_runs_the_turn_failing_open(project, tmp_path):
    folder = project.session()
    gate = tmp_path / "gate.js"
    gate.write_text("console.log('HEARTBEAT_OK')")
    project.run("cron", "add", "gated", "--every", "1h", "--payload", "agent-turn", "--text", "go", "--wake-gate",
                str(gate))
    make_due(project, "gated")
    [run] = tick(project, "--no-gates").json()["runs"]
    assert run["outcome"]["wakeGate"] == {"status": "failed_open", "durationMs": 0, "toolCalls": 0,
                                          "errorKind": "config"}
    assert len(inbox_messages(folder)) == 1


def test_concurrent_ticks_run_a_due_job_once(project, tmp_path):
    folder = project.session()
    project.run("cron", "add", "once", "--every", "1h", "--payload", "heartbeat-event", "--text", "exactly once")
    make_due(project, "once")
    start = tmp_path / "go"
    reports = []
    for run in start_together(project, [["cron", "tick", "--busy-ok", "--lock-wait", "2", "--json"]] * 6, start):
        result = run.wait(timeout=120)
        assert result.code == 0, result.err
        reports.append(result.json())
    assert sum(len(r["runs"]) for r in reports) == 1
    assert len(inbox_messages(folder)) == 1 and len(rows(project)) == 2


def _catch_up(project, expr, overdue_ms):
    """Add a cron job, let `overdue_ms` pass without a tick, then tick once: the run's entry."""
    folder = project.root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": NOW}))
    env = project.env(SXCTL_PROJECT=str(project.root), TZ="UTC")
    added = project.run("cron", "add", "often", "--cron", expr, "--payload", "heartbeat-event", "--text", "beat",
                        env=env, clock=FakeClock(NOW - overdue_ms))
    assert added.code == 0, added.err
    result = project.run("cron", "tick", "--json", env=env, clock=FakeClock(NOW))
    assert result.code == 0, result.out
    return result.json()


@pytest.mark.parametrize("expr", ["* * * * * *", "*/1 * * * * *", "*/2 * * * * *"])
def test_every_second_patterns_are_accepted_like_comis_does(project, expr):
    assert project.run("cron", "add", "fast", "--cron", expr, "--payload", "heartbeat-event", "--text", "t").code == 0
    shown = project.run("cron", "next", "--cron", expr, "--from", "2026-09-21T07:00:00Z", "-n", "3", "--json")
    assert shown.code == 0, shown.out
    step = 2000 if expr.startswith("*/2") else 1000
    at = [row["at_ms"] for row in shown.json()["fires"]]
    assert [b - a for a, b in zip(at, at[1:], strict=False)] == [step, step]
    assert project.run("cron", "tick", "--dry-run", "--json").code == 0


def test_catch_up_counts_come_from_the_schedule_and_are_capped(project):
    from croniter import croniter

    report = _catch_up(project, "*/5 * * * *", 2 * 3_600_000)
    [run] = report["runs"]
    # independently: the occurrences croniter walks between the one run and the tick
    walker = croniter("*/5 * * * *", run["scheduledForMs"] / 1000)
    expected = 0
    while walker.get_next(float) * 1000 <= NOW:
        expected += 1
    assert run["skipped_occurrences"] == expected and report["skipped_missed_total"] == expected


@pytest.mark.parametrize(("expr", "overdue_ms"), [("* * * * *", 7 * 86_400_000), ("*/3 * * * * *", 86_400_000)])
def test_a_huge_backlog_is_counted_up_to_the_cap_without_walking_it_all(project, expr, overdue_ms):
    report = _catch_up(project, expr, overdue_ms)
    [run] = report["runs"]
    assert run["skipped_occurrences"] == "≥10000" and report["skipped_missed_total"] == 10000


def test_a_one_shot_misses_nothing(project):
    folder = project.session()
    assert project.run("cron", "add", "once", "--in", "60", "--payload", "heartbeat-event", "--text", "x").code == 0
    make_due(project, "once", at_ms=now_ms() - 3_600_000)
    report = tick(project).json()
    assert report["skipped_missed_total"] == 0 and "skipped_occurrences" not in report["runs"][0]
    assert len(inbox_messages(folder)) == 1


def test_chatham_gap_follows_the_documented_dst_policy(project):
    """`15,45 1-3 * * *` in Pacific/Chatham on 2026-09-27, when 02:45 jumps to 03:45: 02:45 and
    03:15 do not exist and each fires once, shifted forward by the gap (to 03:45, which is also a
    real occurrence, so once, and to 04:15). croner, comis's own library, has no 04:15 run: the
    README lists this divergence."""
    shown = project.run("cron", "next", "--cron", "15,45 1-3 * * *", "--tz", "Pacific/Chatham",
                        "--from", "2026-09-26T12:00:00Z", "-n", "6", "--json").json()
    from datetime import datetime
    from zoneinfo import ZoneInfo

    local = [datetime.fromtimestamp(r["at_ms"] / 1000, ZoneInfo("Pacific/Chatham")).strftime("%d %H:%M")
             for r in shown["fires"]]
    assert local == ["27 01:15", "27 01:45", "27 02:15", "27 03:45", "27 04:15", "28 01:15"]


def test_a_dry_run_says_a_delivery_job_would_fail_without_a_deliver_command(project):
    """Newcomer: `cron tick --dry-run` said `would_run` for a delivery one-shot with no
    SXCTL_DELIVER_CMD; the real pass failed it, for good. The dry run says what the pass would do."""
    project.session()
    project.run("cron", "add", "dl", "--every", "1h", "--payload", "delivery", "--text", "x")
    make_due(project, "dl")
    [run] = tick(project, "--dry-run").json()["runs"]
    assert (run["status"], run["reason"]) == ("would_run", "but fails precondition: SXCTL_DELIVER_CMD is not set here")
    assert "but fails precondition: SXCTL_DELIVER_CMD is not set here" in project.run("cron", "tick", "--dry-run").out
    bound = project.run("cron", "tick", "--dry-run", "--json", env={"SXCTL_DELIVER_CMD": "cat > /dev/null"})
    assert "reason" not in bound.json()["runs"][0]

"""`sxctl cron` editing verbs over the comis strict v1 store: round trips, refusals, locks,
daemon ownership."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes
from tests.conftest import EXAMPLES

NOW = 1_789_974_090_000  # 2026-09-21 07:01:30 UTC, the examples' moment


def cron(project, *args, now=NOW):
    return project.run("cron", *args, clock=FakeClock(now), env=project.env(NO_COLOR="1"))


def store_of(scheduler):
    return json.loads((scheduler / "cron-jobs.json").read_bytes())


def test_examples_load_and_list(project, ws):
    result = cron(project, "list", "--json")
    assert result.code == 0, (result.out, result.err)
    doc = json.loads(result.out)
    assert [(r["job"]["name"], r["state"]) for r in doc["jobs"]] == [
        ("next-check-in", "scheduled"), ("stretch-reminder", "done"), ("morning-briefing", "scheduled"),
        ("ci-watch", "paused:operator")]
    assert doc["jobs"][0]["job"] == store_of(ws)["jobs"][0]
    assert doc["jobs"][2]["target"] == {"project": "/home/dev/myapp", "conversation": "live"}
    assert doc["agentId"] == "default"
    human = cron(project, "list").out.splitlines()
    assert human[0].split() == ["NAME", "KIND", "SCHEDULE", "STATE", "NEXT", "TARGET"]
    assert any("cron 0 9 * * * America/New_York" in line for line in human)
    assert any("every 30m" in line and "heartbeat" in line for line in human)


def test_reading_the_store_pauses_the_cycle_collector_only_while_it_builds(project, ws):
    """`cron list` pauses Python's cycle collector while it parses and builds (sxctl.collector):
    after it, and after a store it refuses, the collector runs again (a `watch` in the same
    process must collect), and a collector the caller had paused stays paused."""
    import gc

    assert gc.isenabled()
    assert cron(project, "list", "--json").code == 0
    assert gc.isenabled()
    (ws / "cron-jobs.json").write_bytes(b'{"formatVersion": 1, "jobs": [')
    assert cron(project, "list", "--json").code == 5
    assert gc.isenabled()
    gc.disable()
    try:
        assert cron(project, "list", "--json").code == 5
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_example_store_passes_the_independent_checker():
    assert check_store_bytes((EXAMPLES / "cron-jobs.json").read_bytes()) == []


def test_edit_round_trip_keeps_every_other_job_byte_for_byte(project, ws):
    before = store_of(ws)
    assert cron(project, "pause", "next-check-in").code == 0
    raw = (ws / "cron-jobs.json").read_bytes()
    assert check_store_bytes(raw) == []
    after = json.loads(raw)
    assert after["agentSchedulerSeed"] == before["agentSchedulerSeed"]
    assert after["jobs"][1:] == before["jobs"][1:] and after["activeClaims"] == before["activeClaims"]
    assert after["jobs"][0]["lifecycle"] == {**before["jobs"][0]["lifecycle"], "status": "paused",
                                             "reason": "operator"}
    assert cron(project, "resume", "next-check-in").code == 0
    assert (ws / "cron-jobs.json").read_bytes() == (EXAMPLES / "cron-jobs.json").read_bytes()
    assert stat.S_IMODE((ws / "cron-jobs.json").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "args",
    [
        ["add", "hb", "--every", "15m", "--payload", "heartbeat-event", "--text", "tick", "--wake-mode", "next-heartbeat"],
        ["add", "dl", "--at", "2026-09-22T08:00:00+02:00", "--payload", "delivery", "--text", "hello", "--to",
         "2026_09_21_quiet_euler"],
        ["add", "turn", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--payload", "agent_turn", "--message", "plan",
         "--session-strategy", "rolling", "--max-history-turns", "3", "--continuation", "origin-history",
         "--model", "m1", "--timeout-seconds", "600", "--max-dependency-errors", "3"],
        ["add", "in", "--in", "90", "--payload", "heartbeat-event", "--text", "soon", "--paused"],
    ],
)
def test_added_jobs_pass_the_independent_checker(project, ws, args):
    result = cron(project, *args, "--json")
    assert result.code == 0, (result.out, result.err)
    doc = json.loads(result.out)
    assert set(doc) - {"warnings"} == {"ok", "jobId", "name", "schedule"}  # warnings: only when it warned
    raw = (ws / "cron-jobs.json").read_bytes()
    assert check_store_bytes(raw) == []
    job = json.loads(raw)["jobs"][-1]
    assert job["id"] == doc["jobId"] and job["source"] == "authored"
    assert cron(project, "validate").code == 0


def test_add_resolves_schedules_and_lifecycles(project, ws):
    cron(project, "add", "a", "--in", "90", "--payload", "heartbeat-event", "--text", "x")
    cron(project, "add", "b", "--every", "30m", "--anchor", "2026-09-21T00:00Z", "--payload", "heartbeat-event",
         "--text", "x")
    cron(project, "add", "c", "--cron", "0 9 * * *", "--tz", "America/New_York", "--payload", "heartbeat-event",
         "--text", "x", "--paused")
    jobs = {j["name"]: j for j in store_of(ws)["jobs"]}
    assert jobs["a"]["schedule"] == {"kind": "at", "atMs": NOW + 90_000}
    assert jobs["a"]["lifecycle"] == {"status": "scheduled", "nextRunAtMs": NOW + 90_000, "consecutiveDependencyErrors": 0}
    assert jobs["b"]["schedule"] == {"kind": "every", "everyMs": 1_800_000, "anchorMs": 1789948800000}
    assert jobs["b"]["lifecycle"]["nextRunAtMs"] == 1789975800000  # 07:30 UTC, the next half hour after 07:01:30
    assert jobs["c"]["lifecycle"] == {"status": "paused", "nextRunAtMs": 1789995600000,
                                      "consecutiveDependencyErrors": 0, "reason": "operator"}
    assert "deliveryTarget" not in jobs["a"]


def test_agent_turn_target_defaults_to_live_in_this_project(project, ws):
    cron(project, "add", "t", "--every", "1h", "--payload", "agent-turn", "--text", "go")
    job = store_of(ws)["jobs"][-1]
    endpoint = job["deliveryTarget"]["destinationEndpoint"]
    assert endpoint == {"channelType": "scorpiox-inbox", "channelInstanceId": ".",  # the workspace's own project
                        "conversationId": "live", "conversationKind": "direct"}
    assert job["sessionPolicy"] == {"strategy": "fresh"} and job["continuationMode"] == "none"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["add", "x", "--payload", "heartbeat-event", "--text", "t"], 2, "Invalid cron schedule input"),
        (["add", "x", "--every", "1m", "--in", "5", "--payload", "heartbeat-event", "--text", "t"], 2,
         "Invalid cron schedule input"),
        (["add", "x", "--cron", "61 * * * *", "--payload", "heartbeat-event", "--text", "t"], 2, "Invalid cron expression"),
        (["add", "x", "--cron", "0 0 1 1 * 2030 *", "--payload", "heartbeat-event", "--text", "t"], 2,
         "Invalid cron expression"),
        (["add", "x", "--cron", "0 9 * * *", "--tz", "Mars/Base", "--payload", "heartbeat-event", "--text", "t"], 2,
         "Invalid cron timezone"),
        (["add", "x", "--at", "2026-09-21T06:00:00Z", "--payload", "heartbeat-event", "--text", "t"], 2,
         "One-shot schedule must be in the future"),
        (["add", "x", "--at", "2026-10-25T02:30", "--tz", "Europe/Berlin", "--payload", "heartbeat-event", "--text",
          "t"], 2, "Ambiguous wall-clock timestamp requires earlier or later fold selection"),
        (["add", "x", "--at", "2027-03-28T02:30", "--tz", "Europe/Berlin", "--payload", "heartbeat-event", "--text",
          "t"], 2, "Wall-clock timestamp does not exist in the requested timezone"),
        (["add", "x", "--at", "2026-10-25T02:30Z", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "t"], 2,
         "An offset-bearing timestamp cannot also specify a timezone"),
        (["add", "x", "--in", "5", "--payload", "heartbeat-event", "--text", "t", "--model", "m"], 2,
         "model is valid only for agent_turn payloads"),
        (["add", "x", "--in", "5", "--payload", "delivery", "--text", "t", "--wake-mode", "now"], 2,
         "wake_mode is valid only for heartbeat_event payloads"),
        (["add", "x", "--in", "5", "--payload", "agent-turn", "--text", "t", "--session-strategy", "rolling"], 2,
         "max_history_turns (1-20) is required"),
        (["add", "x", "--in", "5", "--payload", "heartbeat-event"], 2, "payload text is required"),
        (["add", "next-check-in", "--in", "5", "--payload", "heartbeat-event", "--text", "t"], 4,
         'A cron job named "next-check-in" already exists'),
        (["update", "nope", "--text", "x"], 3, "Cron job not found: nope"),
        (["update", "morning-briefing", "--continuation", "none"], 2,
         "session_strategy and continuation_mode cannot be changed; remove and recreate the job"),
        (["update", "morning-briefing", "--payload", "delivery"], 2, "incomplete payload replacement"),
        (["pause", "stretch-reminder"], 4, "Terminal or claimed one-shot jobs cannot be paused or resumed"),
        (["remove", "ci-watch"], 2, "refusing to remove without confirmation: pass --yes"),
    ],
)
def test_refusals_leave_the_store_unchanged(project, ws, args, code, message):
    before = (ws / "cron-jobs.json").read_bytes()
    result = cron(project, *args, "--json")
    assert result.code == code, (result.out, result.err)
    assert message in json.loads(result.out)["error"]["message"]
    assert (ws / "cron-jobs.json").read_bytes() == before


@pytest.mark.parametrize(("answer", "removed"), [("y", True), ("n", False), ("", False)])
def test_remove_on_a_terminal_asks_and_does_what_it_was_told(project, ws, answer, removed):
    """y/N on a terminal (Enter is no); without one it refuses (above); --yes never asks."""
    pexpect = pytest.importorskip("pexpect")
    before = (ws / "cron-jobs.json").read_bytes()
    child = pexpect.spawn(sys.executable, ["-m", "sxctl", "cron", "remove", "ci-watch"], cwd=str(project.root),
                          env=project.env(), timeout=30, encoding="utf-8")
    try:
        child.expect_exact("Remove cron job ci-watch? [y/N]: ")
        child.sendline(answer)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    names = [job["name"] for job in store_of(ws)["jobs"]]
    if removed:
        assert child.exitstatus == 0 and "removed ci-watch" in child.before and "ci-watch" not in names
    else:
        assert child.exitstatus == 2 and "sxctl: not removed" in child.before
        assert (ws / "cron-jobs.json").read_bytes() == before


def test_remove_yes_on_a_terminal_does_not_ask(project, ws):
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(sys.executable, ["-m", "sxctl", "cron", "remove", "ci-watch", "--yes"],
                          cwd=str(project.root), env=project.env(), timeout=30, encoding="utf-8")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "?" not in child.before and "removed ci-watch" in child.before
    assert "ci-watch" not in [job["name"] for job in store_of(ws)["jobs"]]


def test_fold_picks_two_different_instants(project, ws):
    for fold, name in (("earlier", "e"), ("later", "l")):
        result = cron(project, "add", name, "--at", "2026-10-25T02:30", "--tz", "Europe/Berlin", "--fold", fold,
                      "--payload", "heartbeat-event", "--text", "t")
        assert result.code == 0, (result.out, result.err)
    jobs = {j["name"]: j["schedule"].get("atMs") for j in store_of(ws)["jobs"]}
    assert jobs["e"] == 1792888200000  # 2026-10-25T00:30Z (02:30 CEST)
    assert jobs["l"] == 1792891800000  # 2026-10-25T01:30Z (02:30 CET)


def test_capacity_counts_live_authored_jobs(project, ws):
    result = cron(project, "add", "x", "--in", "5", "--payload", "heartbeat-event", "--text", "t", "--max-jobs", "3",
                  "--json")
    assert result.code == 4
    assert json.loads(result.out)["error"] == {
        "code": "capacity", "message": "Authored cron job capacity reached", "exit": 4,
        "hint": "the store holds 3 jobs, the most --max-jobs 3 allows; give a larger --max-jobs, or remove jobs "
                "(`cron remove`)"}


def test_update_schedule_payload_and_rename(project, ws):
    assert cron(project, "update", "stretch-reminder", "--in", "10m").code == 0  # re-arms a finished one-shot
    job = next(j for j in store_of(ws)["jobs"] if j["name"] == "stretch-reminder")
    assert job["lifecycle"] == {"status": "scheduled", "nextRunAtMs": NOW + 600_000, "consecutiveDependencyErrors": 0}
    result = cron(project, "update", "next-check-in", "--payload", "agent-turn", "--text", "now a turn", "--json")
    assert result.code == 0 and json.loads(result.out) == {"ok": True, "jobName": "next-check-in",
                                                                   "updated": True}
    job = store_of(ws)["jobs"][0]
    assert job["payload"] == {"kind": "agent_turn", "message": "now a turn"}
    assert job["sessionPolicy"] == {"strategy": "fresh"} and "deliveryTarget" in job
    assert cron(project, "update", "next-check-in", "--name", "renamed").code == 0
    assert store_of(ws)["jobs"][0]["name"] == "renamed"
    assert check_store_bytes((ws / "cron-jobs.json").read_bytes()) == []


def test_remove_with_yes(project, ws):
    result = cron(project, "remove", "ci-watch", "--yes", "--json")
    assert json.loads(result.out)["removed"] is True
    assert "ci-watch" not in {j["name"] for j in store_of(ws)["jobs"]}


def test_built_in_jobs_are_config_owned(project, ws):
    store = store_of(ws)
    store["jobs"].append({"id": "reflect-default", "name": "reflection", "agentId": "default",
                          "schedule": {"kind": "cron", "expr": "0 3 * * *", "tz": "UTC"},
                          "lifecycle": {"status": "scheduled", "nextRunAtMs": NOW + 1000,
                                        "consecutiveDependencyErrors": 0},
                          "source": "built_in", "payload": {"kind": "internal_action", "action": "reflection"}})
    (ws / "cron-jobs.json").write_bytes((json.dumps(store, separators=(",", ":")) + "\n").encode())
    update = cron(project, "update", "reflection", "--text", "x", "--json")
    assert update.code == 4
    assert json.loads(update.out)["error"]["message"] == \
        "Config-owned cron jobs cannot be updated through cron.update"
    remove = cron(project, "remove", "reflection", "--yes", "--json")
    assert json.loads(remove.out)["error"]["message"] == \
        "Config-owned cron jobs cannot be removed through cron.remove"


def test_active_claim_blocks_edits(project, ws):
    store = store_of(ws)
    job = store["jobs"][0]
    store["activeClaims"].append({"executionId": "e-1", "bootId": "sxctl-x", "jobId": job["id"], "agentId": "default",
                                  "rootRunId": None, "scheduledForMs": NOW, "claimedAtMs": NOW,
                                  "trigger": "scheduled", "workKind": "heartbeat_event"})
    (ws / "cron-jobs.json").write_bytes((json.dumps(store, separators=(",", ":")) + "\n").encode())
    result = cron(project, "update", "next-check-in", "--text", "x", "--json")
    assert result.code == 4 and json.loads(result.out)["error"]["code"] == "active_claim"


# --- invalid stores --------------------------------------------------------------------------

def _mutated(path, edit):
    store = json.loads(path.read_bytes())
    edit(store)
    return (json.dumps(store, separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda s: s["jobs"][0].update(extra=1), "$.jobs[0].extra: unknown key (job 'next-check-in')"),
        (lambda s: s.update(formatVersion=2), "$.formatVersion"),
        (lambda s: s["jobs"][1].update(name="next-check-in"), "job name must be unique"),
        (lambda s: s["jobs"][2]["deliveryTarget"]["conversation"].update(conversationRef="cv_" + "A" * 43),
         "conversationRef: does not match its conversationScope"),
        (lambda s: s["jobs"][0]["lifecycle"].update(nextRunAtMs=1.5), "nextRunAtMs: must be an integer"),
        (lambda s: s["jobs"][0]["payload"].update(wakeMode="later"), "wakeMode"),
        (lambda s: s["jobs"][2]["schedule"].update(tz="Nowhere/City"), "not a known IANA time zone"),
        (lambda s: s["jobs"][0].update(lifecycle={"status": "one_shot_terminal", "terminalExecutionId": "x",
                                                  "terminalAtMs": 1}),
         "one-shot lifecycle is legal only for an at schedule"),
        (lambda s: s["activeClaims"].append({"executionId": "e", "bootId": "b", "jobId": "missing", "agentId": "default",
                                             "rootRunId": None, "scheduledForMs": 1, "claimedAtMs": 1,
                                             "trigger": "manual", "workKind": "heartbeat_event"}),
         "claim must reference an existing job"),
    ],
)
def test_invalid_stores_are_exit_5_naming_path_and_rule_and_never_rewritten(project, ws, edit, needle):
    path = ws / "cron-jobs.json"
    path.write_bytes(_mutated(path, edit))
    before = path.read_bytes()
    for args in (["list"], ["pause", "ci-watch"], ["add", "z", "--in", "5", "--payload", "heartbeat-event", "--text", "t"]):
        result = cron(project, *args, "--json")
        assert result.code == 5, (args, (result.out, result.err))
        error = json.loads(result.out)["error"]
        assert error["file"] == str(path) and needle in error["message"], error
        assert "Cron store does not match the strict format" in error["message"]
    assert path.read_bytes() == before


def test_a_hand_edited_store_and_policy_file_name_the_job_by_its_name_and_keep_the_path(project, ws):
    """#40: the errors said `$.jobs[1]` or `$.jobs['<uuid>']`, never the job a person knows."""
    store = ws / "cron-jobs.json"
    pristine = store.read_bytes()
    store.write_bytes(_mutated(store, lambda s: s["jobs"][1]["schedule"].update(atMs="tomorrow")))
    listed = cron(project, "list")
    assert listed.code == 5 and listed.err.rstrip().endswith(
        "at $.jobs[1].schedule.atMs: must be an integer (job 'stretch-reminder')"), listed.err
    error = cron(project, "list", "--json").json()["error"]
    assert (error["json_path"], error["job"]) == ("$.jobs[1].schedule.atMs", "stretch-reminder")
    assert "(job 'stretch-reminder')" in cron(project, "validate").err
    claim = {"executionId": "e", "bootId": "b", "jobId": "35403677-ce61-4a92-9b82-1d4a220667f1", "agentId": "x",
             "rootRunId": None, "scheduledForMs": 1, "claimedAtMs": 1, "trigger": "manual", "workKind": "agent_turn"}
    store.write_bytes(_mutated(store, lambda s: (s["jobs"][1]["schedule"].update(atMs=1), s["activeClaims"].append(claim))))
    assert "at $.activeClaims[0]: claim identity must match its job (job 'ci-watch')" in cron(project, "list").err
    store.write_bytes(_mutated(store, lambda s: s["jobs"][1].update(name="\x1b[2J" + "x" * 300, extra=1)))
    unreadable = cron(project, "list", "--json").json()["error"]  # a name no message should carry: the path alone
    assert unreadable["message"].endswith("at $.jobs[1].extra: unknown key") and unreadable["job"] is None
    store.write_bytes(pristine)
    policy = ws / "sxctl-policy.json"
    policy.write_text(json.dumps({"formatVersion": 1, "jobs": {"35403677-ce61-4a92-9b82-1d4a220667f1": {
        "untilMs": "friday"}}}))
    error = cron(project, "list", "--json").json()["error"]
    assert error["message"].endswith("$.jobs['35403677-ce61-4a92-9b82-1d4a220667f1'].untilMs: must be an integer "
                                     "(job 'ci-watch')") and error["job"] == "ci-watch"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json\n", "Cron store contains invalid JSON"),
     (b'[{"id":"legacy"}]\n', "legacy comis store (array format); not supported"),
     (b'{"formatVersion":1,"formatVersion":1,"agentSchedulerSeed":"s","jobs":[],"activeClaims":[]}\n',
      "Cron store contains invalid JSON")],
)
def test_unparseable_and_legacy_stores(project, ws, content, message):
    (ws / "cron-jobs.json").write_bytes(content)
    result = project.run("cron", "list")
    assert result.code == 5 and message in result.err and "Traceback" not in result.err
    assert (ws / "cron-jobs.json").read_bytes() == content


# --- init, locks, daemon ---------------------------------------------------------------------

def test_init_creates_what_is_missing_and_never_overwrites(project):
    result = project.run("cron", "init", "--json")
    scheduler = project.root / ".scheduler"
    assert result.code == 0 and len(result.json()["created"]) == 5
    assert stat.S_IMODE(scheduler.stat().st_mode) == 0o700
    for name in ("cron-jobs.json", "cron-executions.jsonl", "cron-jobs.lock", "cron-executions.lock"):
        assert stat.S_IMODE((scheduler / name).stat().st_mode) == 0o600
    raw = (scheduler / "cron-jobs.json").read_bytes()
    assert check_store_bytes(raw) == [] and json.loads(raw)["jobs"] == []
    assert (scheduler / "cron-executions.jsonl").read_bytes() == b""
    again = project.run("cron", "init", "--json")
    assert again.json()["created"] == [] and (scheduler / "cron-jobs.json").read_bytes() == raw


@pytest.mark.real_time
def test_held_lock_makes_a_mutation_wait_then_exit_4(project, ws):
    (ws / "cron-jobs.lock").touch()
    lockdir = ws / "cron-jobs.lock.lock"
    lockdir.mkdir()
    started = time.monotonic()
    result = project.run("cron", "pause", "ci-watch", "--lock-wait", "1", "--json")
    waited = time.monotonic() - started
    assert result.code == 4 and result.json()["error"]["code"] == "lock_busy"
    assert str(lockdir) in result.json()["error"]["message"] and waited >= 1
    assert lockdir.is_dir()  # not ours to remove


def test_stale_lock_is_taken_over(project, ws):
    (ws / "cron-jobs.lock").touch()
    lockdir = ws / "cron-jobs.lock.lock"
    lockdir.mkdir()
    old = time.time() - 60
    os.utime(lockdir, (old, old))
    result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0")
    assert result.code == 0, result.err
    assert not lockdir.exists() and not (ws / "cron-jobs.lock.owner").exists()


def test_lock_of_a_dead_sxctl_holder_is_taken_over_at_once(project, ws):
    import socket

    (ws / "cron-jobs.lock").touch()
    lockdir = ws / "cron-jobs.lock.lock"
    lockdir.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stamp = (time.time_ns() // 1_000_000_000) * 1_000_000_000 + 123_457
    os.utime(lockdir, ns=(stamp, stamp))  # the holder's mark
    (ws / "cron-jobs.lock.owner").write_text(json.dumps({
        "pid": dead.pid, "host": socket.gethostname(), "bootId": "sxctl-dead", "acquired_ms": 0,
        "mtimeNanos": 123_457}))
    result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0")
    assert result.code == 0, result.err


def test_a_dead_holders_note_never_matches_a_directory_made_later(project, ws):
    """The inode of a removed lock directory is reused by the next mkdir (a comis holder's, say):
    the dead sxctl holder's note must not make sxctl take that live lock."""
    import socket

    (ws / "cron-jobs.lock").touch()
    lockdir = ws / "cron-jobs.lock.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lockdir.mkdir()
    (ws / "cron-jobs.lock.owner").write_text(json.dumps({
        "pid": dead.pid, "host": socket.gethostname(), "bootId": "sxctl-dead",
        "acquired_ms": time.time_ns() // 1_000_000 - 40_000, "mtimeNanos": 123_457, "inode": lockdir.stat().st_ino}))
    comis_now = time.time_ns() // 1_000_000 * 1_000_000  # comis refreshes with millisecond precision
    os.utime(lockdir, ns=(comis_now, comis_now))
    result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0")
    assert result.code == 4 and "locked by another process" in result.err
    assert lockdir.is_dir()


def test_lost_lock_aborts_before_the_rename(project, ws):
    from sxctl.cron.store.file import store_lock, write_store
    from sxctl.cron.store.workspace import Workspace
    from sxctl.errors import ConflictError

    workspace = Workspace(project.root)
    before = (ws / "cron-jobs.json").read_bytes()
    with store_lock(workspace, "sxctl-test") as lock:
        os.rmdir(lock.lockdir)  # another process decided we were stale and took the lock over
        os.mkdir(lock.lockdir)
        with pytest.raises(ConflictError) as info:
            write_store(workspace, json.loads(before), lock)
        assert info.value.code == "lock_lost"
    assert (ws / "cron-jobs.json").read_bytes() == before
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []
    assert (ws / "cron-jobs.lock.lock").is_dir()  # the new holder's lock is left alone


@pytest.fixture
def fake_daemon(project):
    """A live process whose command line mentions comis, named by ~/.comis/.daemon.lock."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(120)", "comis-daemon"],
                            stdout=subprocess.PIPE)
    proc.stdout.readline()  # its command line is the one that names comis only once it runs
    comis = project.home / ".comis"
    (comis / "workspace").mkdir(parents=True)
    (comis / ".daemon.lock").write_text(str(proc.pid))
    yield comis
    proc.kill()
    proc.wait()


def test_live_daemon_refuses_mutations_but_allows_reads(project, fake_daemon):
    workspace = fake_daemon / "workspace"
    env = project.env(SXCTL_WORKSPACE=str(workspace))
    result = project.run("cron", "init", "--json", env=env)
    assert result.code == 4
    error = result.json()["error"]
    assert error["code"] == "daemon_owns_workspace"
    assert "owns this workspace. It caches the store in memory" in error["message"]
    assert "~/.comis/.daemon.lock" in error["message"]
    assert not (workspace / ".scheduler").exists()
    assert project.run("cron", "list", env=env).code == 0
    status = project.run("cron", "status", "--json", env=env).json()
    assert status["owner"] == "comis-daemon" and status["daemon"]["owns_workspace"] is True
    # a workspace elsewhere only gets a warning
    elsewhere = project.run("cron", "init", env=project.env())
    assert elsewhere.code == 0 and "does not own" in elsewhere.err


def test_dead_daemon_lock_is_ignored(project):
    comis = project.home / ".comis"
    (comis / "workspace").mkdir(parents=True)
    (comis / ".daemon.lock").write_text("999999")
    env = project.env(SXCTL_WORKSPACE=str(comis / "workspace"))
    assert project.run("cron", "init", env=env).code == 0


def test_reset_intent_blocks_mutations(project, ws):
    (ws / "cron-reset-intent.json").write_text('{"opId":"x"}')
    result = project.run("cron", "pause", "ci-watch", "--json")
    assert result.code == 4 and result.json()["error"]["code"] == "reset_intent"
    assert project.run("cron", "status", "--json").json()["intent"]["status"] == "pending"


def test_status_reports_evidence(project, ws):
    (ws / "cron-jobs.json.0123.tmp").write_text("stray")
    doc = json.loads(cron(project, "status", "--json").out)
    assert doc["store"]["exists"] and doc["store"]["bytes"] == len((ws / "cron-jobs.json").read_bytes())
    import hashlib

    assert doc["ledger"]["digest"] == hashlib.sha256((ws / "cron-executions.jsonl").read_bytes()).hexdigest()
    assert doc["strictAuthoritiesValid"] is True and doc["jobCount"] == 4 and doc["activeClaimCount"] == 0
    assert doc["owner"] == "none" and doc["intent"] == {"status": "none"}
    assert any(p["code"] == "stray_temp" for p in doc["problems"])
    assert (ws / "cron-jobs.json.0123.tmp").exists()


def test_wake_drops_an_auto_message_into_the_live_session(project, ws):
    folder = project.session()
    result = project.run("cron", "wake", "--json")
    doc = result.json()
    assert result.code == 0 and doc["status"] == "accepted" and doc["session"] == folder.name
    message = json.loads((folder / "inbox" / f"{doc['stem']}.json").read_text())
    assert message == {"text": "Scheduler wake: check pending scheduled work.", "mode": "auto"}
    assert project.run("cron", "wake", "--target", "monitoring", "--json").json()["error"]["code"] == "unsupported"


@pytest.mark.real_time
def test_the_lock_is_refreshed_while_held(project, ws, monkeypatch):
    from sxctl import locks
    from sxctl.cron.store.file import store_lock
    from sxctl.cron.store.workspace import Workspace

    monkeypatch.setattr(locks, "REFRESH_EVERY_S", 0.05)
    with store_lock(Workspace(project.root), "sxctl-test") as lock:
        acquired = os.stat(lock.lockdir).st_mtime_ns
        deadline = time.monotonic() + 5
        while os.stat(lock.lockdir).st_mtime_ns == acquired and time.monotonic() < deadline:
            time.sleep(0.05)  # the mark moves once a second
        refreshed = os.stat(lock.lockdir).st_mtime_ns
        assert refreshed > acquired  # the background thread touched it …
        assert refreshed % 1_000_000_000 == acquired % 1_000_000_000  # … keeping the holder's mark
        lock.check_held()
        note = json.loads((ws / "cron-jobs.lock.owner").read_text())
        assert note["bootId"] == "sxctl-test" and note["pid"] == os.getpid()
    assert not (ws / "cron-jobs.lock.lock").exists() and not (ws / "cron-jobs.lock.owner").exists()


@pytest.mark.real_time
def test_one_lock_made_into_a_link_loop_stops_no_other_locks_refresh(project, ws, monkeypatch, tmp_path):
    """One thread refreshes every lock a process holds: a lock folder replaced by a link loop
    made it die (ELOOP, a traceback on stderr), and the process's other locks went stale."""
    from sxctl import locks

    monkeypatch.setattr(locks, "REFRESH_EVERY_S", 0.05)
    (tmp_path / "a").touch()
    first = locks.MkdirLock(tmp_path / "a", boot_id="sxctl-test", wait_s=0, what="a")
    second = locks.MkdirLock(tmp_path / "b", boot_id="sxctl-test", wait_s=0, what="b")
    with first, second:
        assert first.lockdir is not None and second.lockdir is not None
        os.rmdir(first.lockdir)
        os.symlink(first.lockdir, first.lockdir)  # a loop: stat raises ELOOP
        marked = os.stat(second.lockdir).st_mtime_ns
        deadline = time.monotonic() + 5
        while os.stat(second.lockdir).st_mtime_ns == marked and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.stat(second.lockdir).st_mtime_ns > marked  # still refreshed
        second.check_held()
        with pytest.raises(locks.ConflictError) as lost:
            first.check_held()
        assert lost.value.code == "lock_lost"
        os.unlink(first.lockdir)


CLOCK_LAG_MS = 30  # seen on this machine: a quarter of mkdirs are stamped more than 5 ms behind time.time()


def test_holder_killed_right_after_mkdir_is_recognised_by_its_prepared_note(project, ws):
    import socket

    (ws / "cron-jobs.lock").touch()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    acquired = time.time_ns() // 1_000_000  # it prepared its note …
    (ws / "cron-jobs.lock.lock").mkdir()  # … made the directory (stamped by a coarser clock) and died
    stamp = (acquired - CLOCK_LAG_MS) * 1_000_000
    os.utime(ws / "cron-jobs.lock.lock", ns=(stamp, stamp))
    (ws / f"cron-jobs.lock.owner.{dead.pid}-00ff.tmp").write_text(json.dumps({  # the note it never published
        "pid": dead.pid, "host": socket.gethostname(), "bootId": "sxctl-dead", "acquired_ms": acquired,
        "mtimeNanos": 123_457}))
    result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0")
    assert result.code == 0, result.err
    assert not (ws / f"cron-jobs.lock.owner.{dead.pid}-00ff.tmp").exists()
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []


def test_holder_killed_between_its_mark_and_its_note_is_recognised_by_the_mark(project, ws):
    """The mark dates the directory up to a second before the note was prepared: a holder killed
    between the two kept every pass out for 30 s (`lock_busy` in the SIGKILL tests, 1 run in 10
    under load)."""
    import socket

    (ws / "cron-jobs.lock").touch()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    acquired = time.time_ns() // 1_000_000  # it prepared its note, made the directory, marked it …
    (ws / "cron-jobs.lock.lock").mkdir()
    nanos = 987_654_321
    mark = (acquired * 1_000_000 - 900_000_000) // 1_000_000_000 * 1_000_000_000 + nanos  # 0.1-1.9 s back
    os.utime(ws / "cron-jobs.lock.lock", ns=(mark, mark))
    (ws / f"cron-jobs.lock.owner.{dead.pid}-00ee.tmp").write_text(json.dumps({  # … and died before publishing
        "pid": dead.pid, "host": socket.gethostname(), "bootId": "sxctl-dead", "acquired_ms": acquired,
        "mtimeNanos": nanos}))
    result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0")
    assert result.code == 0, result.err


def test_a_pass_checks_and_encodes_only_what_it_changed_and_misses_nothing_it_could_break():
    """The fast path of a scheduler pass's store writes: bytes equal to the full encoding, and
    every rule a changed job or a claim can break still refused."""
    import copy

    from sxctl.cron.store.file import _encode_reusing
    from sxctl.cron.store.schema import canonical_store, validate_store
    from sxctl.cron.store.schema_kit import SchemaError
    from sxctl.jsondata import compact_json

    store = canonical_store(json.loads((EXAMPLES / "cron-jobs.json").read_text()))
    validate_store(store)
    first = store["jobs"][0]
    first["lifecycle"]["nextRunAtMs"] += 60_000
    encoded: dict = {}
    for _ in range(2):  # the second write reuses the first's bytes
        assert _encode_reusing(canonical_store(store, {first["id"]}), {first["id"]}, encoded) == compact_json(
            canonical_store(store))
    validate_store(store, {first["id"]})
    broken = [
        lambda s: s["jobs"][0]["lifecycle"].update(nextRunAtMs=-1),
        lambda s: s["jobs"][0].update(name=s["jobs"][1]["name"]),
        lambda s: s["activeClaims"].append({"executionId": "e", "bootId": "b", "jobId": "nope", "agentId": "default",
                                            "rootRunId": None, "scheduledForMs": 1, "claimedAtMs": 1,
                                            "trigger": "scheduled", "workKind": "heartbeat_event"}),
        lambda s: s["activeClaims"].append({"executionId": "e", "bootId": "b", "jobId": s["jobs"][0]["id"],
                                            "agentId": "someone-else", "rootRunId": None, "scheduledForMs": 1,
                                            "claimedAtMs": 1, "trigger": "scheduled",
                                            "workKind": work_kind(s["jobs"][0])}),
    ]
    for breaks in broken:
        changed = copy.deepcopy(store)
        breaks(changed)
        with pytest.raises(SchemaError):
            validate_store(changed, {first["id"]})
        with pytest.raises(SchemaError):
            validate_store(changed)


def work_kind(job):
    from sxctl.cron.store.schema import work_kind_of

    return work_kind_of(job)

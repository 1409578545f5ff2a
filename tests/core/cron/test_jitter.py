"""Deterministic jitter (`--jitter`): each job runs a fixed offset after its due time, the same on
every pass and after any restart, and comis's stored `nextRunAtMs` is never moved by it."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from tests.core.cron.test_scheduling import MIN, NINE

from . import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

DAY = 24 * 60 * MIN


def offset(job_id: str, jitter_ms: int) -> int:
    """The offset, computed here independently of sxctl: SHA-256 of the id, first 8 bytes."""
    return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") % jitter_ms


def _jobs(sched, count: int, first: int = 0) -> dict[str, dict]:
    for index in range(first, first + count):
        sched.add(NINE - 60 * MIN, f"j{index}", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "delivery",
                  "--text", f"job {index}", "--jitter", "30m")
    listing = sched.run(NINE - 60 * MIN, "cron", "list", "--json").json()
    return {row["job"]["name"]: {**row, "id": row["job"]["id"]} for row in listing["jobs"]}


def test_jobs_due_together_run_spread_over_their_window_once_each_and_keep_comis_next_run(sched):
    jobs = _jobs(sched, 8)
    offsets = {name: offset(row["id"], 30 * MIN) for name, row in jobs.items()}
    assert {name: row["policy"]["jitterOffsetMs"] for name, row in jobs.items()} == offsets
    assert all(row["policy"]["jitterMs"] == 30 * MIN for row in jobs.values())
    assert len(set(offsets.values())) == len(offsets)  # spread, not all at 09:00
    policy = json.loads(sched.policy_file.read_text())
    assert policy["formatVersion"] == 3
    env = sched.env(SXCTL_DELIVER_CMD="cat > /dev/null")
    ran: dict[str, int] = {}
    for minute in range(0, 32):
        now = NINE + minute * MIN
        result = sched.run(now, "cron", "tick", "--json", "--max-per-pass", "100", env=env)
        assert result.code == 0, result.err
        for run in result.json()["runs"]:
            assert run["name"] not in ran  # once
            assert run["trigger"] == "scheduled" and run["scheduledForMs"] == NINE
            ran[run["name"]] = now
        store = json.loads((sched.root / ".scheduler" / "cron-jobs.json").read_text())
        for job in store["jobs"]:  # what comis computes: 09:00 until claimed, then tomorrow's 09:00
            expected = NINE + DAY if job["name"] in ran else NINE
            assert job["lifecycle"]["nextRunAtMs"] == expected
    assert set(ran) == set(jobs)
    for name, at in ran.items():  # the first pass (a minute apart) at or after its jittered time
        assert at - MIN < NINE + offsets[name] <= at


def test_a_restart_inside_the_window_loses_no_run_and_the_offset_is_the_same_next_day(sched):
    jobs = _jobs(sched, 3)
    env = sched.env(SXCTL_DELIVER_CMD="cat > /dev/null")
    latest = max(offset(row["id"], 30 * MIN) for row in jobs.values())
    sched.run(NINE, "cron", "tick", "--json", env=env)  # then no pass (a restart) until past the window
    report = sched.run(NINE + latest + 5 * MIN, "cron", "tick", "--json", env=env).json()
    assert sorted(run["name"] for run in report["runs"]) == sorted(
        name for name, row in jobs.items() if offset(row["id"], 30 * MIN) > 0)
    upcoming = sched.run(NINE + 40 * MIN, "cron", "next", "--json", "-n", "3").json()["fires"]
    assert {f["name"]: f["at_ms"] for f in upcoming} == {
        name: NINE + DAY + offset(row["id"], 30 * MIN) for name, row in jobs.items()}


def test_cron_next_and_show_preview_the_jittered_time_and_status_is_not_overdue_inside_the_window(sched):
    jobs = _jobs(sched, 1)
    shift = offset(jobs["j0"]["id"], 30 * MIN)
    fires = sched.run(NINE - 60 * MIN, "cron", "next", "--json", "-n", "2").json()["fires"]
    assert [f["at_ms"] for f in fires] == [NINE + shift, NINE + DAY + shift]
    shown = sched.run(NINE - 60 * MIN, "cron", "show", "j0")
    assert "jitter 30m0s" in shown.out



def test_inside_its_jitter_window_a_job_is_not_overdue_anywhere(sched):
    jobs: dict[str, dict] = {}
    shift = 0
    while shift <= 4 * MIN:  # ids are random: add jobs until one's offset is past 4 of the 30 minutes
        assert len(jobs) < 60, "60 random ids, every offset under 4 minutes"
        jobs = _jobs(sched, 1, first=len(jobs))
        name, shift = max(((n, offset(row["id"], 30 * MIN)) for n, row in jobs.items()), key=lambda pair: pair[1])
    at = NINE + shift - MIN  # due at 09:00 for comis, run by the pass at 09:00 + shift
    sched.agent_at(at)
    status = sched.run(at, "status", "--json").json()
    assert name not in status["cron"]["overdue"] and status["cron"]["next_due_ms"] == NINE + min(
        offset(row["id"], 30 * MIN) for row in jobs.values())
    doctor = sched.run(at, "doctor", "--json").json()
    assert not [c for c in doctor["checks"] if c["check"] == "overdue" and name in c["message"]]
    problems = sched.run(at, "cron", "status", "--json").json()["problems"]
    assert not [p for p in problems if p["code"] == "overdue" and name in p["message"]]
    late = sched.run(NINE + shift + 3 * MIN, "cron", "status", "--json").json()["problems"]
    assert [p for p in late if p["code"] == "overdue" and name in p["message"]]


def test_jitter_values_are_checked_and_zero_clears_it(sched):
    sched.add(NINE, "often", "--every", "10m", "--payload", "delivery", "--text", "x")
    too_long = sched.run(NINE, "cron", "update", "often", "--jitter", "10m")
    assert too_long.code == 2 and "--jitter 10m must be shorter" in too_long.err and "its runs are 10m apart" in too_long.err
    assert sched.run(NINE, "cron", "update", "often", "--jitter", "8d").code == 2
    assert sched.run(NINE, "cron", "update", "often", "--jitter", "5m").code == 0
    assert json.loads(sched.policy_file.read_text())["formatVersion"] == 3
    assert sched.run(NINE, "cron", "update", "often", "--jitter", "0").code == 0
    assert sched.job("often")["policy"] is None or sched.job("often")["policy"]["jitterMs"] is None


def test_a_hand_edited_jitter_as_long_as_the_period_fails_validate(sched):
    """`cron update --jitter` refuses it; a policy file edited by hand was called valid."""
    sched.add(NINE, "often", "--every", "10m", "--payload", "delivery", "--text", "x", "--jitter", "1m")
    assert sched.run(NINE, "cron", "validate").code == 0
    doc = json.loads(sched.policy_file.read_text())
    [entry] = doc["jobs"].values()
    entry["jitterMs"] = 10 * MIN
    sched.policy_file.write_text(json.dumps(doc))
    result = sched.run(NINE, "cron", "validate", "--json")
    assert result.code == 5
    [problem] = [p for p in result.json()["problems"] if p["code"] == "invalid_jitter"]
    assert problem["file"] == str(sched.policy_file) and "jitterMs 10m must be shorter" in problem["message"]


def test_an_older_format_holding_jitter_is_refused_not_dropped(sched):
    sched.add(NINE, "often", "--every", "10m", "--payload", "delivery", "--text", "x", "--jitter", "1m")
    doc = json.loads(sched.policy_file.read_text())
    doc["formatVersion"] = 2
    sched.policy_file.write_text(json.dumps(doc))
    result = sched.run(NINE, "cron", "tick")
    assert result.code == 5 and "formatVersion 3" in result.err


def test_cron_simulate_runs_each_job_at_its_jittered_time(sched):
    jobs = _jobs(sched, 3)
    result = sched.run(NINE - 60 * MIN, "cron", "simulate", "--from", "2026-12-01T08:59Z", "--until",
                       "2026-12-01T09:40Z", "--tz", "UTC", "--pass-every", "1m", "--json",
                       env=sched.env(SXCTL_DELIVER_CMD="cat > /dev/null"))
    assert result.code == 0, result.err
    passes = {e["job"]: e["pass_ms"] for e in result.json()["events"] if e["fate"] == "dispatched"}
    assert set(passes) == set(jobs)
    for name, row in jobs.items():
        due = NINE + offset(row["id"], 30 * MIN)
        assert due <= passes[name] < due + MIN


def test_cron_next_from_a_time_counts_the_jittered_runs_from_then(sched):
    jobs = _jobs(sched, 1)
    shift = offset(jobs["j0"]["id"], 30 * MIN)

    def first_from(ms: int) -> int:
        iso = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        result = sched.run(NINE - 60 * MIN, "cron", "next", "--json", "-n", "1", "--from", iso)
        assert result.code == 0, result.err
        return result.json()["fires"][0]["at_ms"]

    assert first_from(NINE + DAY) == NINE + DAY + shift  # the occurrence at 09:00 runs at 09:00 + shift
    assert first_from(NINE + DAY + shift + 1) == NINE + 2 * DAY + shift


def test_a_run_on_time_by_its_jittered_time_spends_no_catch_up_budget(sched):
    """--max-catchup counts catch-ups by the jittered due time, as the run's trigger does: a job
    due at 09:00 with an offset of 1m is on time at 09:02, not a catch-up to defer."""
    for index in range(10):
        sched.add(NINE - 60 * MIN, f"j{index}", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "delivery",
                  "--text", f"job {index}", "--jitter", "2m")
    listing = sched.run(NINE - 60 * MIN, "cron", "list", "--json").json()["jobs"]
    offsets = {row["job"]["name"]: offset(row["job"]["id"], 2 * MIN) for row in listing}
    now = NINE + 2 * MIN + 1000
    on_time = sorted(name for name, shift in offsets.items() if now - (NINE + shift) <= 90_000)
    assert len(on_time) >= 2  # 10 offsets in [0, 2m): the chance of fewer than 2 past 31s is about 1e-5
    result = sched.run(now, "cron", "tick", "--json", "--max-per-pass", "100", "--max-catchup", "1",
                       env=sched.env(SXCTL_DELIVER_CMD="cat > /dev/null"))
    assert result.code == 0, result.err
    report = result.json()
    scheduled = sorted(run["name"] for run in report["runs"] if run["trigger"] == "scheduled")
    assert scheduled == on_time
    assert len([run for run in report["runs"] if run["trigger"] == "catchup"]) == min(1, 10 - len(on_time))
    assert not [row for row in report["deferred"] if row["name"] in on_time]


def test_a_deferred_catch_up_counts_only_the_occurrences_whose_jittered_time_came(sched):
    """Attacker: `deferred c7: 3 occurrences, 01:00–03:00` at 03:01 for an hourly job whose
    --jitter offset is 14m38s: 03:00 was not due before 03:14:38 (the run that followed stood for
    2). A held or deferred row counts what the run would stand for."""
    start = NINE - 9 * 60 * MIN  # 00:00
    for name in ("a", "b"):
        sched.add(start, name, "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event", "--text", name,
                  "--jitter", "20m")
    ids = {row["job"]["name"]: row["job"]["id"] for row in sched.run(start, "cron", "list", "--json").json()["jobs"]}
    now = start + 3 * 60 * MIN + 10_000  # 03:00:10, after three hours without a pass
    sched.agent_at(now)
    report = sched.run(now, "cron", "tick", "--json", "--max-catchup", "1").json()
    [deferred] = [row for row in report["outcomes"] if row["fate"] == "deferred"]
    shift = offset(ids[deferred["name"]], 20 * MIN)
    due = [hour for hour in (1, 2, 3) if start + hour * 60 * MIN + shift <= now]
    assert deferred["count"] == len(due), (deferred, shift)

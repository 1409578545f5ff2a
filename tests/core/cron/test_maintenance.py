"""Maintenance windows (`cron pause [NAME | --all] --until TIME --reason TEXT`): the occurrences
inside a window are skipped (reason `maintenance`) and never caught up, the jobs run again by
themselves after it, and status, doctor, the previews and `cron simulate` show it."""

from __future__ import annotations

import json

from tests.core.cron.test_scheduling import MIN, NINE, SID

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

HOUR = 60 * MIN
UNTIL = "2026-12-01T12:30Z"


def _hourly(sched, *names: str) -> None:
    sched.folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        sched.add(NINE - MIN, name, "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
                  "--text", name, "--to", SID)


def _window(sched, at: int, *target: str, until: str = UNTIL, reason: str = "db migration"):
    return sched.run(at, "cron", "pause", *target, "--until", until, "--reason", reason, "--json")


def _skips(report) -> list[tuple[str, str, int, int]]:
    return [(s["name"], s["reason"], s["count"], s["firstMs"]) for s in report["skippedOccurrences"]]


def test_a_windows_occurrences_are_skipped_not_caught_up_and_the_jobs_resume_after_it(sched):
    _hourly(sched, "beat")
    assert [r["trigger"] for r in sched.tick(NINE)["runs"]] == ["scheduled"]
    opened = _window(sched, NINE + 30 * MIN, "--all")
    assert opened.code == 0, opened.err
    assert opened.json()["maintenance"] == {"fromMs": NINE + 30 * MIN, "untilMs": NINE + 3 * HOUR + 30 * MIN,
                                            "reason": "db migration"}
    assert json.loads(sched.policy_file.read_text())["formatVersion"] == 3
    report = sched.tick(NINE + HOUR)  # inside the window
    assert report["runs"] == [] and _skips(report) == [("beat", "maintenance", 1, NINE + HOUR)]
    assert "skipped beat: " in sched.run(NINE + 2 * HOUR, "cron", "tick").out  # (maintenance)
    report = sched.tick(NINE + 3 * HOUR + 45 * MIN)  # the 12:00 one: missed, inside the window, not caught up
    assert report["runs"] == [] and _skips(report) == [("beat", "maintenance", 1, NINE + 3 * HOUR)]
    [run] = sched.tick(NINE + 4 * HOUR)["runs"]  # after the window: by itself, on time, no catch-up note
    assert (run["trigger"], run["scheduledForMs"], run.get("skipped_occurrences")) == ("scheduled", NINE + 4 * HOUR,
                                                                                        None)
    assert [m["text"] for m in sched.pending()] == ["beat", "beat"]
    assert "maintenance" not in json.loads(sched.policy_file.read_text())  # over: the pass dropped it
    skips = sched.job("beat")["policy"]["skips"]
    assert skips["total"] == 3 and {s["reason"] for s in skips["recent"]} == {"maintenance"}


def test_no_pass_during_the_window_still_catches_nothing_up(sched):
    _hourly(sched, "beat")
    sched.tick(NINE)
    assert _window(sched, NINE + 30 * MIN, "--all").code == 0
    report = sched.tick(NINE + 3 * HOUR + 40 * MIN)  # the first pass after a window with no pass at all
    assert report["runs"] == [] and _skips(report) == [("beat", "maintenance", 3, NINE + HOUR)]
    assert sched.job("beat")["job"]["lifecycle"]["nextRunAtMs"] == NINE + 4 * HOUR


def test_a_jobs_own_window_skips_only_it_and_resume_ends_it_early(sched):
    _hourly(sched, "beat", "other")
    assert len(sched.tick(NINE)["runs"]) == 2
    assert _window(sched, NINE + 30 * MIN, "beat").code == 0
    shown = sched.job("beat")
    assert shown["policy"]["maintenance"]["reason"] == "db migration"
    assert "maintenance until 2026-12-01 12:30 UTC: db migration" in sched.run(NINE + 30 * MIN, "cron", "show",
                                                                               "beat").out
    report = sched.tick(NINE + HOUR)
    assert [r["name"] for r in report["runs"]] == ["other"] and _skips(report) == [("beat", "maintenance", 1,
                                                                                    NINE + HOUR)]
    ended = sched.run(NINE + HOUR + MIN, "cron", "resume", "beat", "--json")
    assert ended.code == 0, ended.err
    assert sched.job("beat")["policy"]["maintenance"] is None
    assert sorted(r["name"] for r in sched.tick(NINE + 2 * HOUR)["runs"]) == ["beat", "other"]


def test_a_one_shot_in_a_window_waits_and_runs_after_it(sched):
    sched.folder.mkdir(parents=True)
    sched.add(NINE - MIN, "once", "--at", "2026-12-01T10:00Z", "--payload", "agent-turn", "--text", "x", "--to", SID)
    assert _window(sched, NINE, "--all").code == 0
    assert sched.tick(NINE + HOUR)["runs"] == []
    [row] = sched.run(NINE + HOUR, "cron", "list", "--json").json()["jobs"]
    assert row["next_note"] == "maintenance until 2026-12-01 12:30 UTC: db migration"
    [run] = sched.tick(NINE + 3 * HOUR + 31 * MIN)["runs"]
    assert (run["name"], run["trigger"]) == ("once", "catchup")


def test_status_doctor_previews_and_simulate_show_the_window(sched):
    _hourly(sched, "beat")
    assert _window(sched, NINE - 30 * MIN, "--all").code == 0
    at = NINE + MIN
    status = sched.run(at, "--session", SID, "status", "--json").json()
    [window] = status["cron"]["maintenance"]
    assert (window["scope"], window["untilMs"], window["reason"]) == ("all", NINE + 3 * HOUR + 30 * MIN,
                                                                       "db migration")
    [problem] = [p for p in status["problems"] if p["code"] == "cron_maintenance"]
    assert "every cron job: maintenance until 2026-12-01 12:30 UTC: db migration" in problem["message"]
    assert "db migration" in sched.run(at, "--session", SID, "status").out
    checks = sched.run(at, "--session", SID, "doctor", "--json").json()["checks"]
    [check] = [c for c in checks if c["check"] == "maintenance"]
    assert check["status"] == "warn" and check["fix"] == "sxctl cron resume --all"
    listing = sched.run(at, "cron", "list", "--json").json()
    assert listing["workspacePolicy"]["maintenance"]["reason"] == "db migration"
    [row] = listing["jobs"]
    assert row["next_run_ms"] == NINE + 4 * HOUR
    assert row["next_note"] == "maintenance until 2026-12-01 12:30 UTC: db migration"
    fires = sched.run(at, "cron", "next", "-n", "2", "--json").json()["fires"]
    assert [f["at_ms"] for f in fires] == [NINE + 4 * HOUR, NINE + 5 * HOUR] and fires[0]["skipped_before"] == 4
    assert "workspace: maintenance until" in sched.run(at, "cron", "show", "beat").out
    upcoming = [r for r in sched.run(at, "--session", SID, "next", "--json").json()["rows"] if r["source"] == "cron"]
    assert upcoming[0]["at_ms"] == NINE + 4 * HOUR and upcoming[0]["note"].startswith("maintenance until")
    result = sched.run(at, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T14:00Z",
                       "--pass-every", "1h", "--json")
    assert result.code == 0, result.err
    fates = [(e["occurrence_ms"], e["fate"], e["reason"]) for e in result.json()["events"]]
    assert fates == [(NINE + h * HOUR, "skipped", "maintenance") for h in range(4)] + [
        (NINE + 4 * HOUR, "dispatched", None), (NINE + 5 * HOUR, "dispatched", None)]
    after = sched.run(NINE + 4 * HOUR, "--session", SID, "status", "--json").json()
    assert after["cron"]["maintenance"] == [] and "cron_maintenance" not in [p["code"] for p in after["problems"]]
    assert sched.run(NINE + 4 * HOUR, "cron", "resume", "--all").code == 0
    assert "maintenance" not in json.loads(sched.policy_file.read_text())


def test_bad_windows_are_refused_with_the_value_named(sched):
    _hourly(sched, "beat")
    result = _window(sched, NINE, "--all", reason="db\x1b]52;c;aGk=\x07 migration")
    assert result.code == 2 and "U+001B" in result.out and "\x1b" not in result.out
    assert _window(sched, NINE, "--all", reason="line\nbreak").code == 2
    assert _window(sched, NINE, "--all", reason=" ").code == 2
    assert _window(sched, NINE, "--all", until="2026-12-01T08:00Z").code == 2  # in the past
    result = _window(sched, NINE, "--all", until="someday")
    assert result.code == 2 and "someday" in result.out
    assert sched.run(NINE, "cron", "pause", "--all").code == 2  # a window ends: --until is needed
    assert sched.run(NINE, "cron", "pause", "beat", "--all", "--until", UNTIL, "--reason", "x").code == 2
    assert sched.run(NINE, "cron", "pause").code == 2
    far = _window(sched, NINE, "beat", until="99999999999h")  # it named the store's field ($.jobs[…].untilMs)
    assert far.code == 2 and far.json()["error"]["message"].startswith("--until 99999999999h is too far in the future")
    alone = sched.run(NINE, "cron", "pause", "beat", "--reason", "x")  # it said "--all and --reason need …"
    assert alone.code == 2 and alone.err.startswith("sxctl: --reason needs --until TIME (a maintenance window for beat")
    assert not sched.policy_file.exists()


def test_a_second_window_says_which_open_one_it_replaces(sched):
    _hourly(sched, "beat")
    assert _window(sched, NINE, "--all", until="2026-12-01T18:00Z", reason="long").code == 0
    shorter = sched.run(NINE + MIN, "cron", "pause", "--all", "--until", UNTIL, "--reason", "short")
    assert shorter.code == 0
    assert "this window replaces the open one (maintenance until 2026-12-01 18:00 UTC: long)" in shorter.err


def test_a_hostile_reason_or_an_older_format_in_the_policy_file_is_refused(sched):
    _hourly(sched, "beat")
    assert _window(sched, NINE, "--all").code == 0
    policy = json.loads(sched.policy_file.read_text())
    policy["maintenance"]["reason"] = "ok\x1b[2J"
    sched.policy_file.write_text(json.dumps(policy))
    result = sched.run(NINE + MIN, "cron", "tick")
    assert result.code == 5 and "U+001B" in result.err
    policy["maintenance"]["reason"] = "ok"
    policy["formatVersion"] = 2
    sched.policy_file.write_text(json.dumps(policy))
    result = sched.run(NINE + MIN, "cron", "tick")
    assert result.code == 5 and "formatVersion 3" in result.err


def test_resuming_one_job_inside_the_workspaces_window_says_the_window_still_holds_it(sched):
    _hourly(sched, "beat")
    assert _window(sched, NINE + 30 * MIN, "--all").code == 0
    resumed = sched.run(NINE + 40 * MIN, "cron", "resume", "beat")
    assert resumed.code == 0
    assert ("beat: the workspace's maintenance until 2026-12-01 12:30 UTC: db migration still skips its "
            "occurrences; `sxctl cron resume --all` ends it") in resumed.err


def test_a_window_that_starts_later_is_not_shown_open_as_the_pass_does_not_apply_it(sched):
    """A window written by a clock a year ahead skips nothing now: status and doctor must not say it does."""
    _hourly(sched, "beat")
    assert _window(sched, NINE + 30 * MIN, "--all").code == 0
    doc = json.loads(sched.policy_file.read_text())
    doc["maintenance"]["fromMs"] += 365 * 24 * HOUR
    doc["maintenance"]["untilMs"] += 365 * 24 * HOUR
    sched.policy_file.write_text(json.dumps(doc))
    assert [r["name"] for r in sched.tick(NINE + HOUR)["runs"]] == ["beat"]
    status = sched.run(NINE + HOUR, "--session", SID, "status", "--json").json()
    assert status["cron"]["maintenance"] == []
    assert not [p for p in status["problems"] if p["code"] == "cron_maintenance"]
    checks = sched.run(NINE + HOUR, "--session", SID, "doctor", "--json").json()["checks"]
    assert not [c for c in checks if c["check"] == "maintenance"]


def test_a_naive_until_is_read_in_this_machines_zone_as_the_help_says(sched):
    """`--until '2026-12-01 09:30'` under TZ=America/New_York was read as 09:30 UTC (04:30 there)."""
    _hourly(sched, "beat")
    result = sched.run(NINE, "cron", "pause", "--all", "--until", "2026-12-01 09:30", "--reason", "freeze",
                       "--json", env=sched.env(TZ="America/New_York"))
    assert result.code == 0, result.err
    window = json.loads(sched.policy_file.read_text())["maintenance"]
    assert window["untilMs"] == NINE + 5 * HOUR + 30 * MIN  # 09:30 EST is 14:30 UTC


def test_a_job_held_by_a_window_is_neither_waiting_nor_overdue_in_status(sched):
    """During a freeze with the agent stopped, status said the job "waits for a live agent" and
    "is overdue" while the pass skips it (maintenance)."""
    _hourly(sched, "beat")
    assert _window(sched, NINE - 30 * MIN, "--all").code == 0
    at = NINE + 20 * MIN  # due at 09:00, no live agent, inside the window
    doc = sched.run(at, "--session", SID, "status", "--json").json()
    assert doc["cron"]["waiting"] == [] and doc["cron"]["overdue"] == []
    assert {p["code"] for p in doc["problems"]} & {"cron_waiting_for_agent", "cron_overdue"} == set()
    assert not [c for c in sched.run(at, "doctor", "--json").json()["checks"] if c["check"] == "overdue"]
    assert not [p for p in sched.run(at, "cron", "status", "--json").json()["problems"] if p["code"] == "overdue"]
    metrics = sched.run(at, "--session", SID, "metrics").out
    assert [line.rsplit(" ", 1)[1] for line in metrics.splitlines() if line.startswith("sxctl_cron_waiting_jobs")] \
        == ["0"]


def test_next_due_in_status_and_cron_status_is_the_first_run_after_the_window(sched):
    """`next due` said 09:00 (the occurrence the window skips) where `cron next` said 13:00."""
    _hourly(sched, "beat")
    sched.add(NINE - MIN, "daily", "--cron", "0 18 * * *", "--tz", "UTC", "--payload", "agent-turn", "--text", "d",
              "--to", SID)
    assert _window(sched, NINE - 30 * MIN, "beat").code == 0  # beat's own window, to 12:30
    at = NINE - 10 * MIN
    first_ms = sched.run(at, "cron", "next", "beat", "-n", "1", "--json").json()["fires"][0]["at_ms"]
    assert first_ms == NINE + 4 * HOUR  # 13:00
    assert sched.run(at, "--session", SID, "status", "--json").json()["cron"]["next_due_ms"] == first_ms
    assert sched.run(at, "cron", "status", "--json").json()["next_due_ms"] == first_ms


def test_until_takes_a_duration_from_now(sched):
    """`--until 2h` failed as an "Invalid naive wall-clock timestamp"; a freeze is often for a while."""
    _hourly(sched, "beat")
    assert _window(sched, NINE, "--all", until="1h30m").code == 0
    assert json.loads(sched.policy_file.read_text())["maintenance"]["untilMs"] == NINE + 90 * MIN


def test_resume_all_says_a_jobs_own_window_stays(sched):
    """It said "maintenance window of every job ended" while a job's own window went on."""
    _hourly(sched, "beat")
    assert _window(sched, NINE, "beat").code == 0 and _window(sched, NINE, "--all").code == 0
    ended = sched.run(NINE + MIN, "cron", "resume", "--all")
    assert ended.code == 0 and "a job's own window stays: `sxctl cron resume NAME` ends it" in ended.out
    assert sched.job("beat")["policy"]["maintenance"] is not None

"""Honest scheduling: jobs wait for the agent, catch-up policies, missed notes, runaway limits,
lifetimes, active hours, receipts — and sxctl's policy file beside the comis store."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes

SID = "2026_12_01_steady_hopper"
NINE = int(datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp() * 1000)  # a Tuesday
MIN = 60_000
HOUR = 60 * MIN


@pytest.fixture
def sched(project):
    """The project with one session folder; `agent_at(ms)` makes its agent live at `ms` (as if
    it wrote stats.json then), `tick(ms)` runs one pass at `ms` and checks the store it leaves."""

    class Scheduling:
        root = project.root
        folder = project.root / ".scorpiox" / "sessions" / SID
        policy_file = project.root / ".scheduler" / "sxctl-policy.json"

        def agent_at(self, ms: int) -> None:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / "stats.json").write_text(json.dumps({"updated_ms": ms, "model": "m"}))

        def run(self, ms: int, *args: str, env: dict | None = None):
            result = project.run(*args, clock=FakeClock(ms), env=env)
            store = self.root / ".scheduler" / "cron-jobs.json"
            if store.exists():
                assert check_store_bytes(store.read_bytes()) == [], args
            return result

        def add(self, ms: int, *args: str) -> None:
            result = self.run(ms, "cron", "add", *args)
            assert result.code == 0, result.err

        def tick(self, ms: int, *args: str) -> dict:
            result = self.run(ms, "cron", "tick", "--json", *args)
            assert result.code == 0, result.out + result.err
            return result.json()

        def ledger(self) -> list[dict]:
            path = self.root / ".scheduler" / "cron-executions.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

        def pending(self) -> list[dict]:
            return [json.loads(p.read_text()) for p in sorted((self.folder / "inbox").glob("*.json"))]

        def env(self, **extra: str) -> dict:
            return project.env(**extra)

        def job(self, name: str) -> dict:
            doc = self.run(NINE, "cron", "show", name, "--json")
            assert doc.code == 0, doc.err
            return doc.json()

    return Scheduling()


# --- waiting for the agent ---------------------------------------------------------------------

def test_a_job_due_while_the_agent_restarts_waits_and_runs_once_when_it_is_back(sched):
    sched.add(NINE - 3_600_000, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "morning check")
    sched.add(NINE - 3_600_000, "once", "--at", "2026-12-01T09:05Z", "--payload", "agent-turn", "--text", "one shot")
    sched.agent_at(NINE - MIN)  # the agent stopped at 08:59
    for minute in (0.5, 10):
        report = sched.tick(NINE + int(minute * MIN))
        assert report["runs"] == []
        waiting = {w["name"]: w for w in report["waiting"]}
        assert waiting["daily"]["reason"] == "no_live_session" and waiting["daily"]["dueSinceMs"] == NINE
    assert sched.ledger() == []  # held: not claimed, no ledger row
    assert sched.job("once")["job"]["lifecycle"]["status"] == "scheduled"
    status = sched.run(NINE + 10 * MIN, "--session", SID, "status", "--json").json()
    assert "cron_waiting_for_agent" in [p["code"] for p in status["problems"]]
    assert "cron_overdue" not in [p["code"] for p in status["problems"]]

    sched.agent_at(NINE + 20 * MIN)  # restarted at 09:20
    report = sched.tick(NINE + 20 * MIN)
    assert sorted((r["name"], r["status"], r["trigger"]) for r in report["runs"]) == [
        ("daily", "dispatched", "catchup"), ("once", "dispatched", "catchup")]
    assert report["waiting"] == []
    assert sorted(m["text"].splitlines()[0] for m in sched.pending()) == ["morning check", "one shot"]
    assert not [row for row in sched.ledger() if row["recordType"] == "terminal"
                and row["outcome"]["kind"] != "inbox_dispatch"]  # no failure row
    assert sched.tick(NINE + 21 * MIN)["runs"] == []  # once
    assert sched.job("once")["job"]["lifecycle"]["status"] == "one_shot_terminal"


def test_status_and_next_stop_saying_waits_once_the_hold_limit_has_passed(sched):
    """The views ask the pass's rule (hold.hold_for): past --hold-max a job is not waiting any more,
    the next pass gives it up, so it is overdue."""
    sched.add(NINE - 3_600_000, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "morning check", "--hold-max", "10m")
    sched.agent_at(NINE - MIN)
    sched.folder.joinpath("inbox").mkdir(parents=True, exist_ok=True)
    views = {}
    for minute in (5, 15):
        status = sched.run(NINE + minute * MIN, "--session", SID, "status", "--json").json()
        upcoming = sched.run(NINE + minute * MIN, "--session", SID, "next", "--json").json()
        codes = [p["code"] for p in status["problems"]]
        views[minute] = (status["cron"]["waiting"], "cron_waiting_for_agent" in codes, "cron_overdue" in codes,
                         [row["waiting"] for row in upcoming["rows"] if row["source"] == "cron"][:1])
    assert views[5] == (["daily"], True, False, [True])
    assert views[15] == ([], False, True, [False])


def test_past_its_hold_limit_the_occurrence_is_given_up_and_recorded(sched):
    sched.add(NINE - 3_600_000, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "morning check", "--hold-max", "10m")
    sched.add(NINE - 3_600_000, "once", "--at", "2026-12-01T09:05Z", "--payload", "agent-turn", "--text", "one shot",
              "--hold-max", "10m")
    sched.agent_at(NINE - MIN)
    assert [w["name"] for w in sched.tick(NINE + MIN)["waiting"]] == ["daily"]
    report = sched.tick(NINE + 16 * MIN)  # 16 min: past both limits, still no agent
    assert sorted((r["name"], r["status"], r["errorKind"]) for r in report["runs"]) == [
        ("daily", "failed", "precondition"), ("once", "failed", "precondition")]
    sched.agent_at(NINE + 20 * MIN)
    assert sched.tick(NINE + 20 * MIN)["runs"] == []
    assert sched.pending() == []  # nothing dispatched
    runs = sched.run(NINE + 20 * MIN, "cron", "runs", "daily", "--json").json()["runs"]
    assert [(r["status"], r["errorKind"]) for r in runs] == [("failed", "precondition")]  # visible, not silent


# --- catch-up policies ---------------------------------------------------------------------------

def test_catch_up_skip_after_an_outage_dispatches_nothing_and_records_the_skip(sched):
    sched.add(NINE - MIN, "hourly", "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "beat", "--catch-up", "skip", "--stale-after", "30m")
    outage_end = NINE + 3 * 3_600_000 + 40 * MIN  # 12:40: 09:00, 10:00, 11:00 and 12:00 were missed
    sched.agent_at(outage_end)
    report = sched.tick(outage_end)
    assert report["runs"] == [] and sched.pending() == [] and sched.ledger() == []
    assert report["skippedOccurrences"] == [{"jobId": sched.job("hourly")["job"]["id"], "name": "hourly",
                                             "reason": "stale", "detail": "stale: more than --stale-after 30m late",
                                             "count": 4, "firstMs": NINE,
                                             "lastMs": NINE + 3 * 3_600_000}]
    assert sched.job("hourly")["next_run_ms"] == NINE + 4 * 3_600_000  # 13:00, on schedule
    runs = sched.run(outage_end, "cron", "runs", "hourly", "--json").json()
    assert [(s["count"], s["reason"]) for s in runs["skipped"]] == [(4, "stale")]
    assert sched.job("hourly")["policy"]["skips"]["total"] == 4
    sched.agent_at(NINE + 4 * 3_600_000)
    [run] = sched.tick(NINE + 4 * 3_600_000)["runs"]  # the next one runs, on time
    assert run["trigger"] == "scheduled"


def test_a_catch_up_message_ends_with_the_count_and_span_of_what_it_stands_for(sched):
    croniter = pytest.importorskip("croniter").croniter
    berlin = ZoneInfo("Europe/Berlin")
    added = NINE + 7 * MIN
    sched.add(added, "quarterly", "--cron", "*/15 * * * *", "--tz", "Europe/Berlin", "--payload", "heartbeat-event",
              "--text", "status please")
    late = added + 2 * 3_600_000 + 7 * MIN
    sched.agent_at(late)
    [run] = sched.tick(late)["runs"]
    assert run["trigger"] == "catchup"
    # an independent count: croniter walks the Berlin wall clock from the job's first occurrence
    walk = croniter("*/15 * * * *", datetime.fromtimestamp(added / 1000, berlin))
    due = []
    while (at := walk.get_next(datetime)).timestamp() * 1000 <= late:
        due.append(at)
    [message] = sched.pending()
    last_line = message["text"].splitlines()[-1]
    assert message["text"].startswith("status please\n\n")
    assert last_line == (f"[sxctl: a catch-up run for {len(due)} missed occurrences, "
                         f"{due[0]:%Y-%m-%d %H:%M} to {due[-1]:%Y-%m-%d %H:%M} (Europe/Berlin)]")


def test_no_missed_note_turns_the_note_off(sched):
    sched.add(NINE - 3 * 3_600_000, "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "beat",
              "--no-missed-note")
    sched.agent_at(NINE)
    sched.tick(NINE)
    assert [m["text"] for m in sched.pending()] == ["beat"]


# --- runaway limits -----------------------------------------------------------------------------------

def test_max_unconsumed_pauses_the_job_when_nobody_reads_it_and_resume_works(sched):
    sched.add(NINE, "chatty", "--every", "1m", "--payload", "heartbeat-event", "--text", "ping",
              "--max-unconsumed", "3")
    for minute in range(1, 7):  # the agent is live but reads nothing
        sched.agent_at(NINE + minute * MIN)
        sched.tick(NINE + minute * MIN)
    assert len(sched.pending()) == 3
    row = sched.job("chatty")
    assert row["state"] == "paused:max_unconsumed" and row["policy"]["paused"]["reason"] == "max_unconsumed"
    assert row["job"]["lifecycle"] == {"status": "paused", "nextRunAtMs": row["job"]["lifecycle"]["nextRunAtMs"],
                                       "consecutiveDependencyErrors": 0, "reason": "operator"}  # comis's own pause
    listed = sched.run(NINE + 6 * MIN, "cron", "list")
    assert "paused:max_unconsumed" in listed.out
    status = sched.run(NINE + 6 * MIN, "--session", SID, "status", "--json").json()
    assert any(p["code"] == "cron_paused_by_limit" and "chatty" in p["message"] for p in status["problems"])

    assert sched.run(NINE + 7 * MIN, "cron", "resume", "chatty").code == 0
    assert sched.job("chatty")["state"] == "scheduled" and sched.job("chatty")["policy"]["paused"] is None
    sched.agent_at(NINE + 8 * MIN)
    [run] = sched.tick(NINE + 8 * MIN)["runs"]
    assert run["status"] == "dispatched" and len(sched.pending()) == 4


def test_max_runs_per_day_skips_the_excess_in_the_jobs_zone(sched):
    sched.add(NINE, "often", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs-per-day", "2")
    for hour in range(1, 5):
        sched.agent_at(NINE + hour * 3_600_000)
        sched.tick(NINE + hour * 3_600_000)
    assert len(sched.pending()) == 2
    assert sched.job("often")["policy"]["skips"]["total"] == 2


def test_until_and_max_runs_expire_a_job_without_deleting_it(sched):
    sched.add(NINE, "twice", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "2")
    sched.add(NINE, "until", "--every", "1h", "--payload", "heartbeat-event", "--text", "y",
              "--until", "2026-12-01T10:30Z")
    paused = []
    for hour in range(1, 4):
        sched.agent_at(NINE + hour * 3_600_000)
        paused += [(hour, p["name"], p["reason"]) for p in sched.tick(NINE + hour * 3_600_000)["paused"]]
    assert sorted(m["text"] for m in sched.pending()) == ["x", "x", "y"]
    assert sorted(paused) == [(1, "until", "expired"), (2, "twice", "expired")]  # right after their last run
    for name in ("twice", "until"):
        assert sched.job(name)["state"] == "paused:expired"
    refused = sched.run(NINE + 3 * 3_600_000, "cron", "add", "shot", "--in", "5m", "--payload", "heartbeat-event",
                        "--text", "z", "--max-runs", "3")
    assert refused.code == 2 and "recurring" in refused.err


def test_active_hours_skip_occurrences_outside_them(sched):
    sched.add(NINE - 4 * 3_600_000, "office", "--cron", "0 * * * *", "--tz", "Europe/Berlin",
              "--payload", "heartbeat-event", "--text", "x", "--active-hours", "09:00-17:00", "--active-days", "mon-fri")
    rehearsed = sched.run(NINE - 3 * 3_600_000, "cron", "simulate", "--from", "2026-12-01T06:00Z", "--until",
                          "2026-12-01T10:00Z", "--pass-every", "1h", "--json").json()["events"]
    assert [(e["fate"], e["reason"]) for e in rehearsed] == [("skipped", "inactive_hours")] * 2 + [
        ("dispatched", None)] * 3  # what the passes below do, rehearsed first (and nothing written)
    for hour in range(-3, 2):  # 06:00-10:00 UTC = 07:00-11:00 Berlin
        at = NINE + hour * 3_600_000
        sched.agent_at(at)
        sched.tick(at)
    assert len(sched.pending()) == 3  # 09:00, 10:00 and 11:00 Berlin
    assert sched.job("office")["policy"]["skips"]["total"] == 2  # 07:00 and 08:00 Berlin


def test_a_catch_up_found_outside_active_hours_is_skipped_not_sent_at_night(sched):
    """Down from 13:00 to 05:00 (Berlin): the first pass, at 05:00, sent a catch-up of the day's
    13:00 at night — what active hours are there to prevent."""
    sched.add(NINE - 4 * 3_600_000, "poll", "--every", "1h", "--anchor", "2026-12-01 00:00", "--tz", "Europe/Berlin",
              "--payload", "heartbeat-event", "--text", "x", "--active-hours", "08:00-18:00")
    down_from = NINE + 3 * 3_600_000  # 13:00 Berlin: nothing runs until 05:00 the next day
    sched.agent_at(down_from - 3_600_000)
    sched.tick(down_from - 3_600_000)  # 12:00 Berlin: on time
    night = down_from + 16 * 3_600_000  # 05:00 Berlin
    sched.agent_at(night)
    report = sched.tick(night)
    assert report["runs"] == [] and [s["reason"] for s in report["skippedOccurrences"]] == ["inactive_hours"]
    morning = down_from + 19 * 3_600_000  # 08:00 Berlin: on time again
    sched.agent_at(morning)
    [run] = sched.tick(morning)["runs"]
    assert run["trigger"] == "scheduled" and run["scheduledForMs"] == morning
    assert len(sched.pending()) == 2


NEW_YORK = ZoneInfo("America/New_York")


def test_tz_on_an_every_job_is_kept_and_its_active_hours_are_that_zones(sched):
    sched.add(NINE, "poll", "--every", "30m", "--anchor", "2026-12-01 04:00", "--active-hours", "08:00-18:00",
              "--tz", "America/New_York", "--payload", "heartbeat-event", "--text", "x")
    policy = json.loads(sched.policy_file.read_text())
    assert policy["formatVersion"] == 2 and list(policy["jobs"].values()) == [
        {"activeHours": "08:00-18:00", "tz": "America/New_York"}]
    for step in range(1, 49):  # a day of passes, every 30 minutes from 09:00 UTC (04:00 in New York)
        at = NINE + step * 30 * MIN + 1000
        sched.agent_at(at)
        sched.tick(at)
    hours = sorted(datetime.fromtimestamp(row["scheduledForMs"] / 1000, NEW_YORK).strftime("%H:%M")
                   for row in sched.ledger() if row["recordType"] == "started")
    assert hours[0] == "08:00" and hours[-1] == "17:30" and len(hours) == 20  # New York's 08-18, not UTC's
    assert sched.job("poll")["policy"]["skips"]["total"] == 28
    shown = sched.job("poll")
    assert shown["tz"] == "America/New_York" and shown["policy"]["tz"] == "America/New_York"
    later = NINE + 24 * 3_600_000 + 1000  # the job's zone is its schedule's; its times are shown in the display zone
    in_ny = sched.env(TZ="America/New_York")
    listing = sched.run(later, "cron", "list", env=sched.env(TZ="Europe/Berlin"))
    assert "every 30m America/New_York" in listing.out and " CET (" in listing.out and " EST " not in listing.out
    assert sched.run(later, "cron", "list", env=in_ny).out.count(" EST (") == 1
    upcoming = sched.run(later, "cron", "next", "poll", "-n", "1", "--json", env=in_ny).json()
    assert upcoming["fires"][0]["at_local"].endswith("-05:00")
    in_utc = sched.run(later, "cron", "next", "poll", "-n", "1", "--tz", "UTC", "--json", env=in_ny)
    assert in_utc.json()["fires"][0]["at_local"].endswith("+00:00")


def test_an_at_job_keeps_its_zone_in_its_schedule_and_its_times_are_in_the_display_zone(sched):
    sched.add(NINE, "call", "--at", "2026-12-02 09:00", "--tz", "America/New_York", "--payload", "heartbeat-event",
              "--text", "x")
    listing = sched.run(NINE, "cron", "list").out  # TZ=UTC
    assert "at 2026-12-02 09:00 America/New_York" in listing and "2026-12-02 14:00:00 UTC" in listing
    assert sched.run(NINE, "cron", "show", "call").out.startswith("call: scheduled, next 2026-12-02 14:00:00 UTC")
    in_utc = sched.run(NINE, "cron", "list", "--tz", "UTC").out  # the schedule stays in its zone, as a cron job's
    assert "at 2026-12-02 09:00 America/New_York" in in_utc and "2026-12-02 14:00:00 UTC" in in_utc


def test_the_daily_limit_of_an_every_job_counts_days_in_its_zone(sched):
    tokyo_midnight = NINE + 6 * 3_600_000  # 15:00 UTC = 00:00 in Tokyo
    sched.add(NINE, "often", "--every", "1h", "--anchor", "2026-12-01 22:00", "--tz", "Asia/Tokyo",
              "--payload", "heartbeat-event", "--text", "x", "--max-runs-per-day", "2")
    for hour in (4, 5, 6, 7):  # 22:00, 23:00 in Tokyo, then 00:00 and 01:00 of its next day
        at = NINE + hour * 3_600_000 + 1000
        sched.agent_at(at)
        sched.tick(at)
    started = [row["scheduledForMs"] for row in sched.ledger() if row["recordType"] == "started"]
    assert started == [NINE + 4 * 3_600_000, NINE + 5 * 3_600_000, tokyo_midnight, tokyo_midnight + 3_600_000]
    assert sched.job("often")["policy"]["skips"]["total"] == 0  # in UTC the third run of Dec 1 would be skipped


def test_a_catch_up_note_of_an_every_job_is_in_its_zone(sched):
    sched.add(NINE, "hourly", "--every", "1h", "--tz", "America/New_York", "--payload", "heartbeat-event",
              "--text", "beat")
    late = NINE + 3 * 3_600_000 + 10 * MIN
    sched.agent_at(late)
    sched.tick(late)
    [message] = sched.pending()
    assert message["text"].splitlines()[-1] == \
        "[sxctl: a catch-up run for 3 missed occurrences, 2026-12-01 05:00 to 2026-12-01 07:00 (America/New_York)]"


def test_tz_alone_moves_an_every_job_to_another_zone_and_a_cron_schedule_drops_it(sched):
    sched.add(NINE, "poll", "--every", "1h", "--tz", "America/New_York", "--payload", "heartbeat-event", "--text", "x")
    before = sched.root.joinpath(".scheduler", "cron-jobs.json").read_text()
    assert sched.run(NINE, "cron", "update", "poll", "--tz", "europe/berlin").code == 0
    assert json.loads(sched.root.joinpath(".scheduler", "cron-jobs.json").read_text())["jobs"] == \
        json.loads(before)["jobs"]  # the store's schedule is untouched: comis's every has no zone
    assert sched.job("poll")["tz"] == "Europe/Berlin"
    assert sched.run(NINE, "cron", "update", "poll", "--cron", "0 9 * * *", "--tz", "Asia/Tokyo").code == 0
    assert sched.job("poll")["tz"] == "Asia/Tokyo"  # in the store now, not in the policy file:
    assert json.loads(sched.policy_file.read_text()) == {"formatVersion": 1, "jobs": {}}


@pytest.mark.parametrize("args", [("--every", "30m"), ("--in", "5m"), ("--at", "2026-12-02 09:00")])
def test_a_zone_that_cannot_be_honoured_is_refused_not_dropped(sched, args):
    result = sched.run(NINE, "cron", "add", "poll", *args, "--tz", "Mars/Olympus_Mons",
                       "--payload", "heartbeat-event", "--text", "x")
    assert result.code == 2 and result.err.startswith("sxctl: Invalid") and result.err.count("\n") <= 2
    assert not sched.root.joinpath(".scheduler", "cron-jobs.json").exists() or "poll" not in \
        sched.root.joinpath(".scheduler", "cron-jobs.json").read_text()


@pytest.mark.parametrize("args", [("--cron", "0 9 * * *"), ("--every", "1h")])
def test_a_fixed_offset_named_like_a_region_is_refused_with_the_regions_zone(sched, args):
    """`--tz EST` is a fixed UTC-05:00 all year: a 09:00 job would run at 10:00 in New York's summer."""
    result = sched.run(NINE, "cron", "add", "poll", *args, "--tz", "EST", "--payload", "heartbeat-event", "--text", "x")
    assert result.code == 2 and "fixed offset all year" in result.err
    assert "give America/New_York, or Etc/GMT+5 if a fixed offset is meant" in result.err
    assert sched.run(NINE, "cron", "add", "poll", *args, "--tz", "Etc/GMT+5", "--payload", "heartbeat-event",
                     "--text", "x").code == 0


def test_a_format_1_policy_file_with_a_zone_is_invalid(sched):
    sched.add(NINE, "poll", "--every", "1h", "--tz", "America/New_York", "--payload", "heartbeat-event", "--text", "x")
    policy = json.loads(sched.policy_file.read_text())
    policy["formatVersion"] = 1
    sched.policy_file.write_text(json.dumps(policy))
    result = sched.run(NINE, "cron", "list")
    assert result.code == 5 and "formatVersion 2" in result.err


# --- failed runs ---------------------------------------------------------------------------------------

REASON = "failed precondition: SXCTL_DELIVER_CMD is not set"


def test_cron_run_of_a_failing_run_exits_10_with_its_reason_and_ok_false(sched):
    sched.add(NINE, "stretch", "--every", "1h", "--payload", "delivery", "--text", "stretch")
    human = sched.run(NINE, "cron", "run", "stretch")
    assert human.code == 10
    assert human.out == f"ran stretch (manual): {REASON}\n"
    assert human.err.endswith(f"sxctl: the run did not succeed: stretch: {REASON} (see `sxctl cron runs stretch`)\n")
    quiet = sched.run(NINE, "-q", "cron", "run", "stretch")
    assert quiet.code == 10 and quiet.out == f"ran stretch (manual): {REASON}\n"
    doc = sched.run(NINE, "cron", "run", "stretch", "--json")
    assert doc.code == 10
    body = doc.json()
    assert body["ok"] is False and body["error"]["code"] == "run_failed" and body["error"]["exit"] == 10
    assert body["run"]["status"] == "failed" and body["run"]["reason"] == REASON and body["triggered"] is True
    due = sched.run(NINE + 3_600_000, "cron", "run", "--mode", "due", "--json")
    assert due.code == 10 and due.json()["ok"] is False
    fine = sched.run(NINE + 7_200_000, "cron", "run", "stretch", "--json",
                     env=sched.env(SXCTL_DELIVER_CMD="cat >/dev/null"))
    assert fine.code == 0 and fine.json()["ok"] is True and "reason" not in fine.json()["run"]


def test_the_passs_run_line_carries_the_reason_with_q_as_the_exported_entry_runs_it(sched):
    sched.add(NINE, "stretch", "--at", "2026-12-01T09:05Z", "--payload", "delivery", "--text", "stretch")
    result = sched.run(NINE + 5 * MIN, "-q", "cron", "tick", "--busy-ok")
    assert result.code == 0 and result.out == f"ran stretch (scheduled): {REASON}\n" and result.err == ""


def test_a_failed_one_shot_is_failed_in_cron_list_and_a_problem_in_status_and_doctor(sched):
    sched.add(NINE, "stretch", "--at", "2026-12-01T09:05Z", "--payload", "delivery", "--text", "stretch")
    sched.add(NINE, "fine", "--at", "2026-12-01T09:03Z", "--payload", "delivery", "--text", "ok")
    sched.run(NINE + 3 * MIN, "cron", "tick", env=sched.env(SXCTL_DELIVER_CMD="cat >/dev/null"))
    sched.run(NINE + 5 * MIN, "cron", "tick")
    later = NINE + 10 * MIN
    rows = {row["job"]["name"]: row for row in sched.run(later, "cron", "list", "--json").json()["jobs"]}
    assert rows["stretch"]["state"] == "failed" and rows["stretch"]["failure"]["reason"] == REASON
    assert rows["fine"]["state"] == "done" and "failure" not in rows["fine"]
    listing = sched.run(later, "cron", "list").out.splitlines()
    assert [line.split()[6] for line in listing[1:]] == ["failed", "done"]  # NAME KIND at DATE TIME UTC STATE
    shown = sched.run(later, "cron", "show", "stretch")
    assert f"its run failed: {REASON} (see `sxctl cron runs stretch`)" in shown.out
    status = sched.run(later, "status", "--json").json()
    [problem] = [p for p in status["problems"] if p["code"] == "cron_run_failed"]
    assert problem["message"] == f"cron job stretch: its last run failed: {REASON}; see `sxctl cron runs stretch`"
    assert status["cron"]["jobs_by_state"] == {"failed": 1, "done": 1}
    assert f"cron job stretch: its last run failed: {REASON}" in sched.run(later, "status").out
    doctor = sched.run(later, "doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "failed runs"]
    assert check["status"] == "fail" and check["message"] == f"job stretch: its last run failed: {REASON}"
    assert check["fix"] == "sxctl cron runs stretch" and doctor.code == 9
    again = sched.run(later, "cron", "run", "stretch", env=sched.env(SXCTL_DELIVER_CMD="cat >/dev/null"))
    assert again.code == 0  # a manual run by hand later: the one-shot's own run still failed
    states = {row["job"]["name"]: row["state"] for row in sched.run(later, "cron", "list", "--json").json()["jobs"]}
    assert states == {"stretch": "failed", "fine": "done"}
    assert sched.run(later, "status", "--json").json()["cron"]["jobs_by_state"] == {"failed": 1, "done": 1}


def test_doctor_q_the_monitor_probe_fails_while_a_job_fails_every_run(sched):
    """`doctor -q` exited 0 (a warning) while a delivery job failed every hour: the monitor heard
    nothing. A job whose last run failed fails the check, naming the job, why and `cron runs`;
    once the job is paused nothing runs it, and it is a warning again."""
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "stretch", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "delivery",
              "--text", "stretch")
    for hour in range(3):
        at = NINE + hour * HOUR
        sched.agent_at(at)
        [run] = sched.tick(at)["runs"]
        assert run["status"] == "failed", run
    probe = sched.run(NINE + 2 * HOUR, "-q", "doctor")
    assert probe.code == 9, probe.out + probe.err
    assert probe.out.splitlines() == [
        f"FAIL  failed runs  job stretch: its last run failed: {REASON}",
        "                   fix: sxctl cron runs stretch"], probe.out
    assert probe.err == "sxctl: 1 check(s) failed: failed runs\n"
    assert sched.run(NINE + 2 * HOUR, "cron", "pause", "stretch").code == 0
    paused = sched.run(NINE + 2 * HOUR, "-q", "doctor", "--json")
    assert paused.code == 0, paused.out
    [check] = [c for c in paused.json()["checks"] if c["check"] == "failed runs"]
    assert check["status"] == "warn" and check["message"].endswith("; the job is paused"), check


# --- receipts ----------------------------------------------------------------------------------------

def test_cron_runs_says_read_pending_retracted_and_lost(sched, project):
    sched.agent_at(NINE)
    other = "2026_11_30_other_session"
    (project.root / ".scorpiox" / "sessions" / other).mkdir(parents=True)
    sched.add(NINE, "live", "--every", "1h", "--payload", "heartbeat-event", "--text", "x")
    sched.add(NINE, "elsewhere", "--every", "1h", "--payload", "agent-turn", "--text", "y", "--to", other)
    stems = []
    for n in range(3):
        forced = sched.run(NINE + n * 1000, "cron", "run", "live", "--json").json()
        stems.append(forced["run"]["outcome"]["stem"])
    assert sched.run(NINE + 3000, "cron", "run", "elsewhere").code == 0
    inbox = sched.folder / "inbox"
    (inbox / "done").mkdir(exist_ok=True)
    (inbox / f"{stems[0]}.json").rename(inbox / "done" / f"{stems[0]}.json")  # the agent read it
    assert sched.run(NINE, "--session", SID, "inbox", "retract", stems[2]).code == 0
    shutil.rmtree(project.root / ".scorpiox" / "sessions" / other)  # that session is gone
    runs = sched.run(NINE + 5 * MIN, "cron", "runs", "--all-jobs", "--json").json()["runs"]
    by_stem = {r["outcome"]["stem"]: r["consumption"] for r in runs}
    assert by_stem[stems[0]]["state"] == "read" and isinstance(by_stem[stems[0]]["readAtMs"], int)
    assert by_stem[stems[1]]["state"] == "pending" and by_stem[stems[1]]["ageMs"] >= 0
    assert by_stem[stems[2]] == {"state": "retracted"}
    [lost] = [c for stem, c in by_stem.items() if stem not in stems]
    assert lost == {"state": "lost", "reason": "session_gone"}
    table = sched.run(NINE + 5 * MIN, "cron", "runs", "--all-jobs")
    assert table.out.splitlines()[0].split()[:4] == ["JOB", "STARTED", "STATUS", "READ"]
    assert "dispatched" in table.out and "done" not in table.out.split()


# --- the policy file ----------------------------------------------------------------------------------

def test_the_policy_file_is_strict_and_never_rewritten_when_invalid(sched):
    sched.add(NINE, "p", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "5")
    policy = json.loads(sched.policy_file.read_text())
    [entry] = policy["jobs"].values()
    assert entry == {"maxRuns": 5}
    entry["surprise"] = 1
    sched.policy_file.write_text(json.dumps(policy))
    before = sched.policy_file.read_bytes()
    for args in (("cron", "list"), ("cron", "tick"), ("cron", "update", "p", "--max-runs", "6"),
                 ("cron", "add", "q", "--in", "5m", "--payload", "heartbeat-event", "--text", "x")):
        result = sched.run(NINE, *args)
        assert result.code == 5 and "sxctl-policy.json" in result.err and "surprise" in result.err, args
    assert sched.policy_file.read_bytes() == before
    assert "q" not in sched.root.joinpath(".scheduler", "cron-jobs.json").read_text()


def test_entries_of_removed_jobs_are_dropped_on_the_next_write(sched):
    sched.add(NINE, "a", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "5")
    sched.add(NINE, "b", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "6")
    assert sched.run(NINE, "cron", "remove", "a", "--yes").code == 0
    assert sched.run(NINE, "cron", "update", "b", "--max-unconsumed", "2").code == 0
    [entry] = json.loads(sched.policy_file.read_text())["jobs"].values()
    assert entry == {"maxRuns": 6, "maxUnconsumed": 2}
    assert oct(sched.policy_file.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("point", ["before-rename", "after-claim", "after-start", "after-dispatch", "after-terminal"])
def test_the_policy_file_survives_a_pass_killed_at_every_fault_point(sched, project, point):
    """A pass that first records a skip (the policy file is written before the claim) and then
    runs a limited job, killed at each point: the policy file is the old one or a whole new
    one, and the strict reader takes it; the next pass recovers."""
    from sxctl.cron.policy.file import read_policy
    from sxctl.cron.store.workspace import Workspace
    from tests.conftest import now_ms

    now = now_ms()
    hour = datetime.fromtimestamp(now / 1000, UTC).hour
    closed = f"{(hour + 2) % 24:02d}:00-{(hour + 3) % 24:02d}:00"  # the quiet job's due hour is outside
    sched.add(now - 2 * 3_600_000, "quiet", "--every", "1h", "--payload", "heartbeat-event", "--text", "q",
              "--active-hours", closed)
    sched.add(now - 2 * 3_600_000, "limited", "--every", "1h", "--payload", "heartbeat-event", "--text", "x",
              "--max-runs", "3")
    before = sched.policy_file.read_bytes()
    sched.agent_at(now_ms())  # live for the real clock of the process
    killed = project.fork("cron", "tick", "--fault-inject", point)
    assert killed.code == 99, killed.err  # the kill happened
    after = sched.policy_file.read_bytes()
    assert after == before if point == "before-rename" else after != before  # killed before / after the write
    read_policy(Workspace(project.root))  # whole, and the strict reader takes it
    sched.agent_at(now_ms())
    assert project.fork("cron", "tick", "--terminalize-orphans").code == 0
    policy = read_policy(Workspace(project.root))
    stored = {job["id"] for job in json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())["jobs"]}
    assert set(policy["jobs"]) <= stored and any(e.get("skips") for e in policy["jobs"].values())


def test_watch_json_reports_a_job_that_expires(sched, project):
    from sxctl.api import watch

    sched.add(NINE, "brief", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "1")
    sched.agent_at(NINE + 3_600_000)
    watching = watch(session=SID, project=project.root, clock=FakeClock(NINE + 3_600_000))
    before = watching.look()
    assert before.jobs == {"brief": "scheduled"}
    sched.tick(NINE + 3_600_000)
    events = watching.changes(before, watching.look(before))
    assert {"event": "cron_job", "ts_ms": NINE + 3_600_000, "name": "brief", "state": "paused:expired",
            "was": "scheduled"} in events


def test_with_the_reference_agent_a_held_run_is_dispatched_when_it_starts_and_read(project):
    """End to end, real time: the agent is down when the job falls due (the pass holds it); the
    reference agent starts; the next pass dispatches it once; the receipt turns to `read`."""
    from tests.conftest import SID as AGENT_SID
    from tests.conftest import Agent, now_ms

    def wait_until(condition, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "condition not reached"
            time.sleep(0.05)

    project.session(AGENT_SID, live=False)  # the agent's session, stopped a while ago
    added = project.run("cron", "add", "check", "--every", "1h", "--payload", "heartbeat-event", "--text",
                        "look at the build", clock=FakeClock(now_ms() - 2 * 3_600_000))
    assert added.code == 0, added.err
    held = project.run("cron", "tick", "--json").json()
    assert [w["name"] for w in held["waiting"]] == ["check"] and held["runs"] == []
    agent = Agent(project, "--turn-seconds", "0.1")
    try:
        wait_until(lambda: project.run("session", "which", "--json").json().get("state") == "live")
        [run] = project.run("cron", "tick", "--json").json()["runs"]
        assert run["status"] == "dispatched" and run["trigger"] == "catchup"
        agent.wait_for(lambda e: e["event"] == "turn_start" and e["text"].startswith("look at the build"))

        def receipt():
            return project.run("cron", "runs", "check", "--json").json()["runs"][0]["consumption"]["state"]

        wait_until(lambda: receipt() == "read")
    finally:
        agent.stop()
    assert len(project.run("cron", "runs", "check", "--json").json()["runs"]) == 1


@pytest.mark.parametrize(("until", "expected"), [
    ("2030-01-01T00:00Z", datetime(2030, 1, 1, tzinfo=UTC)),
    ("2030-01-01T00:00+02:00", datetime(2029, 12, 31, 22, tzinfo=UTC)),
    ("2030-01-01 00:00", datetime(2030, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))),  # naive: the job's zone
])
def test_until_takes_an_offset_or_a_time_in_the_jobs_zone(sched, until, expected):
    """An offset-bearing --until was refused for every cron job ("cannot also specify a timezone"):
    the job's zone applies to a naive time only."""
    sched.add(NINE, "hourly", "--cron", "0 * * * *", "--tz", "Europe/Berlin", "--payload", "heartbeat-event",
              "--text", "x", "--until", until)
    assert sched.job("hourly")["policy"]["untilMs"] == int(expected.timestamp() * 1000)
    sched.run(NINE, "cron", "update", "hourly", "--until", until)
    assert sched.job("hourly")["policy"]["untilMs"] == int(expected.timestamp() * 1000)


def test_a_preview_skips_ahead_to_the_next_window_as_the_walk_would(monkeypatch):
    """An `every` job outside its active hours jumps to its next window by arithmetic (the walk
    judged ~1,000 occurrences per job, 25 s for `cron list` of 3,650 such jobs): the runs, their
    skip counts and notes equal the occurrence-by-occurrence walk's, across DST and wrapping windows."""
    import random
    from pathlib import Path

    from sxctl.cron.policy.file import DAYS
    from sxctl.cron.policy.job import job_of
    from sxctl.cron.timeline import fate
    from sxctl.cron.timeline.limits import LimitUsage

    seed = random.randrange(2**32)
    rng = random.Random(seed)
    jumps = []

    def counted(*args):
        jumps.append(found := walk(*args))
        return found

    walk = fate._skip_ahead
    monkeypatch.setattr(fate, "_skip_ahead", counted)
    for case in range(40):
        every = rng.choice([60, 300, 3600, 5400]) * 1000  # a window of 2 h or more always meets one
        start = rng.randrange(0, 24 * 60, 15)
        end = (start + rng.randrange(120, 23 * 60, 15)) % (24 * 60)
        entry = {"activeHours": f"{start // 60:02}:{start % 60:02}-{end // 60:02}:{end % 60:02}",
                 "tz": rng.choice(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"])}
        if rng.random() < 0.5:
            entry["activeDays"] = sorted(rng.sample(DAYS, rng.randint(1, 6)), key=DAYS.index)
        now = int(datetime(2026, rng.choice([3, 10, 11]), rng.randint(1, 28), tzinfo=UTC).timestamp() * 1000)
        if case == 0:  # 02:45 CEST on the night clocks fall back: 02:00-02:30 comes round again in CET
            every, now, entry = 300_000, int(datetime(2026, 10, 25, 0, 40, tzinfo=UTC).timestamp() * 1000), \
                {"activeHours": "00:00-02:30", "tz": "Europe/Berlin"}
        anchor = now - rng.randrange(every)
        record = {"id": f"job-{case}", "name": f"job-{case}", "source": "user", "payload": {"kind": "heartbeat_event"},
                  "schedule": {"kind": "every", "everyMs": every, "anchorMs": anchor},
                  "lifecycle": {"status": "scheduled", "nextRunAtMs": anchor + every * rng.randint(1, 5)}}
        if case == 0:
            record["schedule"]["anchorMs"] = record["lifecycle"]["nextRunAtMs"] = now + 5 * MIN
        job = job_of(record, {"jobs": {record["id"]: entry}}, Path("/"))
        fast = fate.preview_runs(job, LimitUsage(0, None), now, 3)
        monkeypatch.setattr(fate, "_skip_ahead", lambda *args: None)
        slow = fate.preview_runs(job, LimitUsage(0, None), now, 3, budget=200_000)
        monkeypatch.setattr(fate, "_skip_ahead", counted)
        shown = [[(run["at_ms"], run["skipped"], run["note"]) for run in preview.runs] for preview in (fast, slow)]
        assert shown[0] == shown[1] and len(shown[0]) == 3, f"seed {seed}, case {case}: {record} {entry}"
    assert sum(found is not None for found in jumps) >= 10, f"seed {seed}: the arithmetic was hardly used"


def test_cron_next_from_a_future_time_starts_there_and_calls_nothing_overdue(sched):
    """`cron next NAME --from T` showed today's fires, the first "overdue"; runs before T still
    spend a job's --max-runs."""
    sched.add(NINE - HOUR, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "x")
    sched.add(NINE - HOUR, "thrice", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "x", "--max-runs", "3")
    sched.add(NINE - HOUR, "halted", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "x")
    assert sched.run(NINE - HOUR, "cron", "pause", "halted").code == 0
    later = NINE + 30 * 24 * HOUR + 1  # 2026-12-31T09:00:00.001Z
    for name, expected in (("daily", [later - 1 + 24 * HOUR, later - 1 + 48 * HOUR]), ("thrice", [])):
        fires = sched.run(NINE - HOUR, "cron", "next", name, "-n", "2", "--from", "2026-12-31T09:00:00.001Z",
                          "--json").json()["fires"]
        assert [fire["at_ms"] for fire in fires] == expected, name
        assert not any(fire["overdue"] for fire in fires)
    fires = sched.run(NINE - HOUR, "cron", "next", "-n", "9", "--from", "2026-12-31T10:00Z", "--include-paused",
                      "--json").json()["fires"]
    assert {fire["name"] for fire in fires} == {"daily", "halted"} and min(f["at_ms"] for f in fires) > later
    shown = sched.run(NINE - HOUR, "cron", "next", "daily", "-n", "1", "--from", "2026-12-31T10:00Z")
    assert "2027-01-01" in shown.out and "overdue" not in shown.out


def test_cron_next_stops_where_sxctl_stops_scheduling(sched):
    """Fires past 9999-01-01 (timeparse.LATEST_SCHEDULABLE_MS) were listed, as `(out of range)`."""
    sched.add(NINE, "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "x")
    for args in (("hourly",), ("--every", "1h")):
        fires = sched.run(NINE, "cron", "next", *args, "-n", "5", "--from", "9998-12-31T22:30Z", "--json").json()
        assert {fire["at_local"][:10] for fire in fires["fires"]} == {"9998-12-31"}, (args, fires)
        assert len(fires["fires"]) < 5
        assert sched.run(NINE, "cron", "next", *args, "--from", "9999-06-01T00:00Z", "--json").json()["fires"] == []


def test_stale_after_without_catch_up_skip_is_refused(sched):
    """`--stale-after` alone was kept and shown, though only `--catch-up skip` ever reads it."""
    sched.add(NINE, "poll", "--every", "1h", "--payload", "heartbeat-event", "--text", "x")
    result = sched.run(NINE, "cron", "update", "poll", "--stale-after", "10m")
    assert result.code == 2 and "--stale-after applies with --catch-up skip" in result.err
    assert sched.run(NINE, "cron", "update", "poll", "--catch-up", "skip", "--stale-after", "10m").code == 0


def test_a_mistyped_job_name_gets_the_names_close_to_it(sched):
    """Options and zones had did-you-mean hints; job names had none."""
    sched.add(NINE, "standup", "--every", "1d", "--payload", "heartbeat-event", "--text", "x")
    for command in (("cron", "show", "standpu"), ("cron", "pause", "standpu"), ("cron", "runs", "standpu")):
        result = sched.run(NINE, *command)
        assert result.code == 3 and "hint: did you mean standup?" in result.err, command
    assert "did you mean" not in sched.run(NINE, "cron", "show", "xyzzy").err


def test_a_zone_hint_never_suggests_a_name_that_is_refused(sched):
    """`--tz /etc/localtime` was told "did you mean localtime?", itself refused."""
    result = sched.run(NINE, "cron", "add", "q", "--every", "1h", "--tz", "/etc/localtime", "--payload",
                       "heartbeat-event", "--text", "x")
    assert result.code == 2 and "localtime?" not in result.err and "America/New_York" in result.err


def test_a_schedule_whose_next_fire_would_be_in_year_10000_has_none(sched):
    """`--cron "0 0 29 2 *" --from 9998-01-01` crashed (ValueError: year 10000 is out of range)."""
    result = sched.run(NINE, "cron", "next", "--cron", "0 0 29 2 *", "--from", "9998-01-01T00:00Z", "-n", "1")
    assert result.code == 0 and "no upcoming fires" in result.out


def test_a_preview_of_many_jobs_lists_each_target_projects_sessions_once(sched, monkeypatch):
    """Whether a job would wait for a live agent is the same for every job sending to one project
    at one instant: `cron list` of 10,000 jobs read the sessions folder 10,000 times (1.0 s; 0.34 s
    now, benchmarks/run.py (c) with a project)."""
    from sxctl.cron.timeline import hold

    for n in range(12):
        sched.add(NINE - MIN, f"job-{n}", "--every", "1h", "--payload", "agent-turn", "--text", "x")
    calls = []
    real = hold.list_sessions
    monkeypatch.setattr(hold, "list_sessions", lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    listed = sched.run(NINE + MIN, "cron", "list", "--json")  # all 12 due, no live agent: each waits
    assert listed.code == 0 and len(listed.json()["jobs"]) == 12
    assert len(calls) == 1


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_pass_lets_it_finish_its_run_then_says_so(sched, monkeypatch, signum):
    """SIGTERM (a service stopping) ended the pass between a dispatch and its terminal row: a sent
    message recorded `unknown`, and nothing said so (exit 143). Now the run it started is finished,
    no other is begun, what it did is shown, and it exits 130."""
    import os
    import signal

    from sxctl import faults

    for name in ("first", "second"):
        sched.add(NINE - MIN, name, "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
                  "--text", name, "--to", SID)
    sched.agent_at(NINE)
    sent = []

    def hit(point: str) -> None:
        if point == "after-dispatch" and not sent:
            sent.append(point)
            os.kill(os.getpid(), getattr(signal, signum))

    monkeypatch.setattr(faults, "hit", hit)
    result = sched.run(NINE, "cron", "tick", "--json")
    monkeypatch.undo()
    assert result.code == 130, result.out
    doc = result.json()
    assert doc["ok"] is False and doc["interrupted"] is True
    [run] = doc["runs"]
    assert run["status"] == "dispatched"
    assert [row["recordType"] for row in sched.ledger()] == ["started", "terminal"]
    assert "interrupted: the pass finished the 1 run(s) it had started and began no other" in result.err
    later = sched.tick(NINE + MIN)  # the next pass takes the rest, and finds nothing to settle
    assert later["reconciled"]["ownerLostAfterStart"] == 0 and len(later["runs"]) == 1


def test_a_job_a_pass_just_left_is_not_blamed_on_a_missing_crontab(sched):
    """The pass held the job for a live agent; the agent came back 30 s later, and `status` said
    "overdue and no tick is running; is `sxctl cron tick` in your crontab?" until the next pass."""
    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "x", "--hold-max", "1h")
    held = sched.tick(NINE + 3 * MIN)  # no live agent: held
    assert held["runs"] == [] and [w["name"] for w in held["waiting"]] == ["beat"]
    back = NINE + 3 * MIN + 30_000
    sched.agent_at(back)
    for view in (sched.run(back, "--session", SID, "status", "--json").json()["cron"]["overdue"],
                 [p for p in sched.run(back, "cron", "status", "--json").json()["problems"] if p["code"] == "overdue"],
                 [c for c in sched.run(back, "doctor", "--json").json()["checks"] if c["check"] == "overdue"]):
        assert view == []
    later = NINE + 10 * MIN  # and no pass since: now it is overdue everywhere
    sched.agent_at(later)
    assert sched.run(later, "--session", SID, "status", "--json").json()["cron"]["overdue"] == ["beat"]
    assert [c["check"] for c in sched.run(later, "doctor", "--json").json()["checks"] if c["check"] == "overdue"]


def test_a_hold_max_shorter_than_a_pass_interval_is_warned(sched):
    """`--hold-max 5` means 5 seconds: a held run is given up at the next pass. It was silent."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    added = sched.run(NINE, "cron", "add", "z", "--every", "1h", "--hold-max", "5", "--payload", "heartbeat-event",
                      "--text", "x")
    assert added.code == 0 and "z: --hold-max 5s is shorter than the minute between passes" in added.err
    assert "hold-max" not in sched.run(NINE, "cron", "update", "z", "--hold-max", "2m").err


def test_a_bad_flag_is_named_before_a_taken_name(sched):
    """`cron add x --active-hours 8-18` with a job x already there said only "already exists": the
    user fixed the name and met the next error."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    sched.add(NINE, "x", "--every", "1h", "--payload", "heartbeat-event", "--text", "x")
    again = sched.run(NINE, "cron", "add", "x", "--every", "1h", "--active-hours", "8-18", "--payload",
                      "heartbeat-event", "--text", "x")
    assert again.code == 2 and "invalid --active-hours '8-18'" in again.err


def test_a_jittered_catch_up_outside_active_hours_is_skipped_too(sched):
    """With --jitter the rule looked at the jittered time, not when the pass would send it: a
    catch-up went out at 18:12 past active hours ending 18:00."""
    sched.add(NINE - MIN, "jj", "--cron", "50 17 * * *", "--tz", "UTC", "--jitter", "20m", "--active-hours",
              "08:00-18:00", "--payload", "heartbeat-event", "--text", "x")
    at = NINE + 9 * 3_600_000 + 12 * MIN  # 18:12 UTC: late by more than any jitter of it, outside its hours
    sched.agent_at(at)
    report = sched.tick(at)
    assert report["runs"] == [] and [s["reason"] for s in report["skippedOccurrences"]] == ["inactive_hours"]


def test_a_pass_that_found_the_lock_busy_or_failed_does_not_excuse_an_overdue_job(sched):
    from tests.conftest import heartbeat_file

    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "x", "--to", SID)
    sched.agent_at(NINE - 2 * MIN)
    sched.tick(NINE - 2 * MIN)  # nothing due yet: a heartbeat
    beat = heartbeat_file(sched.root)
    for outcome in ("busy", "failed"):
        doc = json.loads(beat.read_text())
        doc.update(outcome=outcome, lastPassMs=NINE + 4 * MIN)
        if outcome == "busy":
            doc["busySinceMs"] = NINE - 2 * MIN
        beat.write_text(json.dumps(doc))
        at = NINE + 4 * MIN + 30_000
        sched.agent_at(at)
        assert sched.run(at, "--session", SID, "status", "--json").json()["cron"]["overdue"] == ["beat"], outcome
    [problem] = [p for p in sched.run(at, "cron", "status", "--json").json()["problems"] if p["code"] == "overdue"]
    assert problem["message"] == "job beat is overdue since 2026-12-01 09:00:00 UTC; is a tick running?"


def test_status_says_every_pass_stops_while_the_clock_is_behind_the_ledger(sched):
    """Passes and edits refuse (`clock_behind`) and doctor fails; `status` said nothing."""
    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "x", "--to", SID)
    sched.agent_at(NINE)
    assert len(sched.tick(NINE)["runs"]) == 1
    back = NINE - 3_600_000  # the clock set back an hour
    assert sched.run(back, "cron", "tick", "--json").json()["error"]["code"] == "clock_behind"
    doc = sched.run(back, "--session", SID, "status", "--json").json()
    [problem] = [p for p in doc["problems"] if p["code"] == "cron_clock_behind"]
    assert problem["message"].startswith("every pass stops: this clock (")
    assert "cron_clock_behind" not in {p["code"] for p in sched.run(NINE, "--session", SID, "status",
                                                                     "--json").json()["problems"]}


def test_a_hold_max_the_policy_file_cannot_hold_is_named_by_its_flag(sched):
    """It said "invalid value for $.jobs['<a uuid>'].holdMaxMs": the id of a job never made."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    result = sched.run(NINE, "cron", "add", "b", "--every", "1h", "--hold-max", "99999999999999999999", "--payload",
                       "heartbeat-event", "--text", "x")
    assert result.code == 2 and result.err.startswith("sxctl: --hold-max is too long (at most "), result.err
    assert not (sched.root / ".scheduler" / "cron-jobs.json").exists()


def test_a_run_given_up_for_want_of_an_agent_is_no_failure_doctor_pages_for(sched):
    """With --hold-max 0 and the agent stopped, every occurrence is given up, as the job asked:
    doctor failed (exit 9) on each as a broken job, so `doctor -q` paged whenever the agent was
    down. Nothing was sent: a warning; the agent's absence is the sessions' finding."""
    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--hold-max", "0",
              "--payload", "heartbeat-event", "--text", "beat")
    report = sched.tick(NINE)
    assert report["runs"] and report["runs"][0]["status"] == "failed", report
    doctor = sched.run(NINE + MIN, "doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "failed runs"]
    assert check["status"] == "warn" and check["message"].endswith("; nothing was sent"), check


def test_a_one_shot_given_up_for_want_of_an_agent_is_lost_and_fails_doctor(sched):
    """Newcomer: a one-shot given up after a weekend off was `failed` in `cron list`, `cron runs`
    and status, but `doctor -q` (the monitor probe) exited 0: a recurring job's next occurrence
    will be sent, a one-shot has no other run."""
    sched.add(NINE - MIN, "once", "--at", "2026-12-01T09:00Z", "--hold-max", "0", "--payload", "heartbeat-event",
              "--text", "once")
    report = sched.tick(NINE)
    assert report["runs"] and report["runs"][0]["status"] == "failed", report
    doctor = sched.run(NINE + MIN, "doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "failed runs"]
    assert doctor.code == 9 and check["status"] == "fail", check
    assert check["message"].endswith("; nothing was sent, and a one-shot has no other run"), check


def test_a_job_pinned_to_a_session_that_is_not_there_fails_doctor(sched):
    """The relief for a run given up for want of an agent hid a job whose `--to` names a
    session that does not exist: every run failed, `doctor -q` exited 0. Only a job for the
    live agent is relieved."""
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "pinned", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--to", "2026_01_01_no_such",
              "--payload", "agent-turn", "--text", "b")
    assert sched.run(NINE, "cron", "run", "pinned").code != 0
    doctor = sched.run(NINE + MIN, "doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "failed runs"]
    assert doctor.code == 9 and check["status"] == "fail", check


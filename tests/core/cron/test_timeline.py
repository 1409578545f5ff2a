"""One timeline (issue: one model of a job): a catch-up's hold is measured from the occurrence it
stands for, and every view shows the fate the pass then acts on."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes

SID = "2026_12_04_weekend_agent"
MIN = 60_000
HOUR = 60 * MIN


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)


FRIDAY_NOON = ms(2026, 12, 4, 12, 0)  # a Friday


@pytest.fixture
def world(project):
    """The project with one session; `agent_at(ms)` makes the agent live at `ms`; `run(ms, …)`
    runs a command at `ms` and checks the store comis will read."""

    class World:
        root = project.root
        folder = project.root / ".scorpiox" / "sessions" / SID

        def agent_at(self, at: int) -> None:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / "stats.json").write_text(json.dumps({"updated_ms": at, "model": "m"}))

        def run(self, at: int, *args: str):
            result = project.run(*args, clock=FakeClock(at))
            store = self.root / ".scheduler" / "cron-jobs.json"
            if store.exists():
                assert check_store_bytes(store.read_bytes()) == [], args
            return result

        def ok(self, at: int, *args: str):
            result = self.run(at, *args)
            assert result.code == 0, result.out + result.err
            return result

        def tick(self, at: int) -> dict:
            return self.ok(at, "cron", "tick", "--json").json()

        def delivered(self) -> list[str]:
            inbox = self.folder / "inbox"
            found = sorted(inbox.glob("*.json")) + sorted(inbox.glob("done/*.json"))
            return [json.loads(path.read_text())["text"] for path in found]

    return World()


def test_a_weekend_off_delivers_mondays_catch_up_once_when_the_agent_appears(world):
    """`0 22 * * *` with --hold-max 24h, machine off Friday 21:00 to Monday 08:30, agent started
    at 08:40: the hold runs from Sunday 22:00 (10.5 h ago), not Friday's; it was given up."""
    world.agent_at(FRIDAY_NOON)
    world.ok(FRIDAY_NOON, "cron", "add", "nightly", "--cron", "0 22 * * *", "--tz", "UTC", "--hold-max", "24h",
             "--payload", "agent-turn", "--text", "nightly review")
    assert world.tick(ms(2026, 12, 4, 21, 0))["runs"] == []
    monday = ms(2026, 12, 7, 8, 30)  # the machine is back; the agent is not (last seen Friday noon)
    report = world.tick(monday)
    assert report["runs"] == []
    [held] = report["waiting"]
    assert (held["name"], held["reason"], held["dueSinceMs"], held["giveUpAtMs"]) == (
        "nightly", "no_live_session", ms(2026, 12, 4, 22, 0), None)  # Sunday 22:00 + 24h, when Monday's comes due:
    # each occurrence renews the hold, so it waits as long as the agent is away (no give-up time to promise)
    world.agent_at(monday + 10 * MIN)
    [run] = world.tick(monday + 10 * MIN)["runs"]
    assert (run["name"], run["status"], run["trigger"], run["scheduledForMs"]) == (
        "nightly", "dispatched", "catchup", ms(2026, 12, 4, 22, 0))
    assert world.tick(monday + 11 * MIN)["runs"] == []
    [text] = world.delivered()
    assert text.startswith("nightly review\n") and "for 3 missed occurrences" in text, text


def test_a_standup_after_two_days_off_is_delivered_when_the_agent_starts_at_half_past_twelve(world):
    world.agent_at(FRIDAY_NOON)
    world.ok(FRIDAY_NOON, "cron", "add", "standup", "--cron", "0 9 * * *", "--tz", "UTC",
             "--payload", "agent-turn", "--text", "plan the day")
    assert world.tick(ms(2026, 12, 4, 18, 0))["runs"] == []  # then two days off
    for hour in (8, 9, 10, 11, 12):  # the machine is back at 08:00, the agent only at 12:30
        assert world.tick(ms(2026, 12, 7, hour, 0) + 30_000)["runs"] == []
    world.agent_at(ms(2026, 12, 7, 12, 30))
    [run] = world.tick(ms(2026, 12, 7, 12, 30))["runs"]
    assert (run["status"], run["trigger"]) == ("dispatched", "catchup")
    assert [text.splitlines()[0] for text in world.delivered()] == ["plan the day"]


def test_past_the_hold_of_the_latest_occurrence_the_catch_up_is_given_up(world):
    """The hold still ends: measured from Sunday 22:00, --hold-max 6h ends Monday 04:00."""
    world.agent_at(FRIDAY_NOON)
    world.ok(FRIDAY_NOON, "cron", "add", "nightly", "--cron", "0 22 * * *", "--tz", "UTC", "--hold-max", "6h",
             "--payload", "agent-turn", "--text", "nightly review")
    assert world.tick(ms(2026, 12, 4, 21, 0))["runs"] == []
    [held] = world.tick(ms(2026, 12, 7, 3, 0))["waiting"]
    assert (held["dueSinceMs"], held["giveUpAtMs"]) == (ms(2026, 12, 4, 22, 0), ms(2026, 12, 7, 4, 0))
    runs = world.tick(ms(2026, 12, 7, 4, 1))["runs"]
    assert [(r["status"], r["errorKind"]) for r in runs] == [("failed", "precondition")]
    world.agent_at(ms(2026, 12, 7, 8, 40))
    assert world.tick(ms(2026, 12, 7, 8, 40))["runs"] == [] and world.delivered() == []


# --- every view tells the same next run, with the same mark ----------------------------------------

TUESDAY_1710 = ms(2026, 12, 1, 17, 10)


def _views(world, at: int, name: str) -> dict[str, tuple]:
    """Each view's next run of the only job `name` (time, mark), human and --json."""
    listed = world.ok(at, "cron", "list", "--json").json()["jobs"]
    [row] = [r for r in listed if r["job"]["name"] == name]
    [fire] = world.ok(at, "cron", "next", name, "-n", "1", "--json").json()["fires"]
    status = world.ok(at, "--session", SID, "status", "--json").json()["cron"]
    upcoming = [r for r in world.ok(at, "--session", SID, "next", "--json").json()["rows"] if r["source"] == "cron"]
    return {"cron list": (row["next_run_ms"], row["next_mark"]), "cron next": (fire["at_ms"], fire["mark"]),
            "status": (status["next_due_ms"], status["next_due_mark"]),
            "next": (upcoming[0]["at_ms"], upcoming[0]["mark"])}


def _human(world, at: int, name: str) -> dict[str, str]:
    return {"cron list": world.ok(at, "cron", "list", "--tz", "UTC").out,
            "cron next": world.ok(at, "cron", "next", name, "-n", "1", "--tz", "UTC").out,
            "status": world.ok(at, "--session", SID, "status").out,
            "next": world.ok(at, "--session", SID, "next", "--tz", "UTC").out}


@pytest.mark.parametrize("case", ["active_hours", "held", "limited", "maintenance"])
def test_every_view_shows_the_next_run_and_its_mark_as_the_pass_will_decide_it(world, case):
    """`status` said "next due in 14m59s" for an every-15m job outside its active hours while
    `cron next` said tomorrow 09:00; `cron list` said `scheduled` for a held job."""
    at = TUESDAY_1710
    world.agent_at(at)
    add = ["cron", "add", "job", "--payload", "agent-turn", "--text", "x"]
    if case == "active_hours":
        world.ok(at - HOUR, *add, "--every", "15m", "--anchor", "2026-12-01 00:00", "--active-hours", "09:00-17:00",
                 "--tz", "UTC")
        expected = (ms(2026, 12, 2, 9, 0), None)
    elif case == "held":  # due at 17:00, no live agent since 16:00: the pass holds it
        world.agent_at(at - 70 * MIN)
        world.ok(at - 2 * HOUR, *add, "--cron", "0 17 * * *", "--tz", "UTC", "--hold-max", "2h")
        expected = (ms(2026, 12, 1, 17, 0), "waiting for agent")
    elif case == "limited":  # its one run today went out at 17:00: the next is tomorrow's first
        world.ok(at - 2 * HOUR, *add, "--every", "1h", "--anchor", "2026-12-01 00:00", "--max-runs-per-day", "1",
                 "--tz", "UTC")
        world.agent_at(ms(2026, 12, 1, 17, 0) + 30_000)
        assert [r["status"] for r in world.tick(ms(2026, 12, 1, 17, 0) + 30_000)["runs"]] == ["dispatched"]
        world.agent_at(at)
        expected = (ms(2026, 12, 2, 0, 0), None)
    else:  # a maintenance window until 19:00 skips 17:30 and 18:30
        world.ok(at - HOUR, *add, "--every", "1h", "--anchor", "2026-12-01T00:30Z")
        world.ok(at, "cron", "pause", "--all", "--until", "2026-12-01T19:00Z", "--reason", "migration")
        expected = (ms(2026, 12, 1, 19, 30), None)
    views = _views(world, at, "job")
    assert set(views.values()) == {expected}, views
    shown = _human(world, at, "job")
    for view, text in shown.items():
        if expected[1] is not None:
            assert expected[1] in text, (view, text)
    day, clock = datetime.fromtimestamp(expected[0] / 1000, UTC).strftime("%Y-%m-%d %H:%M").split()
    for view in ("cron list", "cron next", "next"):
        assert re.search(rf"{day}[ T]{clock}", shown[view]), (view, shown[view])
    if case == "held":
        assert " waiting " in shown["cron list"]  # the STATE column: the pass holds it now
        assert "1 scheduled (1 of them waiting for the agent)" in shown["status"]  # as status counts it


def test_a_due_run_is_overdue_in_every_view_once_the_passes_missed_it_and_not_before(world):
    """`cron list`, `cron next` and `next` marked a run `overdue` the moment it came due, while
    `status`, doctor and metrics said no job was overdue until 2 minutes had passed with no pass:
    one word, two meanings. A due run is `due`; it is `overdue` where status says so."""
    world.ok(TUESDAY_1710 - HOUR, "cron", "add", "job", "--every", "10m", "--anchor", "2026-12-01 00:00",
             "--tz", "UTC", "--payload", "agent-turn", "--text", "x")
    due_at = ms(2026, 12, 1, 17, 10)
    world.agent_at(due_at - 5 * MIN)
    assert world.tick(due_at - 5 * MIN)["runs"]  # a pass at 17:05 (a catch-up since 16:10): 17:10 is next

    def told(at: int) -> tuple:
        world.agent_at(at)
        [fire] = world.ok(at, "cron", "next", "job", "-n", "1", "--json").json()["fires"]
        status = world.ok(at, "--session", SID, "status", "--json").json()
        checks = world.run(at, "doctor", "--json").json()["checks"]
        doctor = [c["check"] for c in checks if c["check"] == "overdue"]
        metric = re.search(r"^sxctl_cron_overdue_jobs\{.*\} (\d+)$", world.ok(at, "metrics").out, re.M)
        assert metric, "no sxctl_cron_overdue_jobs sample"
        return (set(_views(world, at, "job").values()), (fire["due"], fire["overdue"]), status["cron"]["overdue"],
                bool(doctor), int(metric[1]), "(overdue)" in world.ok(at, "cron", "list").out)

    assert told(due_at + MIN) == ({(due_at, "due")}, (True, False), [], False, 0, False)
    assert told(due_at + 3 * MIN) == ({(due_at, "overdue")}, (True, True), ["job"], True, 1, True)
    [run] = world.tick(due_at + 3 * MIN)["runs"]  # the pass comes: it runs, nothing is overdue
    assert run["status"] == "dispatched"
    assert told(due_at + 4 * MIN) == ({(ms(2026, 12, 1, 17, 20), None)}, (False, False), [], False, 0, False)


def test_a_hold_renewed_by_each_occurrence_promises_no_give_up_time_the_pass_would_not_keep(world):
    """Newcomer: an --every 15m heartbeat with --hold-max 30m was "held … gives up at 07:30" in
    every view, then 07:45, 08:00 …: each new occurrence renews the hold, and it never gave up.
    A hold the next occurrence does not reach still gives its time, and the pass keeps it; a
    weekday job's hold is followed over the nights to the weekend that ends it."""
    world.agent_at(FRIDAY_NOON - 4 * HOUR)  # last seen 08:00 on Friday
    common = ("--tz", "UTC", "--payload", "agent-turn", "--text", "x")
    world.ok(FRIDAY_NOON - HOUR, "cron", "add", "beat", "--every", "15m", "--anchor", "2026-12-04 00:00",
             "--hold-max", "30m", *common)
    world.ok(FRIDAY_NOON - HOUR, "cron", "add", "hourly", "--every", "1h", "--anchor", "2026-12-04 00:00",
             "--hold-max", "30m", *common)
    world.ok(FRIDAY_NOON - 4 * HOUR, "cron", "add", "weekday", "--cron", "0 9 * * 1-5", "--hold-max", "25h", *common)
    at = FRIDAY_NOON + 5 * MIN
    report = world.tick(at)
    until = {row["name"]: row["giveUpAtMs"] for row in report["waiting"]}
    saturday_ten = ms(2026, 12, 5, 10, 0)  # Friday 09:00 + 25h: Monday's 09:00 comes later
    assert until == {"beat": None, "hourly": FRIDAY_NOON + 30 * MIN, "weekday": saturday_ten}
    fires = {f["name"]: f["waiting"]["giveUpAtMs"] for f in world.ok(at, "cron", "next", "--json").json()["fires"]
             if f["waiting"]}
    assert fires == until
    said = world.ok(at, "cron", "next", "-n", "3").out
    assert "waiting for agent as long as it takes" in said and "waiting for agent until 2026-12-04 12:30" in said
    assert "each occurrence renews its --hold-max, 30m" in world.ok(at + MIN, "cron", "tick").out
    simulated = world.ok(at, "cron", "simulate", "--from", "2026-12-04T12:10Z", "--until", "2026-12-04T13:00Z",
                         "--agent-down", "2026-12-04T12:00Z..2026-12-04T14:00Z", "--json").json()["events"]
    assert {e["job"]: e["until_ms"] for e in simulated if e["fate"] == "held"}["beat"] is None
    given = world.tick(FRIDAY_NOON + 31 * MIN)  # the hourly one's hold ended as promised; beat still waits
    assert [r["name"] for r in given["givenUp"]] == ["hourly"]
    assert "beat" in {row["name"] for row in given["waiting"]}


@pytest.mark.parametrize("live", [False, True])
def test_a_list_of_runs_counts_a_held_first_run_against_the_daily_and_lifetime_limits(world, live):
    """Attacker: with no live agent, `cron next -n 12` of an hourly job with --max-runs-per-day 3
    listed 01:00-04:00 (the pass skips 04:00), and with --max-runs 3 four runs: the first run,
    held for the agent, was not counted, though the runs after it assume the agent came."""
    start = ms(2027, 6, 1, 0, 0) + 30_000
    world.agent_at(start if live else start - HOUR)
    common = ("--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "x")
    world.ok(start, "cron", "add", "daily", *common, "--max-runs-per-day", "3")
    world.ok(start, "cron", "add", "lifetime", *common, "--max-runs", "3")
    at = start + 10_000
    fires = world.ok(at, "cron", "next", "-n", "30", "--json").json()["fires"]
    hours = {name: [datetime.fromtimestamp(f["at_ms"] / 1000, UTC).strftime("%d %H") for f in fires
                    if f["name"] == name] for name in ("daily", "lifetime")}
    assert hours["lifetime"] == ["01 01", "01 02", "01 03"]
    assert hours["daily"][:4] == ["01 01", "01 02", "01 03", "02 00"], hours
    rows = [r for r in world.ok(at, "next", "-n", "30", "--json").json()["rows"] if r["source"] == "cron"]
    assert [r["at_ms"] for r in rows] == sorted(f["at_ms"] for f in fires)[:len(rows)]


def test_a_sub_minute_job_whose_day_is_spent_runs_again_tomorrow_in_every_view(world, monkeypatch):
    """Attacker: an every-second job with --max-runs-per-day 1 that had run was "no run ahead:
    50000 occurrence(s) ahead all skipped" in `cron list`, `cron next` and `status` (the pass
    ran it again the next day), after walking 50,000 occurrences per view (6 s for `cron list`).
    A spent day is skipped to the next day's first occurrence, by arithmetic, as inactive hours are."""
    from sxctl.cron.timeline import fate

    start = ms(2027, 6, 1, 0, 0)
    world.agent_at(start)
    world.ok(start, "cron", "add", "sec", "--cron", "* * * * * *", "--tz", "Europe/Berlin", "--max-runs-per-day", "1",
             "--payload", "heartbeat-event", "--text", "s")
    world.agent_at(start + 2_000)
    assert [r["status"] for r in world.tick(start + 2_000)["runs"]] == ["dispatched"]
    judged = []
    monkeypatch.setattr(fate, "occurrence_fate", lambda *a, _f=fate.occurrence_fate, **k: judged.append(1) or _f(*a, **k))
    at = start + 10_000
    tomorrow = ms(2027, 6, 1, 22, 0)  # Berlin's next midnight
    [row] = world.ok(at, "cron", "list", "--json").json()["jobs"]
    assert (row["next_run_ms"], row["next_mark"]) == (tomorrow, None), row
    assert len(judged) < 100
    assert [f["at_ms"] for f in world.ok(at, "cron", "next", "sec", "-n", "2", "--json").json()["fires"]] == [
        tomorrow, ms(2027, 6, 2, 22, 0)]
    status = world.ok(at, "--session", SID, "status", "--json").json()
    assert status["cron"]["next_due_ms"] == tomorrow
    assert not [p for p in status["problems"] if p["code"].startswith("cron_")], status["problems"]


def test_a_skip_says_which_rule_an_inactive_day_or_a_late_pass_broke_in_the_pass_and_in_simulate(world):
    """A weekend skipped by --active-days was reported "(inactive hours)" by the pass and by
    `cron simulate`, and so was an occurrence inside the hours that a pass after them skipped."""
    world.agent_at(FRIDAY_NOON)
    world.ok(FRIDAY_NOON, "cron", "add", "weekdays", "--cron", "0 9 * * *", "--tz", "UTC", "--active-days", "mon-fri",
             "--payload", "agent-turn", "--text", "x")
    world.ok(FRIDAY_NOON, "cron", "add", "afternoon", "--cron", "0 16 * * *", "--tz", "UTC", "--active-hours",
             "09:00-17:00", "--payload", "agent-turn", "--text", "y")
    simulated = world.ok(FRIDAY_NOON, "cron", "simulate", "--from", "2026-12-04T12:00Z", "--until",
                         "2026-12-07T10:00Z", "--machine-down", "2026-12-04T13:00Z..2026-12-07T08:30Z", "--tz", "UTC")
    monday = ms(2026, 12, 7, 8, 31)
    world.agent_at(monday)
    passed = world.ok(monday, "cron", "tick").out
    days = "outside its active days mon,tue,wed,thu,fri UTC"
    late = "outside its active hours 09:00-17:00 UTC (the pass came after them)"
    assert "skipped weekdays: 2 occurrences, 2026-12-05 09:00 – 2026-12-06 09:00 UTC (" + days + ")" in passed
    assert f"skipped afternoon: 3 occurrences, 2026-12-04 16:00 – 2026-12-06 16:00 UTC ({late})" in passed
    assert "inactive hours" not in passed + simulated.out
    assert days in simulated.out and late in simulated.out, simulated.out


def test_a_job_none_of_whose_times_is_in_its_active_hours_is_said_to_never_run_without_walking_to_9999(
        world, monkeypatch):
    """`0 22 * * *` with --active-hours 09:30-12:00 has no run: every view walked 50,000
    occurrences (seconds per view) to find none, and `status` now asks every job's timeline."""
    from sxctl.cron.policy import job as job_module

    world.agent_at(TUESDAY_1710)
    added = world.run(TUESDAY_1710, "cron", "add", "late", "--cron", "0 22 * * *", "--tz", "UTC",
                      "--active-hours", "09:30-12:00", "--payload", "agent-turn", "--text", "x")
    assert added.code == 0
    assert "late: none of its times falls in its active hours 09:30-12:00 UTC: it never runs" in added.err
    assert "never runs" not in world.run(TUESDAY_1710, "cron", "add", "fine", "--cron", "0 10 * * *", "--tz", "UTC",
                                         "--active-hours", "09:30-12:00", "--payload", "agent-turn",
                                         "--text", "x").err
    walked = []
    real = job_module.Job.next_after
    monkeypatch.setattr(job_module.Job, "next_after", lambda self, bound: walked.append(1) or real(self, bound))
    [row] = [r for r in world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"] if r["job"]["name"] == "late"]
    assert (row["next_run_ms"], row["next_note"]) == (
        None, "never runs: none of its times falls in its active hours 09:30-12:00 UTC")
    status = world.ok(TUESDAY_1710, "--session", SID, "status", "--json").json()["cron"]
    assert status["next_due_job"] == "fine" and len(walked) < 50


def test_a_due_job_the_pass_skips_is_not_reported_deferred_past_max_per_pass(world):
    """Found by the differential test: with three jobs run, a fourth whose due occurrence lies
    outside its active hours was reported `deferred (--max-per-pass)`, though the pass skips it and
    `cron list` showed its next run in the window."""
    at = ms(2026, 12, 1, 8, 0)
    world.agent_at(at)
    for name in ("a", "b", "c"):
        world.ok(at - HOUR, "cron", "add", name, "--every", "1h", "--anchor", "2026-12-01 00:00",
                 "--payload", "agent-turn", "--text", name)
    world.ok(at - HOUR, "cron", "add", "late", "--every", "1h", "--anchor", "2026-12-01 00:00", "--tz", "UTC",
             "--active-hours", "09:30-12:00", "--payload", "agent-turn", "--text", "late")
    [row] = [r for r in world.ok(at, "cron", "list", "--json").json()["jobs"] if r["job"]["name"] == "late"]
    assert row["next_run_ms"] == ms(2026, 12, 1, 10, 0)
    report = world.tick(at)
    assert sorted(run["name"] for run in report["runs"]) == ["a", "b", "c"]
    assert report["deferred"] == []
    assert [(s["name"], s["reason"]) for s in report["skippedOccurrences"]] == [("late", "inactive_hours")]


# --- found by the attacker of this round -------------------------------------------------------------

def test_a_catch_up_never_folds_an_occurrence_whose_jittered_time_has_not_come(world):
    """`--every 10m --jitter 9m`, first pass an hour late: the catch-up swallowed the 10:00
    occurrence, not due until 10:00 + its offset, and told the agent it was missed."""
    at = ms(2026, 12, 6, 9, 0)
    world.agent_at(at)
    world.ok(at, "cron", "add", "h", "--every", "10m", "--anchor", "2026-12-06 09:00", "--jitter", "9m",
             "--payload", "agent-turn", "--text", "x")
    offset = world.ok(at, "cron", "show", "h", "--json").json()["policy"]["jitterOffsetMs"]
    assert offset > 2
    late = ms(2026, 12, 6, 10, 0) + offset // 2  # 10:00 has come, its run time (10:00 + offset) not yet
    world.agent_at(late)
    [run] = world.tick(late)["runs"]
    assert run["trigger"] == "catchup" and run["skipped_last_ms"] == ms(2026, 12, 6, 9, 50)
    [row] = world.ok(late, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == ms(2026, 12, 6, 10, 0) + offset  # still to run, on its own
    world.agent_at(ms(2026, 12, 6, 10, 0) + offset)
    [own] = world.tick(ms(2026, 12, 6, 10, 0) + offset)["runs"]
    assert (own["trigger"], own["scheduledForMs"]) == ("scheduled", ms(2026, 12, 6, 10, 0))


def test_the_views_fold_the_occurrences_a_catch_up_stands_for_as_the_pass_does(world):
    """After a weekend off, `cron next` listed Saturday's occurrence as a second, `overdue` run
    (with `"overdue": false` in `next --json`), though the pass sends one catch-up for both."""
    world.agent_at(FRIDAY_NOON)
    world.ok(FRIDAY_NOON, "cron", "add", "w", "--cron", "0 22 * * *", "--tz", "UTC", "--hold-max", "24h",
             "--payload", "agent-turn", "--text", "x")
    assert world.tick(ms(2026, 12, 4, 21, 0))["runs"] == []
    at = ms(2026, 12, 7, 8, 35)
    fires = world.ok(at, "cron", "next", "w", "-n", "2", "--json").json()["fires"]
    assert [(f["at_ms"], f["mark"], f["due"]) for f in fires] == [
        (ms(2026, 12, 4, 22, 0), "waiting for agent", True), (ms(2026, 12, 7, 22, 0), None, False)]
    rows = [r for r in world.ok(at, "--session", SID, "next", "--json").json()["rows"] if r["source"] == "cron"]
    assert [(r["at_ms"], r["mark"]) for r in rows][:2] == [(f["at_ms"], f["mark"]) for f in fires]


def test_a_run_not_yet_due_with_no_hold_is_marked_as_what_will_happen(world):
    """`--hold-max 0` and no live agent: the next run, 5 minutes ahead, was marked `given up`."""
    world.agent_at(ms(2026, 12, 6, 8, 0))
    world.ok(ms(2026, 12, 6, 8, 59), "cron", "add", "r", "--every", "10m", "--anchor", "2026-12-06 09:00",
             "--hold-max", "0", "--payload", "agent-turn", "--text", "x")
    assert [r["status"] for r in world.tick(ms(2026, 12, 6, 9, 1))["runs"]] == ["failed"]  # 09:00, given up
    [fire] = world.ok(ms(2026, 12, 6, 9, 5), "cron", "next", "r", "-n", "1", "--json").json()["fires"]
    assert (fire["at_ms"], fire["mark"]) == (ms(2026, 12, 6, 9, 10), "will be given up")
    assert world.tick(ms(2026, 12, 6, 9, 6))["givenUp"] == []


def test_a_catch_up_note_in_a_fall_back_hour_says_which_reading(world):
    """`*/30 * * * *` America/New_York, agent down over 2026-11-01 01:00-02:00 (shown twice): the
    agent was told `01:00 to 01:00`."""
    before = ms(2026, 11, 1, 5, 10)  # 01:10 EDT
    world.agent_at(before)
    world.ok(before, "cron", "add", "half", "--cron", "*/30 * * * *", "--tz", "America/New_York",
             "--payload", "agent-turn", "--text", "x")
    back = ms(2026, 11, 1, 6, 20)  # 01:20 EST, the second reading
    world.agent_at(back)
    [run] = world.tick(back)["runs"]
    [text] = world.delivered()
    assert "2026-11-01 01:30 EDT to 2026-11-01 01:00 EST (America/New_York)]" in text, text
    assert run["trigger"] == "catchup"


def test_an_every_job_whose_occurrences_all_miss_its_active_days_says_it_never_runs(world):
    """`--every 7d` anchored on a Sunday with --active-days mon-fri: `cron list` said `-`, then
    "no run ahead" after judging 50,000 weeks one at a time (1.6 s for one job of a list); it is
    told as a cron job whose times all miss its hours is, when it is added and in every view."""
    world.agent_at(TUESDAY_1710)
    added = world.ok(TUESDAY_1710, "cron", "add", "wk", "--every", "7d", "--anchor", "2026-12-06 12:00", "--tz",
                     "UTC", "--active-hours", "09:00-17:00", "--active-days", "mon-fri", "--payload", "agent-turn",
                     "--text", "x")
    assert "none of its times falls in its active hours 09:00-17:00 mon,tue,wed,thu,fri UTC: it never runs" \
        in added.err, added.err
    [row] = world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] is None
    assert row["next_note"] == "never runs: none of its times falls in its active hours 09:00-17:00 " \
        "mon,tue,wed,thu,fri UTC", row["next_note"]
    assert "never runs" in world.ok(TUESDAY_1710, "cron", "list", "--tz", "UTC").out


def test_an_every_job_that_meets_its_hours_only_in_summer_time_is_not_said_never_to_run(world):
    """`--every 1d` at 15:12 New York winter time is 16:12 in summer time: with --active-hours
    16:00-17:00 its first run is the first day of summer time, not "never"."""
    at = ms(2026, 12, 6, 20, 12)  # 15:12 EST
    world.agent_at(at)
    added = world.ok(at, "cron", "add", "daily", "--every", "1d", "--anchor", "2026-12-06 15:12",
                     "--tz", "America/New_York", "--active-hours", "16:00-17:00", "--payload", "agent-turn",
                     "--text", "x")
    assert "never runs" not in added.err, added.err
    [row] = world.ok(at, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == ms(2027, 3, 14, 20, 12), row  # 16:12 EDT on the day clocks go forward
    assert row["next_note"] == "active hours 16:00-17:00 America/New_York", row["next_note"]


def test_a_catch_up_counts_only_the_occurrences_its_policy_would_have_run(world):
    """An every-15m job active 08:00-20:00 with at most 10 runs a day, machine off overnight: the
    agent was told "a catch-up run for 99 missed occurrences", night hours and runs past the
    daily limit included."""
    at = ms(2026, 12, 6, 19, 0)
    world.agent_at(at)
    world.ok(at, "cron", "add", "hb", "--every", "15m", "--anchor", "2026-12-06 19:00", "--tz", "UTC",
             "--active-hours", "08:00-20:00", "--max-runs-per-day", "10", "--payload", "agent-turn", "--text", "hb")
    world.agent_at(at + 15 * MIN)
    assert world.tick(at + 15 * MIN)["runs"][0]["trigger"] == "scheduled"  # 19:15
    back = ms(2026, 12, 7, 8, 40)  # the first pass after the night: 19:30 ... 08:30 are due
    world.agent_at(back)
    [run] = world.tick(back)["runs"]
    # 19:30 and 19:45 (the rest of the 6th is outside 08:00-20:00 or past 10), then 08:00-08:30 on the 7th
    assert (run["scheduledForMs"], run["skipped_occurrences"], run["skipped_last_ms"]) == (
        ms(2026, 12, 6, 19, 30), 4, ms(2026, 12, 7, 8, 30))
    text = world.delivered()[-1]
    assert "a catch-up run for 5 missed occurrences, 2026-12-06 19:30 to 2026-12-07 08:30 (UTC)" in text, text


# --- found by the newcomer of this round -------------------------------------------------------------

def test_a_paused_job_has_the_same_mark_in_cron_list_as_in_cron_next(world):
    """`cron list --json` gave `next_mark: null` for a paused job where `next` and `cron next`
    said `paused`; `cron show` said `hold up to 0.0s` for --hold-max 0."""
    world.agent_at(TUESDAY_1710)
    world.ok(TUESDAY_1710, "cron", "add", "p", "--every", "1h", "--hold-max", "0", "--payload", "agent-turn",
             "--text", "x")
    world.ok(TUESDAY_1710, "cron", "pause", "p")
    [row] = world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"]
    [fire] = world.ok(TUESDAY_1710, "cron", "next", "p", "--include-paused", "-n", "1", "--json").json()["fires"]
    assert row["next_mark"] == fire["mark"] == "paused"
    assert "does not wait for a live agent (--hold-max 0)" in world.ok(TUESDAY_1710, "cron", "show", "p").out


def test_cron_simulate_from_a_time_ahead_of_now_says_what_the_first_pass_meets(world):
    world.agent_at(TUESDAY_1710)
    world.ok(TUESDAY_1710, "cron", "add", "j", "--every", "1h", "--payload", "agent-turn", "--text", "x")
    ahead = world.run(TUESDAY_1710, "cron", "simulate", "--from", "2026-12-02T17:00Z", "--until", "2026-12-02T18:00Z")
    assert ahead.code == 0
    assert "sxctl: warning: --from is 23h50m after now: the first pass rehearses as if no pass ran until then" \
        in ahead.err, ahead.err
    now = world.run(TUESDAY_1710, "cron", "simulate", "--from", "2026-12-01T17:10Z", "--until", "2026-12-01T18:00Z")
    assert now.code == 0 and "after now" not in now.err


# --- found by the second attacker of this round ------------------------------------------------------

def test_a_catch_up_records_as_skipped_what_its_daily_limit_leaves_out(world):
    """`0 * * * *` with --max-runs-per-day 2, first pass at 20:00: 18 occurrences were neither run
    nor recorded, and the catch-up's note covered 01:00-02:00 only."""
    world.agent_at(ms(2026, 12, 7, 0, 0))
    world.ok(ms(2026, 12, 7, 0, 0), "cron", "add", "d", "--cron", "0 * * * *", "--tz", "UTC", "--max-runs-per-day",
             "2", "--payload", "agent-turn", "--text", "hi")
    world.agent_at(ms(2026, 12, 7, 20, 0))
    report = world.tick(ms(2026, 12, 7, 20, 0))
    [run] = report["runs"]
    assert (run["scheduledForMs"], run["skipped_occurrences"]) == (ms(2026, 12, 7, 1, 0), 1)
    assert [(s["reason"], s["count"]) for s in report["skippedOccurrences"]] == [("max_runs_per_day", 18)]
    assert sum(row["count"] for row in report["outcomes"]) == 20  # 01:00 ... 20:00, each told once
    runs = world.ok(ms(2026, 12, 7, 20, 1), "cron", "runs", "d", "--json").json()
    assert [(s["count"], s["reason"]) for s in runs["skipped"]] == [(18, "max_runs_per_day")]


def test_a_long_catch_up_is_counted_the_same_by_the_pass_and_cron_simulate(world):
    """Every minute, active 09:00-17:00, two days down: the count stopped at a time budget, so the
    pass and `cron simulate` told the agent different spans (and both the wrong end)."""
    world.agent_at(ms(2026, 12, 7, 0, 0))
    world.ok(ms(2026, 12, 7, 0, 0), "cron", "add", "m", "--cron", "* * * * *", "--tz", "UTC",
             "--active-hours", "09:00-17:00", "--payload", "agent-turn", "--text", "hi")
    back = ms(2026, 12, 9, 10, 0)
    simulated = world.ok(back, "cron", "simulate", "--from", "2026-12-09T10:00Z", "--until", "2026-12-09T10:00Z",
                         "--json").json()["events"]
    world.agent_at(back)
    report = world.tick(back)
    [run] = report["runs"]
    assert (run["scheduledForMs"], run["skipped_occurrences"], run["skipped_last_ms"]) == (
        ms(2026, 12, 7, 9, 0), 1020, back)
    # 00:01-08:59 skipped before the catch-up; the nights it folds in, recorded too
    assert sorted((s["reason"], s["count"]) for s in report["skippedOccurrences"]) == [
        ("inactive_hours", 539), ("inactive_hours", 1920)]
    [told] = [e for e in simulated if e["fate"] == "catch_up"]
    assert (told["occurrence_ms"], told["count"]) == (ms(2026, 12, 7, 9, 0), 1021)
    assert "a catch-up run for 1021 missed occurrences, 2026-12-07 09:00 to 2026-12-09 10:00 (UTC)" \
        in world.delivered()[-1]


def test_a_time_only_in_the_spring_forward_gap_is_not_said_to_never_run(world):
    """`30 2 * * *` New York, active 03:00-04:00: it runs at 03:30 EDT on the day clocks spring
    forward, but `cron add` warned it never runs and `cron list` said so."""
    world.agent_at(TUESDAY_1710)
    added = world.run(TUESDAY_1710, "cron", "add", "gap", "--cron", "30 2 * * *", "--tz", "America/New_York",
                      "--active-hours", "03:00-04:00", "--payload", "agent-turn", "--text", "x")
    assert added.code == 0 and "never runs" not in added.err
    [row] = world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == ms(2027, 3, 14, 7, 30), row["next_note"]  # 03:30 EDT


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC"])
def test_a_job_of_a_dst_zone_whose_times_miss_its_active_hours_and_its_gap_never_runs(world, zone, monkeypatch):
    """Found by the differential test (seed 4059884830): `0 */3 * * *` New York, active
    09:30-12:00, has no run (its 09:00 and 12:00 miss the window; no time of it is in the 02:00
    spring-forward gap), but every zone with DST was taken to move every time an hour on, so
    each view walked 50,000 occurrences (seconds per `cron list`, a CI timeout)."""
    from sxctl.cron.policy import job as job_module

    world.agent_at(TUESDAY_1710)
    added = world.run(TUESDAY_1710, "cron", "add", "late", "--cron", "0 */3 * * *", "--tz", zone,
                      "--active-hours", "09:30-12:00", "--payload", "agent-turn", "--text", "x")
    assert added.code == 0 and "late: none of its times falls in its active hours 09:30-12:00" in added.err
    walked = []
    real = job_module.Job.next_after
    monkeypatch.setattr(job_module.Job, "next_after", lambda self, bound: walked.append(1) or real(self, bound))
    [row] = world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] is None and row["next_mark"] == "never runs" and not walked


def test_a_hold_ends_when_the_active_hours_it_would_be_sent_in_end(world):
    """`30 2 * * *` New York, active 02:00-03:00, no agent at 02:31: `cron next` and the pass said
    it waits until 02:30 the next day; at 03:00 the pass skips it (a late run is not sent outside
    its active hours)."""
    world.agent_at(ms(2026, 12, 7, 0, 0))
    world.ok(ms(2026, 12, 7, 0, 0), "cron", "add", "n5", "--cron", "30 2 * * *", "--tz", "America/New_York",
             "--active-hours", "02:00-03:00", "--payload", "agent-turn", "--text", "x")
    at = ms(2026, 12, 7, 7, 31)  # 02:31 New York
    [held] = world.tick(at)["waiting"]
    [fire] = world.ok(at, "cron", "next", "n5", "-n", "1", "--json").json()["fires"]
    assert held["giveUpAtMs"] == fire["waiting"]["giveUpAtMs"] == ms(2026, 12, 7, 8, 0)  # 03:00 New York
    assert [(s["reason"], s["count"]) for s in world.tick(ms(2026, 12, 7, 8, 10))["skippedOccurrences"]] == [
        ("inactive_hours", 1)]


def test_a_job_with_no_run_ahead_is_marked_and_named_by_status(world):
    world.agent_at(TUESDAY_1710)
    world.ok(TUESDAY_1710, "cron", "add", "late", "--cron", "0 12 * * *", "--tz", "UTC", "--active-hours",
             "09:00-10:00", "--payload", "agent-turn", "--text", "x")
    world.ok(TUESDAY_1710, "cron", "add", "weekend", "--every", "1h", "--active-days", "sat,sun", "--payload",
             "agent-turn", "--text", "x")
    rows = {r["job"]["name"]: r for r in world.ok(TUESDAY_1710, "cron", "list", "--json").json()["jobs"]}
    assert rows["late"]["next_mark"] == "never runs"
    assert (rows["weekend"]["next_run_ms"], rows["weekend"]["next_note"]) == (
        ms(2026, 12, 5, 0, 10), "active days sat,sun UTC")  # said as what it is, not "active hours 00:00-24:00"
    problems = world.ok(TUESDAY_1710, "--session", SID, "status", "--json").json()["problems"]
    assert [p["message"] for p in problems if p["code"] == "cron_never_runs"] == [
        "cron job late has no run ahead: none of its times falls in its active hours 09:00-10:00 UTC"]


def test_a_policy_file_naming_no_active_day_is_invalid(world):
    world.agent_at(TUESDAY_1710)
    world.ok(TUESDAY_1710, "cron", "add", "j", "--every", "1h", "--active-days", "mon-fri", "--payload", "agent-turn",
             "--text", "x")
    path = world.root / ".scheduler" / "sxctl-policy.json"
    doc = json.loads(path.read_text())
    [entry] = doc["jobs"].values()
    entry["activeDays"] = []
    path.write_text(json.dumps(doc))
    result = world.run(TUESDAY_1710, "cron", "validate")
    assert result.code == 5 and "activeDays" in result.out + result.err and "must name a day" in result.out + result.err


def test_next_says_how_late_a_held_run_is_as_cron_next_does(world):
    """`sxctl next` showed IN `now` for a run due two hours ago that waits for the agent."""
    world.agent_at(TUESDAY_1710 - 3 * HOUR)
    world.ok(TUESDAY_1710 - 4 * HOUR, "cron", "add", "late", "--cron", "0 15 * * *", "--tz", "UTC",
             "--payload", "agent-turn", "--text", "x")
    shown = world.ok(TUESDAY_1710, "--session", SID, "next", "--tz", "UTC").out
    line = next(line for line in shown.splitlines() if "cron late" in line)
    assert "2h10m ago" in line and "waiting for agent" in line, line
    assert "2h10m ago" in world.ok(TUESDAY_1710, "cron", "next", "late", "-n", "1").out


def _jittered_job(world, at: int, *args: str, least_ms: int) -> tuple[str, int]:
    """A job added with `args` whose --jitter offset (fixed by its id) is at least `least_ms`:
    the first of a few names tried, so the cut under test is always exercised."""
    for n in range(20):
        name = f"j{n}"
        world.ok(at, "cron", "add", name, *args, "--payload", "heartbeat-event", "--text", name)
        offset = world.ok(at, "cron", "show", name, "--json").json()["policy"]["jitterOffsetMs"]
        if offset >= least_ms:
            return name, offset
        world.ok(at, "cron", "remove", name, "--yes")
    pytest.fail("no id among 20 gave a long enough offset")


def test_a_jittered_run_is_sent_before_its_active_span_ends(world):
    """`50 17 * * *` UTC, --active-hours 08:00-18:00, --jitter 20h: the occurrence at 17:50 is
    inside its hours, but its run went out at 17:50 + the offset (the next morning at night).
    The run is cut to a minute (the pass's period) before the span ends, and every view says so;
    a pass after the span's end does not send it (attacker: cut to 17:59:59, the minutely pass
    sent it at 18:00:07)."""
    at = ms(2026, 12, 7, 9, 0)  # a Monday
    world.agent_at(at)
    name, offset = _jittered_job(world, at, "--cron", "50 17 * * *", "--tz", "UTC", "--active-hours", "08:00-18:00",
                                 "--jitter", "20h", least_ms=20 * MIN)
    cut = ms(2026, 12, 7, 17, 59)
    [row] = world.ok(at, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == cut, offset
    assert world.ok(at, "cron", "next", name, "--json").json()["fires"][0]["at_ms"] == cut
    assert world.tick(cut - 1000)["runs"] == []
    late = ms(2026, 12, 7, 18, 0, 7)
    world.agent_at(late)
    report = world.ok(late, "cron", "simulate", "--from", "2026-12-07T18:00:07Z", "--until", "2026-12-07T18:01Z",
                      "--json").json()
    assert [e["fate"] for e in report["events"] if e["job"] == name] == ["skipped"]  # its hours are over
    world.agent_at(cut)
    [run] = world.tick(cut)["runs"]
    assert run["scheduledForMs"] == ms(2026, 12, 7, 17, 50) and run["status"] == "dispatched"


def test_a_jittered_run_is_sent_by_its_until_at_the_latest(world):
    """`--every 1h --until 10:05 --jitter 55m`: the 10:00 occurrence is before --until, its
    run was sent up to 10:55, after it. It is cut to a minute before --until."""
    at = ms(2026, 12, 7, 8, 30)
    world.agent_at(at)
    name, offset = _jittered_job(world, at, "--every", "1h", "--anchor", "2026-12-07 09:00Z",
                                 "--until", "2026-12-07T10:05Z", "--jitter", "55m", least_ms=6 * MIN)
    runs = world.ok(at, "cron", "next", name, "-n", "3", "--json").json()["fires"]
    assert [r["at_ms"] for r in runs] == [ms(2026, 12, 7, 9, 0) + offset, ms(2026, 12, 7, 10, 4)]
    world.agent_at(ms(2026, 12, 7, 9, 0) + offset)
    world.tick(ms(2026, 12, 7, 9, 0) + offset)
    world.agent_at(ms(2026, 12, 7, 10, 4) - 1000)
    assert world.tick(ms(2026, 12, 7, 10, 4) - 1000)["runs"] == []
    world.agent_at(ms(2026, 12, 7, 10, 4))
    [run] = world.tick(ms(2026, 12, 7, 10, 4))["runs"]
    assert run["scheduledForMs"] == ms(2026, 12, 7, 10, 0)


def test_nothing_is_sent_after_until_not_a_catch_up_either(world):
    """Attacker: `--every 5m --until 10:12`, no pass until 10:30: the first pass expired the job
    and still sent a catch-up standing for occurrences after --until."""
    at = ms(2026, 12, 7, 10, 0)
    world.agent_at(at)
    world.ok(at, "cron", "add", "u", "--every", "5m", "--anchor", "2026-12-07T10:00Z", "--until", "2026-12-07T10:12Z",
             "--payload", "heartbeat-event", "--text", "u")
    late = ms(2026, 12, 7, 10, 30)
    world.agent_at(late)
    report = world.tick(late)
    assert report["runs"] == [] and [p["name"] for p in report["paused"]] == ["u"]
    assert "--until" in report["paused"][0]["reason"] or "until" in json.dumps(report["paused"][0])
    assert world.delivered() == []
    shown = world.ok(late, "cron", "show", "u").out  # newcomer: it printed the policy's dict
    assert "paused by sxctl (expired) at 2026-12-07 10:30" in shown and "{'reason'" not in shown, shown
    doctor = world.run(late, "doctor", "--json").json()  # newcomer: status named it, doctor did not
    assert [c["fix"] for c in doctor["checks"] if c["check"] == "paused jobs"] == ["sxctl cron resume -- u"]


def test_a_catch_up_counts_what_the_day_had_left_not_a_fresh_daily_limit(world):
    """Newcomer: a catch-up's note and counts ignored the runs already made that day: with
    --max-runs-per-day 5 and 3 runs made by 09:30, an outage to 13:00 was told as 4 missed
    occurrences that day (room for 1 more, besides the catch-up itself)."""
    at = ms(2026, 12, 7, 9, 0)
    world.agent_at(at)
    world.ok(at, "cron", "add", "d", "--every", "10m", "--anchor", "2026-12-07T09:00Z",
             "--max-runs-per-day", "5", "--payload", "heartbeat-event", "--text", "d")
    for minute in (10, 20, 30):
        world.agent_at(at + minute * MIN)
        report = world.tick(at + minute * MIN)
        assert len(report["runs"]) == 1, (minute, report)
    late = ms(2026, 12, 7, 13, 0)
    world.agent_at(late)
    report = world.tick(late)
    [run] = report["runs"]
    assert run["scheduledForMs"] == ms(2026, 12, 7, 9, 40) and run["skipped_occurrences"] == 1, run
    skipped = {s["reason"]: s["count"] for s in report["skippedOccurrences"]}
    assert skipped == {"max_runs_per_day": 20 - 1}, skipped  # 09:50 … 13:00 folded: room for 1


@pytest.mark.parametrize("flags", [["--active-hours", "08:00-18:00"], ["--active-days", "sun"]])
def test_a_one_shot_refuses_active_hours_it_would_ignore(world, flags):
    """Attacker: `--at … --active-hours 08:00-18:00` was taken, shown by `cron show`, and the
    message went out at 20:00."""
    at = ms(2026, 12, 7, 9, 0)
    added = world.run(at, "cron", "add", "o", "--at", "2026-12-07T20:00Z", *flags, "--payload", "heartbeat-event",
                      "--text", "o")
    assert added.code == 2 and "are for recurring jobs" in added.err, added.err
    assert "o" not in [row["job"]["name"] for row in world.ok(at, "cron", "list", "--json").json()["jobs"]]


def test_cron_next_and_next_compute_each_job_only_as_far_as_the_first_n_runs_of_all_reach(world, monkeypatch):
    """`cron next -n 100` of 3,000 jobs took 37 s: every job's 100 runs were judged, and all but
    100 thrown away. Each job's preview now goes only as far as the first N of all can reach; what
    is shown is what judging every job's N runs shows, and fewer runs are judged."""
    from sxctl.cron.timeline import fate

    at = ms(2026, 12, 4, 16, 0)  # a Friday
    world.agent_at(at)
    schedules = (("--every", "7m"), ("--every", "1h", "--active-hours", "09:00-12:00", "--tz", "Asia/Tokyo"),
                 ("--cron", "*/20 8-18 * * mon-fri", "--tz", "Europe/Berlin"), ("--cron", "0 9 * * 1"),
                 ("--every", "1d", "--max-runs", "2"), ("--at", "2026-12-05T10:00Z"), ("--every", "30m", "--jitter", "5m"))
    for n, schedule in enumerate(schedules * 3):
        world.ok(at, "cron", "add", f"j{n}", *schedule, "--payload", "heartbeat-event", "--text", f"j{n}")
    from sxctl.cron.timeline import previews

    judged: list[int] = []  # the runs each preview was asked for
    real = fate.preview_runs
    monkeypatch.setattr(previews, "preview_runs", lambda *a, **k: (judged.append(a[3]), real(*a, **k))[1])
    merged = world.ok(at, "cron", "next", "-n", "40", "--json").json()["fires"]
    asked = sum(judged)
    named = world.ok(at, "cron", "next", "j3", "-n", "5", "--json").json()["fires"]
    nexts = world.ok(at, "next", "-n", "40", "--json").json()
    monkeypatch.setattr(previews, "_merged", lambda found, count, preview: [  # every job's 40 runs, as before
        found.previews.__setitem__(job_id, preview(found.jobs[job_id], count)) for job_id in list(found.previews)])
    every = world.ok(at, "cron", "next", "-n", "40", "--json").json()["fires"]
    assert merged == every and len(merged) == 40
    assert [f["name"] for f in named] == ["j3"] * 5 and named == world.ok(
        at, "cron", "next", "j3", "-n", "5", "--json").json()["fires"]
    assert [(r["at_ms"], r["name"]) for r in nexts["rows"] if r["source"] == "cron"] == \
        [(f["at_ms"], f["name"]) for f in every][:len([r for r in nexts["rows"] if r["source"] == "cron"])]
    assert asked < 21 * 40 / 2, asked


def test_an_every_job_whose_period_does_not_divide_a_week_is_said_never_to_run_when_it_never_does(world):
    """`--every 5h` at :30 with active hours 09:00-09:05 never runs: `cron list` said "no run
    ahead: 239999 occurrence(s) ahead all skipped" after 1.4 s of walking (40 such jobs: 57 s).
    With 10:00-11:00 its 10:30 comes every fifth day, and that is its next run."""
    at = ms(2026, 12, 1, 1, 0)
    world.agent_at(at)
    for name, hours in (("never", "09:00-09:05"), ("tenish", "10:00-11:00")):
        world.ok(at, "cron", "add", name, "--every", "5h", "--anchor", "2026-12-01 00:30", "--active-hours", hours,
                 "--tz", "UTC", "--payload", "heartbeat-event", "--text", name)
    rows = {row["job"]["name"]: row for row in world.ok(at, "cron", "list", "--json").json()["jobs"]}
    assert rows["never"]["next_mark"] == "never runs", rows["never"]
    assert rows["tenish"]["next_run_ms"] == ms(2026, 12, 1, 10, 30), rows["tenish"]

"""A pass's report (issue 25 item 4): one outcome per occurrence, counts that add up, spans with
dates when they cross a day, "no live agent since" the agent was last seen; the warning for a
sub-minute --every; --max-per-pass (and its deprecated --max-runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sxctl.cron.run.pass_report import PassReport
from tests.core.cron.test_scheduling import MIN, NINE

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

HOUR = 60 * MIN
STOPPED = NINE - 4 * HOUR - 11 * MIN  # the agent's last stats.json: 2026-12-01 04:49 UTC
BACK = STOPPED + 25 * HOUR  # the first pass after a day down: 2026-12-02 05:49 UTC


def _a_day_down(sched) -> None:
    added = STOPPED - HOUR
    sched.add(added, "half", "--every", "30m", "--payload", "heartbeat-event", "--text", "x")
    sched.add(added, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event", "--text", "d")
    sched.add(added, "held", "--every", "1h", "--payload", "heartbeat-event", "--text", "h", "--hold-max", "0")
    sched.add(added, "ny", "--every", "1h", "--tz", "America/New_York", "--payload", "heartbeat-event", "--text", "n",
              "--active-hours", "08:00-18:00", "--catch-up", "skip", "--stale-after", "1h")
    sched.agent_at(STOPPED)
    sched.tick(STOPPED)


def test_a_day_of_downtime_is_one_readable_outcome_per_occurrence(sched):
    _a_day_down(sched)
    result = sched.run(BACK, "cron", "tick")
    assert result.code == 0 and result.err == ""  # said once, on stdout: no warning repeats it
    assert result.out.splitlines() == [
        "gave up held: 25 occurrences, 2026-12-01 05:49 – 2026-12-02 05:49 UTC, no live agent since "
        "2026-12-01 04:49 UTC (longer than its --hold-max, 0s)",
        # the hold runs from the occurrence a catch-up stands for: the latest, just due
        "waiting half: 50 occurrences, 2026-12-01 05:19 – 2026-12-02 05:49 UTC, no live agent since "
        "2026-12-01 04:49 UTC (waits as long as it takes: each occurrence renews its --hold-max, 24h)",
        "waiting daily: due since 2026-12-01 09:00 UTC, no live agent since 2026-12-01 04:49 UTC "
        "(waits as long as it takes: each occurrence renews its --hold-max, 24h)",
        "skipped ny: 23 occurrences, 2026-12-01 05:49 – 2026-12-02 03:49 UTC (stale: more than --stale-after 1h "
        "late)",  # in the display zone
        "skipped ny: 2 occurrences, 04:49–05:49 UTC (outside its active hours 08:00-18:00 America/New_York)",
    ]


def test_the_json_report_has_one_row_per_outcome_and_counts_that_add_up(sched):
    _a_day_down(sched)
    doc = sched.tick(BACK)
    rows = {(row["name"], row["fate"], row.get("reason")): row for row in doc["outcomes"]}
    assert {key: row["count"] for key, row in rows.items()} == {
        ("half", "held", None): 50, ("held", "given_up", None): 25, ("daily", "held", None): 1,
        ("ny", "skipped", "stale"): 23, ("ny", "skipped", "inactive_hours"): 2}
    assert doc["occurrences"] == {"given_up": 25, "held": 51, "skipped": 25, "total": 101}  # the fates that happened
    assert sum(row["count"] for row in doc["outcomes"]) == doc["occurrences"]["total"]
    assert rows[("held", "given_up", None)]["agentLastSeenMs"] == STOPPED
    assert rows[("daily", "held", None)]["agentLastSeenMs"] == STOPPED
    assert rows[("ny", "skipped", "stale")]["zone"] == "America/New_York"
    assert [w["agentLastSeenMs"] for w in doc["waiting"]] == [STOPPED, STOPPED]
    assert doc["warnings"] == []
    # the given-up run is still recorded as a failed precondition run (the ledger's word)
    assert sorted((r["name"], r["status"]) for r in doc["runs"]) == [("held", "failed")]


def test_a_catch_up_run_is_one_line_with_what_it_stands_for(sched):
    sched.add(NINE - 10 * MIN, "quarter", "--every", "15m", "--payload", "heartbeat-event", "--text", "q")
    sched.agent_at(NINE + HOUR)
    result = sched.run(NINE + HOUR, "cron", "tick")
    [line] = result.out.splitlines()
    assert line.startswith("ran quarter (catchup for 4 occurrences, 09:05–09:50 UTC): dispatched → ")
    assert result.err == ""


def test_an_agent_never_seen_is_said_so(sched):
    sched.add(NINE - HOUR, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "d")
    result = sched.run(NINE + MIN, "cron", "tick")
    assert result.out == ("waiting daily: due since 09:00 UTC, no agent seen there yet (waits as long as it takes: "
                          "each occurrence renews its --hold-max, 24h)\n")


@pytest.mark.parametrize(("first", "last", "expected"), [
    (NINE, NINE, "1 occurrence at 09:00 UTC"),
    (NINE - 24 * HOUR, NINE - 24 * HOUR, "1 occurrence at 2026-11-30 09:00 UTC"),
    (NINE - 2 * HOUR, NINE, "3 occurrences, 07:00–09:00 UTC"),
    (NINE - 26 * HOUR, NINE - 24 * HOUR, "3 occurrences, 2026-11-30 07:00–09:00 UTC"),
    (NINE - 25 * HOUR, NINE, "3 occurrences, 2026-11-30 08:00 – 2026-12-01 09:00 UTC"),
    (NINE, NINE + 30_000, "3 occurrences, 09:00:00–09:00:30 UTC"),
])
def test_spans_show_dates_when_not_today_or_across_a_day(first, last, expected):
    report = PassReport("b", NINE + 5 * MIN, Path("/"))
    count = 1 if first == last else 3
    assert report.what({"count": count, "firstMs": first, "lastMs": last, "zone": "UTC"}) == expected


def test_spans_are_in_the_display_zone_not_the_jobs(monkeypatch):
    """A job's own zone never changes where the pass's lines show its times: TZ's zone does."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    report = PassReport("b", NINE, Path("/"))  # 18:00 in Tokyo
    row = {"count": 2, "firstMs": NINE - 6 * HOUR, "lastMs": NINE - 5 * HOUR, "zone": "America/New_York"}
    assert report.what(row) == "2 occurrences, 12:00–13:00 JST"


def test_a_span_across_a_clock_change_labels_both_ends(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    change = 1_792_890_000_000  # 2026-10-25T01:00Z: Berlin goes from CEST back to CET
    report = PassReport("b", change, Path("/"))
    row = {"count": 3, "firstMs": change - HOUR, "lastMs": change + HOUR, "zone": "UTC"}
    assert report.what(row) == "3 occurrences, 02:00 CEST–03:00 CET"


# --- a sub-minute --every ---------------------------------------------------------------------------

def test_a_sub_minute_every_warns_that_the_pass_runs_once_a_minute(sched):
    added = sched.run(NINE, "cron", "add", "fast", "--every", "30s", "--payload", "heartbeat-event", "--text", "x")
    assert added.code == 0
    assert "fast: --every 30s is shorter than a minute" in added.err and "runs once a minute" in added.err
    doc = sched.run(NINE, "cron", "add", "faster", "--every", "10s", "--payload", "heartbeat-event", "--text", "x",
                    "--json")
    assert doc.code == 0 and doc.json()["warnings"][0].startswith("faster: --every 10s is shorter than a minute")
    updated = sched.run(NINE, "cron", "update", "fast", "--every", "45s", "--json")
    assert updated.code == 0 and "--every 45s is shorter than a minute" in updated.json()["warnings"][0]
    quiet = sched.run(NINE, "cron", "update", "fast", "--every", "1m", "--json")
    assert quiet.code == 0 and "warnings" not in quiet.json() and quiet.err == ""


# --- --max-per-pass ---------------------------------------------------------------------------------

def test_max_per_pass_defers_and_its_old_name_still_works_with_a_warning(sched):
    for name in ("a", "b", "c"):
        sched.add(NINE - HOUR, name, "--every", "1h", "--payload", "heartbeat-event", "--text", name)
    sched.agent_at(NINE)
    doc = sched.tick(NINE, "--max-per-pass", "2")
    assert [row["fate"] for row in doc["outcomes"]] == ["ran", "ran", "deferred"]
    assert doc["occurrences"]["deferred"] == 1
    sched.agent_at(NINE + HOUR)
    old = sched.run(NINE + HOUR, "cron", "tick", "--max-runs", "1")
    assert old.code == 0
    assert "--max-runs on cron tick/run is deprecated: use --max-per-pass" in old.err
    # c, deferred at 09:00, has waited longest: it runs first now (its 09:00 occurrence folded in)
    assert old.out.splitlines()[0].startswith("ran c (catchup for 2 occurrences, 09:00–10:00 UTC): dispatched")
    assert old.out.splitlines()[1:] == ["deferred a: due 10:00 UTC (more than --max-per-pass due)",
                                        "deferred b: due 10:00 UTC (more than --max-per-pass due)"]
    both = sched.run(NINE + HOUR, "cron", "tick", "--max-runs", "1", "--max-per-pass", "2")
    assert both.code == 2 and "give only --max-per-pass" in both.err
    helps = sched.run(NINE, "cron", "tick", "--help").out
    assert "--max-per-pass" in helps and "--max-runs" not in helps


def test_more_jobs_due_than_a_pass_takes_are_taken_longest_waiting_first(sched):
    """Six jobs due every 5 minutes, a pass every 5 minutes taking 3: no job is starved, each
    runs at least every other pass (store order would run the first three every time)."""
    names = [f"j{n}" for n in range(6)]
    for name in names:
        sched.add(NINE - 5 * MIN, name, "--every", "5m", "--payload", "heartbeat-event", "--text", name)
    ran: dict[str, int] = dict.fromkeys(names, 0)
    for n in range(6):
        at = NINE + n * 5 * MIN
        sched.agent_at(at)
        doc = sched.tick(at)
        for row in doc["outcomes"]:
            if row["fate"] == "ran":
                ran[row["name"]] += 1
    assert ran == dict.fromkeys(names, 3), ran


def test_hold_max_0_is_documented_as_no_wait(sched):
    helps = " ".join(sched.run(NINE, "cron", "add", "--help").out.split())
    assert "0 does not wait" in helps

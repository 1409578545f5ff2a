"""Cron occurrences across a clock change by arithmetic (sxctl/cron/timeline/occurrences.py): exact times
and counts on both sides of both Europe/Berlin changes of 2026 (spring forward 2026-03-29 01:00Z,
02:00 -> 03:00; fall back 2026-10-25 01:00Z, 03:00 -> 02:00), the same as the pass's own
`next_run` one occurrence at a time, and at a cost that does not grow with the occurrences."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from sxctl.clock import FakeClock
from sxctl.cron.timeline.catchup import missed_between
from sxctl.cron.timeline.schedule import CronPattern, load_cron_zone, next_run


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


SPRING, FALL = ms("2026-03-29T01:00:00Z"), ms("2026-10-25T01:00:00Z")
BERLIN = load_cron_zone("Europe/Berlin")


def walked(schedule, after, until):
    """The occurrences in (after, until] one `next_run` at a time: what successive passes run."""
    found, at = [], after
    while (step := next_run(schedule, at)) is not None and step[0] <= until:
        found.append(step[0])
        at = step[0]
    return found


@pytest.mark.parametrize("change", [SPRING, FALL], ids=["spring", "fall"])
def test_every_second_runs_on_elapsed_time_through_a_change(change):
    schedule = {"kind": "cron", "expr": "* * * * * *", "tz": "Europe/Berlin"}
    at, fires = change - 7_500, []
    for _ in range(15):
        at, dst = next_run(schedule, at)
        fires.append(at)
    assert fires == [change - 7_000 + 1000 * i for i in range(15)]
    assert missed_between(schedule, change - 3_600_000, change + 3_600_000) == (7200, change - 3_599_000,
                                                                                   change + 3_600_000)


def test_a_fixed_hour_every_second_pattern_follows_the_policy():
    """`* * 2 * * *`: the skipped 02:xx:xx fire shifted by the gap (01:00Z-01:59:59Z); in the
    repeated hour only the first pass (00:00Z-00:59:59Z) fires."""
    schedule = {"kind": "cron", "expr": "* * 2 * * *", "tz": "Europe/Berlin"}
    assert next_run(schedule, SPRING - 1000) == (SPRING, True)
    assert missed_between(schedule, SPRING - 72_000_000, SPRING + 72_000_000) == (
        3600, SPRING, SPRING + 3_599_000)
    assert next_run(schedule, FALL - 3_600_000 - 1000) == (FALL - 3_600_000, True)
    assert next_run(schedule, FALL - 1000)[0] == FALL + 86_400_000  # next day, 02:00 CET
    assert missed_between(schedule, FALL - 72_000_000, FALL + 3_600_000 * 3) == (
        3600, FALL - 3_600_000, FALL - 1000)


@pytest.mark.parametrize(("expr", "zone", "around"), [
    ("*/20 * * * *", "Europe/Berlin", SPRING), ("*/20 * * * *", "Europe/Berlin", FALL),
    ("30 2 * * *", "Europe/Berlin", SPRING), ("30 2 * * *", "Europe/Berlin", FALL),
    ("0 * * * *", "America/New_York", ms("2026-03-08T07:00Z")), ("59 1 * * *", "America/New_York", ms("2026-11-01T06:00Z")),
    ("15,45 1-3 * * *", "Pacific/Chatham", ms("2026-09-26T13:45Z")),
    ("*/10 * * * *", "Australia/Lord_Howe", ms("2026-10-03T15:30Z")),
    ("*/10 1 * * *", "Australia/Lord_Howe", ms("2026-04-04T15:00Z")),
    ("*/30 * * * * *", "Australia/Lord_Howe", ms("2026-10-03T15:30Z")),  # a 30-minute gap, every 30 s
    ("*/20 * * * *", "Pacific/Apia", ms("2011-12-29T10:00Z")), ("0 12 * * *", "Pacific/Apia", ms("2011-12-29T10:00Z")),
])
@pytest.mark.parametrize(("before_h", "after_h"), [(5, 5), (1, 0), (0, 1), (-1, 3)])
def test_counts_agree_with_what_the_pass_runs(expr, zone, around, before_h, after_h):
    """Every occurrence once: a shifted gap time that lands on a real one counts once."""
    schedule = {"kind": "cron", "expr": expr, "tz": zone}
    after, until = around - before_h * 3_600_000 + 17_000, around + after_h * 3_600_000
    runs = walked(schedule, after, until)
    assert missed_between(schedule, after, until) == ((len(runs), runs[0], runs[-1]) if runs else None)


def test_counting_does_not_walk_the_occurrences(monkeypatch):
    """What makes it fast: croniter is asked a few times per stretch of constant offset and per
    matching day, not once per second (7,200 occurrences here, across a change)."""
    from croniter import croniter

    calls = []
    real = croniter.get_next
    monkeypatch.setattr(croniter, "get_next", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    schedule = {"kind": "cron", "expr": "* * * * * *", "tz": "Europe/Berlin"}
    assert missed_between(schedule, SPRING - 3_600_000, SPRING + 3_600_000)[0] == 7200
    assert missed_between(schedule, FALL - 3_600_000, FALL + 3_600_000)[0] == 7200
    at = SPRING - 7_500
    for _ in range(15):
        at = next_run(schedule, at)[0]
    assert len(calls) < 100
    assert CronPattern.parse("* * * * * *").count_between(SPRING - 86_400_000 * 30, SPRING, BERLIN, 10_000, 5) == 10_000
    apia = {"kind": "cron", "expr": "* * * * * *", "tz": "Pacific/Apia"}  # 2011-12-30 was skipped whole
    assert missed_between(apia, ms("2011-12-29T09:59:59Z"), ms("2011-12-29T10:00:05Z"))[0] == 6
    assert len(calls) < 200


@pytest.mark.parametrize("now", [ms("2026-09-21T07:00:00Z"), SPRING + 2_000, FALL + 2_000])
def test_an_every_second_job_five_occurrences_late_misses_five(project, now):
    folder = project.root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": now}))
    env = project.env(SXCTL_PROJECT=str(project.root), TZ="UTC")
    added = project.run("cron", "add", "often", "--cron", "* * * * * *", "--tz", "Europe/Berlin",
                        "--payload", "heartbeat-event", "--text", "beat", env=env, clock=FakeClock(now - 6_000))
    assert added.code == 0, added.err
    report = project.run("cron", "tick", "--json", env=env, clock=FakeClock(now)).json()
    [run] = report["runs"]
    assert run["skipped_occurrences"] == 5 and report["skipped_missed_total"] == 5

"""--jitter against the year's real gaps: a jitter accepted in December for `0 0,12 * * *` in
Europe/Berlin swallowed the 12:00 run on 2027-03-28 (DST starts: 00:00 and 12:00 are 11 h apart),
because the check sampled 64 occurrences ahead. It now checks a year of occurrences, DST changes
included, and the pass never runs an occurrence at or after the next one (a hand-edited policy)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import croniter
import pytest

from sxctl.cron.policy.jitter import check_jitter, jitter_offset_ms
from sxctl.cron.timeline.gaps import shortest_gap
from sxctl.cron.timeline.schedule import next_run
from sxctl.errors import UsageError
from tests.core.cron.test_scheduling import NINE

from . import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

SECOND, MIN, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000
BERLIN = ("--cron", "0 0,12 * * *", "--tz", "Europe/Berlin", "--payload", "delivery", "--text", "twice a day")
MIDNIGHT = int(datetime(2027, 3, 27, 23, 0, tzinfo=UTC).timestamp() * 1000)  # 2027-03-28 00:00 CET
NOON = MIDNIGHT + 11 * HOUR  # 2027-03-28 12:00 CEST: clocks went forward at 02:00
DELIVER = {"SXCTL_DELIVER_CMD": "cat > /dev/null"}


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def test_a_jitter_accepted_in_december_that_dst_day_cannot_hold_is_refused_naming_that_day(sched):
    refused = sched.run(NINE, "cron", "add", "twice", *BERLIN, "--jitter", "11h59m")
    assert refused.code == 2
    assert refused.err.strip() == ("sxctl: --jitter 11h59m must be shorter than the time between two runs of twice: "
                                   "on 2027-03-28 its runs are 11h apart (Europe/Berlin)")
    assert sched.run(NINE, "cron", "list", "--json").json()["jobs"] == []
    sched.add(NINE, "twice", *BERLIN)
    update = sched.run(NINE, "cron", "update", "twice", "--jitter", "11h")  # as long as the gap: still too long
    assert update.code == 2 and "on 2027-03-28 its runs are 11h apart (Europe/Berlin)" in update.err
    assert sched.job("twice")["policy"] is None or sched.job("twice")["policy"]["jitterMs"] is None


def test_a_jitter_just_under_the_years_shortest_gap_is_accepted(sched):
    sched.add(NINE, "twice", *BERLIN, "--jitter", "10h59m59s")
    assert sched.job("twice")["policy"]["jitterMs"] == 11 * HOUR - SECOND
    assert sched.run(NINE, "cron", "validate").code == 0
    # from after 2027-03-28 the shortest gap within a year is the next spring's, 2028-03-26
    late = sched.run(ms("2027-04-01T00:00Z"), "cron", "update", "twice", "--jitter", "11h30m")
    assert late.code == 2 and "on 2028-03-26 its runs are 11h apart" in late.err


def test_validate_names_the_day_a_hand_edited_jitter_is_too_long(sched):
    sched.add(NINE, "twice", *BERLIN, "--jitter", "1h")
    doc = json.loads(sched.policy_file.read_text())
    [entry] = doc["jobs"].values()
    entry["jitterMs"] = 11 * HOUR + 59 * MIN
    sched.policy_file.write_text(json.dumps(doc))
    result = sched.run(NINE, "cron", "validate", "--json")
    assert result.code == 5
    [problem] = [p for p in result.json()["problems"] if p["code"] == "invalid_jitter"]
    assert problem["file"] == str(sched.policy_file)
    assert problem["message"] == ("jitterMs 11h59m must be shorter than the time between two runs of twice: "
                                  "on 2027-03-28 its runs are 11h apart (Europe/Berlin)")


def _jitter_with_offset(job_id: str, low: int, high: int) -> int:
    """A jitterMs (as a hand-edited file may hold) that gives this job an offset in [low, high)."""
    for jitter in range(high, high + 10 * HOUR, 997):
        if low <= jitter_offset_ms(job_id, jitter) < high:
            return jitter
    raise AssertionError("no such jitter")  # about 1 in 12 values lands there: never reached


def test_a_hand_edited_jitter_runs_the_midnight_occurrence_before_noon_and_both_once(sched):
    """`cron next` and the pass tell the same story: the 00:00 run is cut to a second before the
    12:00 occurrence, which then runs at its own jittered time — each once."""
    sched.add(MIDNIGHT - 10 * HOUR, "twice", *BERLIN, "--jitter", "1m")  # next run: 2027-03-28 00:00 CET
    job_id = sched.job("twice")["job"]["id"]
    doc = json.loads(sched.policy_file.read_text())
    jitter = _jitter_with_offset(job_id, 11 * HOUR + 5 * MIN, 11 * HOUR + 55 * MIN)
    doc["jobs"][job_id]["jitterMs"] = jitter
    sched.policy_file.write_text(json.dumps(doc))
    offset = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") % jitter
    assert 11 * HOUR < offset < 12 * HOUR - SECOND  # past 00:00's gap, short of 12:00's

    fires = sched.run(MIDNIGHT - 10 * HOUR, "cron", "next", "--json", "-n", "3").json()["fires"]
    assert [f["at_ms"] for f in fires] == [NOON - SECOND, NOON + offset, NOON + 12 * HOUR + offset]
    assert fires[0]["at_ms"] < NOON

    ran: list[tuple[int, int, str]] = []
    for now in sorted({MIDNIGHT, MIDNIGHT + 30 * MIN, NOON - HOUR, NOON - SECOND, NOON, NOON + HOUR,
                       NOON + offset - MIN, NOON + offset, NOON + offset + 30 * MIN}):
        result = sched.run(now, "cron", "tick", "--json", env=sched.env(**DELIVER))
        assert result.code == 0, result.err
        ran += [(now, run["scheduledForMs"], run["trigger"]) for run in result.json()["runs"]]
    assert ran == [(NOON - SECOND, MIDNIGHT, "scheduled"), (NOON + offset, NOON, "scheduled")]
    store = json.loads((sched.root / ".scheduler" / "cron-jobs.json").read_text())
    assert store["jobs"][0]["lifecycle"]["nextRunAtMs"] == NOON + 12 * HOUR


def _brute_gap(schedule: dict, now: int, span: int) -> tuple[int, int] | None:
    """The shortest gap by walking every occurrence with the real next-run math."""
    best, previous, at = None, None, now
    while (found := next_run(schedule, at)) is not None and found[0] <= now + span:
        if previous is not None and (best is None or found[0] - previous < best[0]):
            best = (found[0] - previous, previous)
        previous = at = found[0]
    return best


@pytest.mark.parametrize(("expr", "tz", "start"), [
    ("0 0,12 * * *", "Europe/Berlin", "2027-03-26T00:00Z"),
    ("30 2,3 * * *", "Europe/Berlin", "2027-03-26T00:00Z"),  # 02:30 skipped: fires with 03:30, once
    ("0 1,3 * * *", "Europe/Berlin", "2027-10-29T00:00Z"),  # a fold: 01:00 to 03:00 is 3 h
    ("*/20 1-3 * * *", "Europe/Berlin", "2027-10-29T00:00Z"),  # both passes of the fold
    ("15,45 1,2 * * *", "America/New_York", "2027-03-12T00:00Z"),
    ("0,30 2 * * *", "Australia/Lord_Howe", "2027-04-02T00:00Z"),  # a 30-minute change
    ("*/20 * * * *", "Australia/Lord_Howe", "2027-10-01T00:00Z"),
    ("0 9 * * 1-5", "Europe/Berlin", "2027-03-24T00:00Z"),
    ("*/7 * 1-3 * * *", "Europe/Berlin", "2027-03-28T00:30Z"),  # seconds first, across the gap
])
def test_the_shortest_gap_is_the_one_the_occurrence_math_walks(expr, tz, start):
    schedule = {"kind": "cron", "expr": expr, "tz": tz}
    span = 2 * HOUR if expr.count(" ") == 5 else 5 * DAY
    found = shortest_gap(schedule, ms(start), span)
    assert (found.ms, found.at_ms) == _brute_gap(schedule, ms(start), span)


@pytest.mark.parametrize(("expr", "jitter", "valid"), [
    ("* * * * *", 59 * SECOND, True), ("* * * * *", MIN, False),
    ("* * * * * *", 999, True), ("* * * * * *", SECOND, False), ("*/2 * * * * *", 1500, True),
])
def test_a_years_check_of_an_every_minute_or_second_pattern_is_a_few_hundred_croniter_steps(
        monkeypatch, expr, jitter, valid):
    """A year of every-minute occurrences is 525,600: the check walks matching days and the
    walls around each DST change, not the occurrences one by one."""
    steps = {"n": 0}
    for name in ("get_next", "get_prev"):
        real = getattr(croniter.croniter, name)

        def counted(self, *args, real=real, **kwargs):
            steps["n"] += 1
            return real(self, *args, **kwargs)

        monkeypatch.setattr(croniter.croniter, name, counted)
    job = {"id": "j", "name": "often", "schedule": {"kind": "cron", "expr": expr, "tz": "Europe/Berlin"}}
    if valid:
        check_jitter(job, {"jitterMs": jitter}, NINE)
    else:
        with pytest.raises(UsageError, match="often: on 2026-12-01 its runs are"):
            check_jitter(job, {"jitterMs": jitter}, NINE)
    assert steps["n"] < 2_000


def test_a_jittered_run_whose_active_span_ends_in_the_spring_forward_gap_goes_before_the_clocks_jump(sched):
    """Attacker: --active-hours 01:00-02:15 in Europe/Berlin ends, on 2027-03-28, inside the hour
    the clocks skip (02:00 -> 03:00): the jitter cut went to "02:14", which is 03:14 CEST, outside
    the span, and the 01:30 occurrence was skipped. The span ends when the clocks jump (01:00Z)."""
    start = ms("2027-03-27T22:00:10+00:00")
    sched.add(start, "j5", "--cron", "30 1 * * *", "--tz", "Europe/Berlin", "--active-hours", "01:00-02:15",
              "--jitter", "12h", "--payload", "heartbeat-event", "--text", "j5")
    sent, skipped = [], []
    for minute in range(0, 90):
        at = ms("2027-03-28T00:30:00+00:00") + minute * MIN
        sched.agent_at(at)
        report = sched.tick(at)
        sent += [at for _ in report["runs"]]
        skipped += report["skippedOccurrences"]
    assert skipped == [] and len(sent) == 1, (sent, skipped)
    assert sent[0] <= ms("2027-03-28T00:59:00+00:00")  # a minute before the span's real end, 02:00 CET

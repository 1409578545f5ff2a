"""Next-fire times, checked against instants worked out by hand from the 2026 zone rules:

Europe/Berlin       CET +01:00 / CEST +02:00; 2026-03-29 01:00Z spring forward, 2026-10-25 01:00Z back
America/New_York    EST -05:00 / EDT -04:00; 2026-03-08 07:00Z spring forward, 2026-11-01 06:00Z back
Australia/Lord_Howe +10:30 / +11:00 (30-minute shift); DST ends 2026-04-05 02:00 local (+11 -> +10:30,
                    01:30-02:00 repeats), starts 2026-10-04 02:00 local (+10:30 -> +11, 02:00-02:30 missing)
Asia/Kolkata        +05:30, no DST;  UTC.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from sxctl.clock import FakeClock
from sxctl.cron.timeline.schedule import next_run
from tests.comis_strict import check_store_bytes


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


# (expression, zone, bound (UTC), the next occurrences in UTC, worked out by hand)
CASES = [
    # spring-forward gap: 02:30 does not exist, fires once at 03:30 CEST
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00Z", ["2026-03-29T01:30Z", "2026-03-30T00:30Z"]),
    # fall-back fold: a fixed time fires once, at the earlier (CEST) instant
    ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00Z", ["2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
    # a wildcard hour follows elapsed time: both passes of 02:00-03:00
    ("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:15Z",
     ["2026-10-25T00:30Z", "2026-10-25T01:00Z", "2026-10-25T01:30Z", "2026-10-25T02:00Z"]),
    ("0 * * * *", "Europe/Berlin", "2026-03-29T00:30Z", ["2026-03-29T01:00Z", "2026-03-29T02:00Z"]),
    ("0 9 * * *", "Europe/Berlin", "2026-03-28T00:00Z", ["2026-03-28T08:00Z", "2026-03-29T07:00Z"]),
    ("0 9 * * *", "America/New_York", "2026-03-06T15:00Z", ["2026-03-07T14:00Z", "2026-03-08T13:00Z"]),
    ("30 2 * * *", "America/New_York", "2026-03-08T05:00Z", ["2026-03-08T07:30Z", "2026-03-09T06:30Z"]),
    ("30 1 * * *", "America/New_York", "2026-11-01T04:00Z", ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
    ("0 * * * *", "America/New_York", "2026-03-08T06:30Z", ["2026-03-08T07:00Z", "2026-03-08T08:00Z"]),
    ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00Z", ["2026-10-03T15:45Z", "2026-10-04T15:15Z"]),
    ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00Z", ["2026-04-04T14:45Z", "2026-04-05T15:15Z"]),
    ("0 9 * * *", "Australia/Lord_Howe", "2026-09-21T00:00Z", ["2026-09-21T22:30Z", "2026-09-22T22:30Z"]),
    ("0 9 * * *", "Asia/Kolkata", "2026-09-21T00:00Z", ["2026-09-21T03:30Z", "2026-09-22T03:30Z"]),
    ("*/20 * * * *", "Asia/Kolkata", "2026-03-29T00:55Z", ["2026-03-29T01:10Z", "2026-03-29T01:30Z"]),
    ("0 0 9 * * *", "UTC", "2026-09-21T00:00Z", ["2026-09-21T09:00Z", "2026-09-22T09:00Z"]),
    ("30 0 9 * * *", "UTC", "2026-09-21T00:00Z", ["2026-09-21T09:00:30Z"]),
    ("@weekly", "UTC", "2026-09-21T00:00Z", ["2026-09-27T00:00Z"]),
    ("@hourly", "UTC", "2026-10-25T00:10Z", ["2026-10-25T01:00Z", "2026-10-25T02:00Z"]),
    # day-of-month and day-of-week combine with OR: Fridays and the 13th
    ("0 0 13 * 5", "UTC", "2026-01-01T00:00Z", ["2026-01-02T00:00Z", "2026-01-09T00:00Z", "2026-01-13T00:00Z"]),
]


@pytest.mark.parametrize(("expr", "zone", "bound", "expected"), CASES, ids=[f"{c[0]}|{c[1]}|{c[2]}" for c in CASES])
def test_next_fire_table(expr, zone, bound, expected):
    schedule = {"kind": "cron", "expr": expr, "tz": zone}
    got = []
    at = ms(bound)
    for _ in expected:
        at = next_run(schedule, at)[0]
        got.append(at)
    assert got == [ms(e) for e in expected]


def test_every_and_at_math():
    every = {"kind": "every", "everyMs": 1_800_000, "anchorMs": ms("2026-09-21T06:00Z")}
    assert next_run(every, ms("2026-09-21T05:00Z"))[0] == ms("2026-09-21T06:00Z")
    assert next_run(every, ms("2026-09-21T06:00Z"))[0] == ms("2026-09-21T06:30Z")
    assert next_run(every, ms("2026-09-21T07:01:30Z"))[0] == ms("2026-09-21T07:30Z")
    at = {"kind": "at", "atMs": ms("2026-09-21T06:02Z")}
    assert next_run(at, ms("2026-09-21T06:00Z"))[0] == ms("2026-09-21T06:02Z")
    assert next_run(at, ms("2026-09-21T06:02Z")) is None


EXAMPLES_NOW = ms("2026-09-21T07:01:30Z")


def run(invoke, *args, now=EXAMPLES_NOW):
    result = invoke("cron", "next", *args, "--json", clock=FakeClock(now), env={"SXCTL_PROJECT": "/nonexistent"})
    return result.code, result.json()


def test_adhoc_preview_needs_no_store_and_marks_dst(invoke):
    code, doc = run(invoke, "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28T00:00Z", "-n", "3")
    assert code == 0, doc
    assert [f["at_ms"] for f in doc["fires"]] == [ms("2026-03-28T01:30Z"), ms("2026-03-29T01:30Z"),
                                                  ms("2026-03-30T00:30Z")]
    assert [f["dst"] for f in doc["fires"]] == [False, True, False]
    assert doc["fires"][1]["at_local"] == "2026-03-29T03:30:00+02:00"
    assert doc["fires"][0]["jobId"] is None and doc["fires"][0]["name"] is None and doc["tz"] == "Europe/Berlin"


def test_adhoc_every_and_at(invoke):
    code, doc = run(invoke, "--every", "90m", "--anchor", "2026-12-01T00:00Z", "--from", "2026-12-01T02:00Z", "-n", "2")
    assert [f["at_ms"] for f in doc["fires"]] == [ms("2026-12-01T03:00Z"), ms("2026-12-01T04:30Z")]
    code, doc = run(invoke, "--at", "2026-10-25T02:30", "--tz", "Europe/Berlin", "--fold", "later")
    assert [f["at_ms"] for f in doc["fires"]] == [ms("2026-10-25T01:30Z")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "0 9 * * *", "--tz", "Not/AZone"], "Invalid cron timezone"),
        (["--cron", "bogus"], "Invalid cron expression"),
        (["--cron", "0 0 30 2 *"], "Cron schedule has no future occurrence"),
        (["--at", "2026-03-29T02:30", "--tz", "Europe/Berlin"],
         "Wall-clock timestamp does not exist in the requested timezone"),
        (["--at", "2026-11-01T01:30", "--tz", "America/New_York"],
         "Ambiguous wall-clock timestamp requires earlier or later fold selection"),
        (["--at", "2026-11-01T01:30Z", "--fold", "earlier"], "Fold selection is legal only for a naive"),
    ],
)
def test_adhoc_errors_are_exit_2_with_comis_messages(invoke, args, message):
    code, doc = run(invoke, *args)
    assert code == 2 and message in doc["error"]["message"]


def test_store_timeline_merges_jobs(project):
    import shutil

    from tests.conftest import EXAMPLES

    (project.root / ".scheduler").mkdir()
    shutil.copy(EXAMPLES / "cron-jobs.json", project.root / ".scheduler" / "cron-jobs.json")
    result = project.run("--project", str(project.root), "cron", "next", "-n", "4", "--tz", "UTC", "--json",
                         clock=FakeClock(ms("2026-09-21T07:01:30Z")))
    doc = result.json()
    assert [(f["name"], f["at_ms"]) for f in doc["fires"]] == [
        ("ci-watch", 1789971300000),  # paused: one row at the frozen time
        ("next-check-in", 1789975800000), ("next-check-in", 1789977600000), ("next-check-in", 1789979400000)]
    assert doc["fires"][0]["paused"] is True and doc["fires"][1]["overdue"] is False


def test_independent_checker_is_not_a_rubber_stamp():
    from tests.conftest import EXAMPLES

    store = json.loads((EXAMPLES / "cron-jobs.json").read_bytes())
    job = store["jobs"][0]
    store["jobs"][0] = {"name": job["name"], **{k: v for k, v in job.items() if k != "name"}}
    store["jobs"][2]["deliveryTarget"]["conversation"]["conversationRef"] = "cv_" + "x" * 43
    raw = (json.dumps(store, separators=(",", ":")) + "\n").encode()
    problems = check_store_bytes(raw)
    assert any("jobs[0]" in p for p in problems) and any("conversationRef" in p for p in problems)


@pytest.mark.parametrize(("tz", "meant"), [("Europe/Berln", "Europe/Berlin"), ("Berlin", "Europe/Berlin"),
                                           ("new york", "America/New_York")])
def test_a_mistyped_zone_gets_comis_message_and_a_hint_naming_the_zone(project, tz, meant):
    result = project.run("cron", "next", "--cron", "0 9 * * *", "--tz", tz, "-n", "1")
    assert result.code == 2 and "Invalid cron timezone" in result.err
    assert f"hint: did you mean {meant}" in result.err


@pytest.mark.parametrize(("tz", "meant"), [("CEST", "Europe/Berlin"), ("pdt", "America/Los_Angeles")])
def test_a_summer_time_abbreviation_is_pointed_to_a_place_not_to_a_zone_hours_away(project, tz, meant):
    """Newcomer: `--tz CEST` got "did you mean EST or CET?" — EST is six hours from Berlin."""
    result = project.run("cron", "next", "--cron", "0 9 * * *", "--tz", tz, "-n", "1")
    assert result.code == 2 and "Invalid cron timezone" in result.err
    assert f"is a summer-time abbreviation, not a zone: use the place, e.g. {meant}" in result.err
    assert "EST" not in result.err.replace("CEST", "")


def test_an_ambiguous_time_hints_at_fold(project):
    result = project.run("cron", "next", "--at", "2026-10-25 02:30", "--tz", "Europe/Berlin")
    assert result.code == 2 and "--fold earlier" in result.err and "--fold later" in result.err


# --- a TIME or a zone that cannot be read (issue #40) -------------------------------------------------

SUNDAY_EVENING = ms("2026-12-06T20:00Z")  # Monday 05:00 in Tokyo, Sunday 21:00 in Berlin
ADD = ("cron", "add", "j", "--payload", "heartbeat-event", "--text", "t")


def _refused(project, *args: str, env: dict | None = None) -> tuple[str, str]:
    """The message and the hint of a refused `sxctl ARGS` (exit 2, one line each, the same in --json)."""
    result = project.run(*args, clock=FakeClock(SUNDAY_EVENING), env=env)
    assert result.code == 2, result.out + result.err
    message, hint = result.err.strip().splitlines()
    error = project.run(*args, "--json", clock=FakeClock(SUNDAY_EVENING), env=env).json()["error"]
    assert (f"sxctl: {error['message']}", f"sxctl: hint: {error['hint']}") == (message, hint)
    return message.removeprefix("sxctl: "), hint.removeprefix("sxctl: hint: ")


def test_a_time_in_words_is_refused_with_the_time_it_means_worked_out_by_the_clock(project):
    """`--at "tomorrow 9am"` was told 'am' is an ambiguous zone abbreviation: the hint now gives the
    TIME it means, tomorrow being the day after today in the zone the time is read in."""
    tokyo = project.env(TZ="Asia/Tokyo")
    message, hint = _refused(project, *ADD, "--at", "tomorrow 9am", env=tokyo)  # no --tz: this machine's zone
    assert message == "Invalid naive wall-clock timestamp" and "abbreviation" not in hint
    assert hint.endswith("tomorrow at 09:00 in Asia/Tokyo is 2026-12-08T09:00: write 2026-12-08T09:00 "
                         "with --tz Asia/Tokyo")
    _, berlin = _refused(project, *ADD, "--at", "Tomorrow at 9 AM", "--tz", "Europe/Berlin")
    assert berlin.endswith("tomorrow at 09:00 in Europe/Berlin is 2026-12-07T09:00: write 2026-12-07T09:00")
    _, evening = _refused(project, *ADD, "--at", "9:30pm", "--tz", "Europe/Berlin")  # 21:00 there: still to come
    assert evening.endswith("write 2026-12-06T21:30")
    _, until = _refused(project, *ADD, "--every", "1h", "--tz", "Europe/Berlin", "--until", "monday 5pm")
    assert until.endswith("write 2026-12-07T17:00")
    done = project.run(*ADD, "--at", "2026-12-08T09:00", "--tz", "Asia/Tokyo", "--json", env=tokyo,
                       clock=FakeClock(SUNDAY_EVENING))
    assert done.code == 0 and done.json()["schedule"]["atMs"] == ms("2026-12-08T00:00Z")


@pytest.mark.parametrize(("time", "hint"), [
    ("2026-02-30", "2026-02-30 does not exist: February 2026 has 28 days"),
    ("2026-02-30 09:00", "2026-02-30 does not exist: February 2026 has 28 days"),
    ("2028-02-30T09:00Z", "2028-02-30 does not exist: February 2028 has 29 days"),
    ("2026-13-01T09:00", "2026-13-01 does not exist: there is no month 13 (01-12)"),
    ("2026-12-24", "2026-12-24 has no time of day: write it with one, e.g. 2026-12-24T09:00"),
])
def test_a_date_the_calendar_lacks_is_named(project, time, hint):
    message, said = _refused(project, *ADD, "--at", time)
    assert message in ("Invalid naive wall-clock timestamp", "Invalid offset-bearing timestamp")  # comis's words
    assert said == hint


def test_an_unknown_zone_is_named_as_comis_does_for_what_it_reads(project):
    """comis says "Invalid wall-clock timezone" for the zone of a wall time (--at, --anchor) and
    "Invalid cron timezone" for a cron schedule's; an offset with --tz is refused first."""
    mars = ("--tz", "Mars/Olympus_Mons")
    assert _refused(project, *ADD, "--at", "2027-01-01 09:00", *mars)[0] == "Invalid wall-clock timezone"
    assert _refused(project, *ADD, "--at", "tomorrow 9am", *mars)[0] == "Invalid wall-clock timezone"
    assert _refused(project, *ADD, "--every", "1h", "--anchor", "2027-01-01 09:00", *mars)[0] == \
        "Invalid wall-clock timezone"
    assert _refused(project, *ADD, "--at", "2027-01-01 09:00", "--tz", "EST")[0] == "Invalid wall-clock timezone"
    assert _refused(project, *ADD, "--cron", "0 9 * * *", *mars)[0] == "Invalid cron timezone"
    assert _refused(project, *ADD, "--at", "2027-01-01T09:00Z", *mars)[0] == \
        "An offset-bearing timestamp cannot also specify a timezone"


def test_every_without_an_anchor_says_it_counts_from_now_and_which_anchor_puts_it_on_the_clock(project):
    """`--every 15m` typed at 09:07:16.5 runs at :22:16.5, :37:16.5, … and said nothing about it."""
    typed = ms("2026-12-01T09:07:16.500Z")

    def add(name: str, *args: str):
        result = project.run("cron", "add", name, "--every", "15m", *args, "--payload", "heartbeat-event", "--text",
                             "t", clock=FakeClock(typed))
        assert result.code == 0, result.err
        return result

    said = add("beat").err
    assert said.startswith("sxctl: --every 15m counts from now, to the millisecond: its first occurrence is "
                           "2026-12-01 09:22:16 UTC, then every 15m; to count from a round time, add e.g. "
                           "--anchor 2026-12-01T09:00Z (first occurrence 2026-12-01 09:15:00 UTC)"), said
    assert add("beat-on-the-clock", "--anchor", "2026-12-01T09:00Z").err == ""  # as advised: nothing to say
    jobs = {job["job"]["name"]: job for job in project.run("cron", "list", "--json", clock=FakeClock(typed))
            .json()["jobs"]}
    assert jobs["beat"]["next_run_ms"] == ms("2026-12-01T09:22:16.500Z")
    assert jobs["beat-on-the-clock"]["next_run_ms"] == ms("2026-12-01T09:15:00Z")
    kolkata = add("beat-in-kolkata", "--tz", "Asia/Kolkata").err  # 14:37 there: its hour began at 08:30Z
    assert "add e.g. --anchor 2026-12-01T14:00 (first occurrence 2026-12-01 09:15:00 UTC)" in kolkata, kolkata
    shown = " ".join(project.run("cron", "add", "--help").out.split())
    assert "counted from now unless --anchor" in shown and "(default now, to the millisecond)" in shown

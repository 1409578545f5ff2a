"""One display zone for every human view (`sxctl.timeparse.display_zone`): `--tz ZONE` where the
command takes one, else TZ's zone; a job's own zone never changes it. Every time a view prints
carries its zone's abbreviation; `--json` keeps instants (`*_ms`, ISO strings with their offset)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from sxctl.clock import FakeClock
from tests.conftest import SID

NOW = int(datetime(2026, 12, 1, 7, 0, tzinfo=UTC).timestamp() * 1000)  # a Tuesday, 08:00 in Berlin
MIN = 60_000
#: a time as a human view prints it: a date, a clock, and the label of its zone
SHOWN = re.compile(r"\b(\d{4}-\d\d-\d\d )?\d\d:\d\d(?::\d\d)? ([A-Z]{2,5}|[+-]\d\d)\b")
#: a time printed without a label (what the views printed before)
BARE = re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?(?![:\d]| [A-Z]{2,5}\b| [+-]\d\d\b|[+-]\d\d:\d\d)")


@pytest.fixture
def zoned(project):
    """A project with a live agent and three jobs in three zones: a weekday 09:00 New York cron job,
    a 90-minute --every job with its own --tz Asia/Kolkata and an --until, and a daily 07:30 UTC job."""
    folder = project.session()

    class Zoned:
        def run(self, ms: int, *args: str, tz: str = "Europe/Berlin"):
            (folder / "stats.json").write_text(json.dumps({"updated_ms": ms, "model": "m", "cwd": str(project.root)}))
            result = project.run(*args, clock=FakeClock(ms), env=project.env(TZ=tz))
            assert result.code == 0, (args, result.out, result.err)
            return result

    zoned = Zoned()
    for args in (["ny", "--cron", "0 9 * * 1-5", "--tz", "America/New_York"],
                 ["ev", "--every", "90m", "--tz", "Asia/Kolkata", "--anchor", "2026-12-01 00:00",
                  "--until", "2026-12-31 00:00"],
                 ["utc", "--cron", "30 7 * * *"]):
        zoned.run(NOW - 60 * MIN, "cron", "add", *args, "--payload", "heartbeat-event", "--text", "hi")
    return zoned


def _labels(text: str) -> set[str]:
    assert not BARE.findall(text), text  # no time without its zone
    return {match.group(2) for match in SHOWN.finditer(text)}


def _in(ms: int, zone: str, fmt: str = "%Y-%m-%d %H:%M:%S %Z") -> str:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).strftime(fmt)


@pytest.mark.parametrize(("tz", "flag", "label"), [("Europe/Berlin", [], "CET"),
                                                   ("Europe/Berlin", ["--tz", "Asia/Tokyo"], "JST")])
def test_the_job_views_show_every_time_in_the_display_zone_whatever_the_jobs_zone(zoned, tz, flag, label):
    for args in (["cron", "list"], ["cron", "next", "-n", "12"], ["next", "-n", "12"]):
        out = zoned.run(NOW, *args, *flag, tz=tz).out
        assert _labels(out) == {label}, (args, out)
    listing = zoned.run(NOW, "cron", "list", *flag, tz=tz).out
    assert "0 9 * * 1-5 America/New_York" in listing and "every 1h30m Asia/Kolkata" in listing  # the schedules' own


def test_a_job_with_its_own_zone_is_shown_in_the_display_zone_in_cron_show(zoned):
    out = zoned.run(NOW, "cron", "show", "ev").out
    first, policy = out.splitlines()[:2]
    assert _labels(first + policy) == {"CET"}
    assert "expires at 2026-12-30 19:30 CET" in policy and "zone Asia/Kolkata" in policy  # --until 00:00 in Kolkata
    assert zoned.run(NOW, "cron", "show", "ev", tz="Asia/Tokyo").out.splitlines()[1].count(" JST") == 1
    doc = zoned.run(NOW, "cron", "show", "ev", "--json").json()
    assert doc["display_tz"] == "Europe/Berlin" and doc["policy"]["untilMs"] == 1_798_655_400_000


def test_cron_lists_next_cell_is_cron_nexts_instant_in_the_display_zone(zoned):
    for tz, flag in (("Europe/Berlin", []), ("America/Los_Angeles", []), ("Europe/Berlin", ["--tz", "Asia/Tokyo"])):
        shown_in = flag[1] if flag else tz
        fires = zoned.run(NOW, "cron", "next", "-n", "20", "--json", *flag, tz=tz).json()
        assert fires["display_tz"] == shown_in
        first = {}
        for fire in fires["fires"]:
            first.setdefault(fire["name"], fire["at_ms"])
            assert datetime.fromisoformat(fire["at_local"]) == datetime.fromtimestamp(fire["at_ms"] / 1000, UTC)
            assert fire["at_local"] == datetime.fromtimestamp(fire["at_ms"] / 1000, ZoneInfo(shown_in)).isoformat()
        assert first.keys() == {"ny", "ev", "utc"}
        listing = zoned.run(NOW, "cron", "list", *flag, tz=tz)
        rows = {line.split()[0]: line for line in listing.out.splitlines()[1:]}
        for name, at_ms in first.items():
            assert f" {_in(at_ms, shown_in)} (" in rows[name], (name, rows[name])
        assert zoned.run(NOW, "cron", "list", "--json", *flag, tz=tz).json()["display_tz"] == shown_in
        human = zoned.run(NOW, "cron", "next", "-n", "20", *flag, tz=tz).out.splitlines()[1:]
        assert [line[:len(_in(0, shown_in))].rstrip() for line in human] == \
               [_in(fire["at_ms"], shown_in) for fire in fires["fires"]]


def test_the_pass_its_log_its_runs_and_the_status_views_show_the_display_zone(zoned, tmp_path):
    due = int(datetime(2026, 12, 1, 7, 30, tzinfo=UTC).timestamp() * 1000)  # utc's 07:30 UTC = 08:30 CET
    at = due + 10 * MIN  # a catch-up: "due 08:30 CET"
    tick = zoned.run(at, "cron", "tick").out
    assert "ran utc (catchup, due 08:30 CET)" in tick and _labels(tick) == {"CET"}, tick
    assert "07:30 UTC" not in tick
    log = tmp_path / "tick.log"
    zoned.run(at + 2 * 60 * MIN, "cron", "tick", "--log", str(log))  # ev is due: it runs at 09:00 UTC = 10:00 CET
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith("2026-12-01T10:40:00+01:00 ") for line in lines), lines
    assert _labels("\n".join(line.split(" ", 1)[1] for line in lines)) <= {"CET"}
    runs = zoned.run(at + 3 * 60 * MIN, "cron", "runs", "--all-jobs").out
    assert f" {_in(at, 'Europe/Berlin')} (" in runs and _labels(runs) == {"CET"}, runs
    doc = zoned.run(at + 3 * 60 * MIN, "cron", "runs", "utc", "--json").json()
    assert doc["runs"][0]["startedAtMs"] == at  # the instant, not a local time
    status = zoned.run(at + 3 * 60 * MIN, "cron", "status").out
    assert _labels(status) == {"CET"} and "next due    2026-12-01 " in status
    later = at + 4 * 60 * MIN
    paused = zoned.run(later, "cron", "pause", "--all", "--until", "2026-12-01T23:00Z", "--reason", "db migration")
    assert "until 2026-12-02 00:00 CET" in paused.out
    for args in (["status"], ["--session", SID, "status"], ["cron", "status"]):
        out = zoned.run(later, *args, tz="Asia/Tokyo").out
        assert _labels(out) == {"JST"}, out
        assert "maintenance until 2026-12-02 08:00 JST" in out or args == ["cron", "status"], out


def test_a_rehearsal_and_the_timers_show_the_display_zone(zoned):
    args = ["cron", "simulate", "--from", "2026-12-01T07:00Z", "--until", "2026-12-01T12:00Z", "--pass-every", "30m"]

    def told(out: str) -> str:  # what the agent is told is the message as written: its late-run note keeps the job's zone
        return re.sub(r"\[sxctl: a late run[^\]]*\]", "", out)

    assert _labels(told(zoned.run(NOW, *args).out)) == {"CET"}
    shown = zoned.run(NOW, *args, "--tz", "Asia/Tokyo")
    assert _labels(told(shown.out)) == {"JST"} and "from 2026-12-01 16:00 JST" in shown.out
    assert zoned.run(NOW, *args, "--tz", "Asia/Tokyo", "--json").json()["display_tz"] == "Asia/Tokyo"
    zoned.run(NOW, "cb", "set", "poll", "--every", "2m")
    assert _labels(zoned.run(NOW, "cb", "next").out) == {"CET"}

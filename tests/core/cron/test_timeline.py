"""One timeline (issue: one model of a job): a catch-up's hold is measured from the occurrence it
stands for, and every view shows the fate the pass then acts on."""

from __future__ import annotations

import json
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
        "nightly", "no_live_session", ms(2026, 12, 4, 22, 0), ms(2026, 12, 7, 22, 0))  # Sunday 22:00 + 24h
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

"""The overlap policy (`--overlap skip|queue|replace`): what a due run does while the job's
previous message is still unread — through the real pass, the previews, `cron simulate` and the
reference agent."""

from __future__ import annotations

import json
import os

import pytest

from sxctl.clock import FakeClock
from tests.conftest import SID as AGENT_SID
from tests.conftest import killed_at, now_ms
from tests.core.cron.test_scheduling import MIN, NINE, SID

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

HOUR = 60 * MIN


def _add(sched, overlap: str, *extra: str) -> None:
    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "check", "--to", SID, "--overlap", overlap, *extra)


def _read_all(sched) -> None:
    done = sched.folder / "inbox" / "done"
    done.mkdir(parents=True, exist_ok=True)
    for path in (sched.folder / "inbox").glob("*.json"):
        os.rename(path, done / path.name)


def test_skip_records_the_occurrence_as_skipped_while_the_previous_message_is_unread(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "skip")
    assert [r["status"] for r in sched.tick(NINE)["runs"]] == ["dispatched"]
    report = sched.tick(NINE + HOUR)  # the 09:00 message is still unread
    assert report["runs"] == []
    assert [(s["reason"], s["count"], s["firstMs"]) for s in report["skippedOccurrences"]] == [
        ("overlap", 1, NINE + HOUR)]
    assert any(row["fate"] == "skipped" and row["reason"] == "overlap" for row in report["outcomes"])
    human = sched.run(NINE + 2 * HOUR, "cron", "tick")
    assert "skipped beat: " in human.out and "(--overlap skip: its previous message is still unread)" in human.out, human.out
    shown = sched.job("beat")
    assert shown["policy"]["overlap"] == "skip"
    assert [s["reason"] for s in shown["policy"]["skips"]["recent"]] == ["overlap", "overlap"]
    assert len(sched.pending()) == 1
    policy = json.loads(sched.policy_file.read_text())
    assert policy["formatVersion"] == 3
    _read_all(sched)  # read: the next occurrence runs
    assert [r["status"] for r in sched.tick(NINE + 3 * HOUR)["runs"]] == ["dispatched"]
    assert len(sched.ledger()) == 4  # two runs, a start and a terminal each: no skip is a run


def test_queue_is_the_default_and_sends_while_the_previous_message_is_unread(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "skip")
    assert sched.run(NINE, "cron", "update", "beat", "--overlap", "queue").code == 0
    assert sched.job("beat")["policy"]["overlap"] == "queue"
    assert json.loads(sched.policy_file.read_text()) == {"formatVersion": 1, "jobs": {}}  # the default: not kept
    for hour in range(3):
        assert [r["status"] for r in sched.tick(NINE + hour * HOUR)["runs"]] == ["dispatched"]
    assert len(sched.pending()) == 3


def test_replace_retracts_the_unread_message_and_the_ledger_and_receipts_say_so(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "replace")
    [first] = sched.tick(NINE)["runs"]
    [second] = sched.tick(NINE + HOUR)["runs"]
    assert second["status"] == "dispatched"
    assert second["replaced"] == {"executionId": first["executionId"], "sessionId": SID,
                                  "stem": first["outcome"]["stem"], "state": "retracted"}
    assert second["outcome"]["replaced"]["state"] == "retracted"
    terminal = [row for row in sched.ledger() if row["recordType"] == "terminal"][-1]
    assert terminal["outcome"]["replaced"]["stem"] == first["outcome"]["stem"]
    assert [m["text"] for m in sched.pending()] == ["check"]  # exactly one unread message
    runs = {r["executionId"]: r for r in sched.run(NINE + HOUR, "cron", "runs", "beat", "--json").json()["runs"]}
    assert runs[first["executionId"]]["consumption"] == {"state": "retracted", "replacedBy": second["executionId"]}
    listed = sched.run(NINE + HOUR, "cron", "runs", "beat").out
    assert "replaced" in listed.splitlines()[-1] and "pending" in listed, listed
    assert runs[second["executionId"]]["consumption"]["state"] == "pending"
    assert sched.run(NINE + HOUR, "cron", "validate").code == 0  # the ledger row is valid
    human = sched.run(NINE + 2 * HOUR, "cron", "tick")
    assert f"replacing {second['outcome']['stem']} (retracted)" in human.out, human.out
    _read_all(sched)
    [third] = sched.tick(NINE + 3 * HOUR)["runs"]
    assert "replaced" not in third and "replaced" not in third["outcome"]  # read: nothing to replace


def test_replace_counts_a_message_the_agent_took_meanwhile_as_read_and_sends_the_new_one(sched, monkeypatch):
    """The race: the pass saw the message unread, the agent took it before the retract — the
    inbox's rename decides; it was read, and the new one is sent."""
    sched.folder.mkdir(parents=True)
    _add(sched, "replace")
    [first] = sched.tick(NINE)["runs"]
    from sxctl.cron.policy import overlap
    _read_all(sched)  # the agent takes it right after the pass looked, which saw it unread:
    monkeypatch.setattr(overlap, "consumption", lambda *args: {"state": "pending", "ageMs": 0})
    [second] = sched.tick(NINE + HOUR)["runs"]
    assert second["status"] == "dispatched" and second["replaced"]["state"] == "read"
    assert (sched.folder / "inbox" / "done" / f"{first['outcome']['stem']}.json").exists()
    assert len(sched.pending()) == 1


def test_previews_show_an_overlap_skip_and_a_replace(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "skip")
    sched.tick(NINE)
    [row] = sched.run(NINE + HOUR, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == NINE + 2 * HOUR  # the due one is skipped: the next one runs
    assert row["next_note"] == "--overlap skip: its previous message is still unread"
    assert row["policy"]["overlap"] == "skip"
    fires = sched.run(NINE + HOUR, "cron", "next", "--json").json()["fires"]
    assert fires[0]["at_ms"] == NINE + 2 * HOUR and fires[0]["skipped_before"] == 1
    upcoming = [r for r in sched.run(NINE + HOUR, "--session", SID, "next", "--json").json()["rows"]
                if r["source"] == "cron"][0]
    assert upcoming["at_ms"] == NINE + 2 * HOUR and upcoming["note"].startswith("--overlap skip")
    assert sched.run(NINE + HOUR, "cron", "update", "beat", "--overlap", "replace").code == 0
    [row] = sched.run(NINE + HOUR, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] == NINE + HOUR and row["next_note"].startswith("its unread message ")
    assert "overlap replace" in sched.run(NINE + HOUR, "cron", "show", "beat").out


def test_simulate_skips_while_the_agent_is_down_and_nothing_reads(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "skip")
    result = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T14:00Z",
                       "--pass-every", "1h", "--agent-down", "2026-12-01T09:30Z..2026-12-01T12:30Z", "--json")
    assert result.code == 0, result.err
    fates = [(e["occurrence_ms"], e["fate"], e["reason"]) for e in result.json()["events"]]
    # read at once at 09:00; the 10:00 message waits for the agent, back after the 13:00 pass
    assert fates == [(NINE, "dispatched", None), (NINE + HOUR, "dispatched", None),
                     (NINE + 2 * HOUR, "skipped", "overlap"), (NINE + 3 * HOUR, "skipped", "overlap"),
                     (NINE + 4 * HOUR, "skipped", "overlap"), (NINE + 5 * HOUR, "dispatched", None)]


def test_an_older_format_with_an_overlap_is_refused_and_a_bad_mode_is_named(sched):
    _add(sched, "skip")
    policy = json.loads(sched.policy_file.read_text())
    policy["formatVersion"] = 2
    sched.policy_file.write_text(json.dumps(policy))
    result = sched.run(NINE, "cron", "tick")
    assert result.code == 5 and "formatVersion 3" in result.err
    result = sched.run(NINE, "cron", "update", "beat", "--overlap", "sometimes")
    assert result.code == 2 and "sometimes" in result.err


@pytest.mark.slow
def test_replace_leaves_exactly_one_unread_message_with_the_reference_agent(project, agents):
    """The reference agent takes the first message and stops (one turn); every later run replaces
    the unread one before it, so the inbox never holds more than one of the job's messages."""
    start = now_ms() - 10 * MIN
    assert project.run("cron", "add", "beat", "--every", "1m", "--payload", "agent-turn", "--text", "look",
                       "--to", AGENT_SID, "--overlap", "replace", clock=FakeClock(start)).code == 0
    agent = agents(project, "--turn-seconds", "0.1", "--max-turns", "1")
    inbox = project.root / ".scorpiox" / "sessions" / AGENT_SID / "inbox"
    ran = project.run("cron", "tick", "--json", clock=FakeClock(now_ms())).json()["runs"]
    assert [r["status"] for r in ran] == ["dispatched"], [r.get("reason") for r in ran]
    agent.wait_for(lambda e: e["event"] == "turn_start")
    assert agent.stop() == 0
    stems = []
    for step in range(1, 5):
        [run] = project.run("cron", "tick", "--json", clock=FakeClock(now_ms() + step * MIN)).json()["runs"]
        stems.append(run["outcome"]["stem"])
        assert (run.get("replaced") or {}).get("state") == (None if step == 1 else "retracted"), run
        assert sorted(p.stem for p in inbox.glob("*.json")) == [stems[-1]]  # exactly one unread
    runs = project.run("cron", "runs", "beat", "--json", clock=FakeClock(now_ms() + 5 * MIN)).json()["runs"]
    states = [r["consumption"]["state"] for r in sorted(runs, key=lambda r: r["startedAtMs"])]
    assert states == ["read", "retracted", "retracted", "retracted", "pending"]


def _point_the_last_row_outside_the_sessions(sched, run):
    """A hostile ledger: the last row's message "is" in .scorpiox/inbox/ (session `..`), where a
    pending file waits as bait (returned)."""
    ledger = sched.root / ".scheduler" / "cron-executions.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[-1]["outcome"]["sessionId"] = ".."
    ledger.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    bait = sched.root / ".scorpiox" / "inbox" / f"{run['outcome']['stem']}.json"
    bait.parent.mkdir()
    bait.write_text("{}")
    return bait


def test_replace_never_retracts_a_message_a_ledger_row_names_outside_the_sessions(sched):
    sched.folder.mkdir(parents=True)
    _add(sched, "replace")
    [first] = sched.tick(NINE)["runs"]
    bait = _point_the_last_row_outside_the_sessions(sched, first)
    [second] = sched.tick(NINE + HOUR)["runs"]
    assert second["status"] == "dispatched" and "replaced" not in second
    assert bait.read_text() == "{}" and not (bait.parent / "retracted").exists()


@pytest.mark.parametrize("point", ["before-rename", "after-claim", "after-start", "after-dispatch", "after-terminal"])
def test_a_replacing_pass_killed_at_any_point_never_loses_the_jobs_message(sched, monkeypatch, point):
    from tests.comis_strict import check_store_bytes

    sched.folder.mkdir(parents=True)
    _add(sched, "replace")
    sched.tick(NINE)

    killed_at(monkeypatch, point, lambda: sched.run(NINE + HOUR, "cron", "tick"))
    assert check_store_bytes((sched.root / ".scheduler" / "cron-jobs.json").read_bytes()) == []
    # sent first, retracted after: killed in between, one message too many, never none
    assert len(sched.pending()) == (2 if point == "after-dispatch" else 1)
    report = sched.tick(NINE + 2 * HOUR, "--terminalize-orphans")
    assert [r["status"] for r in report["runs"]] == ["dispatched"]
    assert len(sched.pending()) == 1
    assert sched.run(NINE + 2 * HOUR, "cron", "validate").code == 0


def test_max_unconsumed_and_receipts_never_read_a_message_a_ledger_row_names_outside_the_sessions(sched):
    """--max-unconsumed counted unread messages where a hostile ledger row pointed (`..`): the one
    receipt rule (`receipts.consumption`) checks the names first, for every view."""
    sched.folder.mkdir(parents=True)
    sched.add(NINE - MIN, "beat", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "check", "--to", SID, "--max-unconsumed", "1")
    [first] = sched.tick(NINE)["runs"]
    _read_all(sched)
    bait = _point_the_last_row_outside_the_sessions(sched, first)
    [second] = sched.tick(NINE + HOUR)["runs"]
    assert second["status"] == "dispatched"  # not paused by an "unread" message outside the sessions
    shown = sched.run(NINE + HOUR, "cron", "runs", "beat", "--json").json()
    assert [run["consumption"]["state"] for run in shown["runs"]] == ["pending", "lost"], shown["runs"]
    assert bait.read_text() == "{}"


def _pending_stems(sched) -> list[str]:
    return sorted(path.stem for path in (sched.folder / "inbox").glob("*.json"))


def test_replace_retracts_every_unread_message_of_the_job_and_nobody_elses(sched):
    """A manual run between two passes left its message unread beside the replacement; a ledger
    row edited to name a user's message made replace retract it. Every unread message of the job
    goes, and only where the inbox's own key record places it."""
    sched.folder.mkdir(parents=True)
    _add(sched, "replace")
    sched.tick(NINE)
    assert sched.run(NINE + MIN, "cron", "run", "beat").code == 0
    [third] = sched.tick(NINE + HOUR)["runs"]
    assert _pending_stems(sched) == [third["outcome"]["stem"]]
    assert third["replaced"]["state"] == "retracted"
    user = sched.run(NINE + HOUR, "--session", SID, "inbox", "send", "my own task", "--mode", "queue", "--json")
    ledger = sched.root / ".scheduler" / "cron-executions.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[-1]["outcome"]["stem"] = user.json()["stem"]  # the job's last row now "sent" the user's message
    ledger.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    [fourth] = sched.tick(NINE + 2 * HOUR)["runs"]
    assert "replaced" not in fourth
    assert user.json()["stem"] in _pending_stems(sched)


def test_overlap_on_a_one_shot_is_refused_and_max_catchup_has_one_bound(sched):
    """A one-shot sends one message: --overlap skip/replace was accepted there and ignored."""
    result = sched.run(NINE, "cron", "add", "once", "--in", "1h", "--payload", "agent-turn", "--text", "x",
                       "--overlap", "replace")
    assert result.code == 2 and "--overlap replace is for recurring jobs" in result.err
    for args in (("cron", "tick"), ("cron", "defaults"), ("cron", "simulate", "--from", "2026-12-01T09:00Z",
                                                          "--until", "2026-12-01T10:00Z")):
        refused = sched.run(NINE, *args, "--max-catchup", "99999999999999999999")
        assert refused.code == 2 and "--max-catchup" in refused.err, args

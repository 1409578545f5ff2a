"""`cron repair --clock`: passes ran under a clock ten days ahead, then the clock is right again.
Every pass and edit stopped (`clock_behind`) until real time caught up; the repair lets them go on
now, and no occurrence that ran runs again — proved on the ledger and in the inbox."""

from __future__ import annotations

import collections
import json

import pytest

from tests.comis_strict import check_store_bytes
from tests.conftest import killed_at
from tests.core.cron.test_scheduling import HOUR, MIN, NINE

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

DAY = 24 * HOUR
AHEAD = NINE + 10 * DAY  # the clock that ran ten days fast
RIGHT = NINE + 2 * MIN  # the right time, when the clock is fixed
FILES = ("cron-jobs.json", "cron-executions.jsonl", "sxctl-policy.json")


def _passes_ahead(sched, monkeypatch) -> None:
    """Three jobs, then passes under the clock ten days ahead: each job's catch-up, two more runs
    of the 5-minute job, and a pass killed after its claim (a claim recorded ahead)."""
    sched.add(NINE - MIN, "five", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "five")
    sched.add(NINE - MIN, "daily", "--cron", "0 10 * * *", "--payload", "heartbeat-event", "--text", "daily")
    sched.add(NINE - MIN, "once", "--at", "2026-12-01T10:00Z", "--payload", "heartbeat-event", "--text", "once")
    for minutes in (0, 5, 10):
        sched.agent_at(AHEAD + minutes * MIN)
        assert sched.tick(AHEAD + minutes * MIN)["runs"], minutes
    sched.agent_at(AHEAD + 15 * MIN)
    killed_at(monkeypatch, "after-claim", lambda: sched.run(AHEAD + 15 * MIN, "cron", "tick"))


def _files(sched) -> dict[str, bytes | None]:
    paths = {name: sched.root / ".scheduler" / name for name in FILES}
    return {name: path.read_bytes() if path.exists() else None for name, path in paths.items()}


def _occurrences(sched) -> tuple[collections.Counter, collections.Counter]:
    """How many times each occurrence (job name, scheduledForMs) was started (the ledger) and
    sent (the inbox: each message's key record names its execution)."""
    names = {job["id"]: job["name"] for job in json.loads((sched.root / ".scheduler" / "cron-jobs.json")
                                                          .read_text())["jobs"]}
    starts = {row["executionId"]: (names[row["jobId"]], row["scheduledForMs"]) for row in sched.ledger()
              if row["recordType"] == "started" and row["trigger"] != "manual"}
    keys = {}
    for path in (sched.folder / "inbox" / ".keys").glob("*.json"):
        record = json.loads(path.read_text())
        keys[record["stem"]] = record["key"]
    messages = [*sched.folder.joinpath("inbox").glob("*.json"), *sched.folder.joinpath("inbox", "done").glob("*.json")]
    assert len(messages) == len(keys), (messages, keys)  # every message written by a run, none by hand
    return collections.Counter(starts.values()), collections.Counter(starts[keys[m.stem]] for m in messages)


def test_after_a_clock_ten_days_ahead_the_repair_lets_passes_and_edits_go_on_and_nothing_runs_twice(
        sched, monkeypatch):
    _passes_ahead(sched, monkeypatch)
    sched.agent_at(RIGHT)
    behind = sched.run(RIGHT, "cron", "tick", "--json")  # the right time, earlier than everything recorded
    assert behind.code == 5 and behind.json()["error"]["code"] == "clock_behind"
    assert behind.json()["error"]["hint"].endswith("sxctl cron repair --clock")
    assert sched.run(RIGHT, "cron", "update", "five", "--text", "five!").code == 5
    doctor = sched.run(RIGHT, "doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "cron files"]
    assert check["status"] == "fail" and check["fix"].startswith("sxctl cron repair --clock   #"), check
    before = _files(sched)

    repaired = sched.run(RIGHT, "cron", "repair", "--clock", "--json")
    assert repaired.code == 0, repaired.out + repaired.err
    doc = repaired.json()
    assert (doc["repaired"], doc["ahead"], doc["throughMs"]) == (True, 6, AHEAD + 15 * MIN), doc
    jobs = {job["name"]: job for job in doc["jobs"]}
    assert jobs["five"]["nextRunAtMs"] == {"before": AHEAD + 20 * MIN, "after": NINE + 5 * MIN}
    assert jobs["five"]["ranAhead"] == 3  # AHEAD +5m and +10m ran, +15m was claimed
    tomorrow = NINE + DAY + HOUR  # its 10:00 today ran (the catch-up ahead): never again
    assert jobs["daily"] == {"jobId": jobs["daily"]["jobId"], "name": "daily", "ranAhead": 1,
                             "nextRunAtMs": {"before": AHEAD + HOUR, "after": tomorrow}}
    assert "once" not in jobs  # it ran: a finished one-shot stays finished
    store = (sched.root / ".scheduler" / "cron-jobs.json").read_bytes()
    assert check_store_bytes(store) == []
    assert _files(sched)["cron-executions.jsonl"] == before["cron-executions.jsonl"]  # never rewritten
    human = sched.run(RIGHT, "cron", "repair", "--clock")
    assert human.code == 0 and human.out.startswith("repaired already: the 6 record(s) ahead"), human.out
    assert _files(sched)["cron-jobs.json"] == store  # a second repair changes nothing

    # passes and edits go on now: the dead claim settles (at its own time: durationMs is never
    # negative), and the 5-minute job runs again at 09:05
    first = sched.tick(RIGHT)
    assert first["reconciled"]["recoveredBeforeStart"] == 1 and first["runs"] == [], first
    assert sched.run(RIGHT, "cron", "update", "five", "--text", "five").code == 0
    sched.agent_at(NINE + 5 * MIN)
    assert [r["name"] for r in sched.tick(NINE + 5 * MIN)["runs"]] == ["five"]
    assert sched.run(NINE + 6 * MIN, "cron", "validate").code == 0
    # today's 10:00 of `daily` ran ahead: the pass at 10:00 runs `five` alone
    sched.agent_at(NINE + HOUR)
    assert [(r["name"], r["trigger"]) for r in sched.tick(NINE + HOUR)["runs"]] == [("five", "catchup")]
    # ten days on, real time reaches the runs made ahead: each is skipped, none runs twice
    sched.agent_at(AHEAD + 4 * MIN)
    assert sorted(r["name"] for r in sched.tick(AHEAD + 4 * MIN)["runs"]) == ["daily", "five"]
    for minutes in (5, 10, 15):
        sched.agent_at(AHEAD + minutes * MIN)
        report = sched.tick(AHEAD + minutes * MIN)
        assert report["runs"] == [] and [(s["name"], s["reason"], s["firstMs"]) for s in report[
            "skippedOccurrences"]] == [("five", "ran_ahead", AHEAD + minutes * MIN)], report
    sched.agent_at(AHEAD + 20 * MIN)
    assert [r["name"] for r in sched.tick(AHEAD + 20 * MIN)["runs"]] == ["five"]
    started, sent = _occurrences(sched)
    assert [occurrence for occurrence, n in started.items() if n > 1] == []
    assert [occurrence for occurrence, n in sent.items() if n > 1] == []
    assert started[("five", AHEAD + 20 * MIN)] == 1  # and the job runs on
    assert sched.run(AHEAD + 21 * MIN, "cron", "validate").code == 0
    # once the clock passed every record, the repair's marks are gone from the policy file
    assert "clockRepair" not in json.loads((sched.root / ".scheduler" / "sxctl-policy.json").read_text())


@pytest.mark.parametrize("write", [1, 2], ids=["policy-file", "store"])
def test_a_repair_killed_at_either_write_is_safe_and_the_next_one_finishes_it(sched, monkeypatch, write):
    """The policy file is written first: killed before it, nothing changed (passes still stop);
    killed between the two writes, passes go on while the jobs wait where the clock ahead left
    them (nothing runs twice); either way the next repair finishes, as one uninterrupted would."""
    _passes_ahead(sched, monkeypatch)
    before = _files(sched)
    killed_at(monkeypatch, "before-rename", lambda: sched.run(RIGHT, "cron", "repair", "--clock"), nth=write)
    after = _files(sched)
    assert check_store_bytes(after["cron-jobs.json"]) == []
    assert after["cron-jobs.json"] == before["cron-jobs.json"]
    assert (after["sxctl-policy.json"] == before["sxctl-policy.json"]) is (write == 1)
    sched.agent_at(RIGHT)
    tick = sched.run(RIGHT, "cron", "tick", "--json")
    if write == 1:
        assert tick.code == 5 and tick.json()["error"]["code"] == "clock_behind"
    else:
        assert tick.code == 0 and tick.json()["runs"] == [], tick.out  # the jobs still wait ten days
    again = sched.run(RIGHT, "cron", "repair", "--clock", "--json").json()
    assert again["repaired"] is True
    assert {job["name"]: job["nextRunAtMs"]["after"] for job in again["jobs"]} == {
        "five": NINE + 5 * MIN, "daily": NINE + DAY + HOUR}
    assert check_store_bytes(_files(sched)["cron-jobs.json"]) == []
    sched.agent_at(NINE + 5 * MIN)
    assert [r["name"] for r in sched.tick(NINE + 5 * MIN)["runs"]] == ["five"]
    started, _ = _occurrences(sched)
    assert [occurrence for occurrence, n in started.items() if n > 1] == []


def test_nothing_to_repair_writes_nothing_and_repair_needs_to_be_told_what(sched):
    sched.add(NINE - MIN, "five", "--every", "5m", "--payload", "heartbeat-event", "--text", "five")
    sched.agent_at(NINE)
    sched.tick(NINE)
    before = _files(sched)
    nothing = sched.run(NINE + MIN, "cron", "repair", "--clock")
    assert nothing.code == 0 and nothing.out.startswith("nothing to repair: no claim or run is recorded after")
    assert _files(sched) == before
    untold = sched.run(NINE + MIN, "cron", "repair")
    assert untold.code == 2 and untold.err.startswith("sxctl: say what to repair: --clock"), untold.err


def test_after_a_repair_a_job_failing_now_fails_doctor_whatever_ran_ahead(sched):
    """The last run was picked by its time: a run recorded ten days ahead stayed the job's last
    one, so `doctor -q` exited 0 while every run now failed (and a failure ahead would keep it
    red after runs succeed again). A run recorded after now is no job's last run."""
    sched.add(NINE - MIN, "deliver", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "delivery",
              "--text", "hi")
    ok, failing = {"SXCTL_DELIVER_CMD": "true"}, {"SXCTL_DELIVER_CMD": "false"}
    sched.agent_at(AHEAD)
    assert sched.run(AHEAD, "cron", "run", "deliver", env=sched.env(**ok)).code == 0
    assert sched.run(RIGHT, "cron", "repair", "--clock").code == 0
    sched.agent_at(RIGHT)
    report = sched.run(RIGHT, "cron", "tick", "--json", env=sched.env(**failing)).json()
    assert [run["status"] for run in report["runs"]] == ["failed"], report
    doctor = sched.run(RIGHT, "doctor", "-q", env=sched.env(**failing))
    assert doctor.code == 9 and "job deliver: its last run failed" in doctor.out + doctor.err
    status = sched.run(RIGHT, "status", "--json").json()
    assert [row["name"] for row in status["cron"]["failed"]] == ["deliver"]


def test_a_view_racing_a_pass_does_not_call_the_row_the_pass_just_wrote_ahead_of_its_clock(sched, project, monkeypatch):
    """Attacker: `doctor` (1 run in 50) and `status` (1 in 40) beside a pass in a loop said "this
    clock is behind … execution started after now" (doctor exit 9): they took their `now` before
    reading the ledger, and the pass wrote a row meanwhile. A view checks with the time after its read."""
    from sxctl.clock import FakeClock
    from sxctl.cron.run import file_checks
    from sxctl.cron.timeline import views
    from sxctl.health import cron_checks

    sched.add(NINE - MIN, "beat", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "beat")
    sched.agent_at(NINE + 5_000)
    assert sched.tick(NINE + 5_000)["runs"]  # the pass's row: started at 09:00:05
    clock = FakeClock(NINE)  # the view's clock read 09:00:00 before the pass wrote; 09:00:10 after

    def read_during_the_pass(*args, **kwargs):
        found = real(*args, **kwargs)
        clock.advance(10)
        return found

    real = file_checks.check_files
    for module in (file_checks, views, cron_checks):
        monkeypatch.setattr(module, "check_files", read_during_the_pass)
    doctor = project.run("doctor", "--json", clock=clock).json()
    assert not [c for c in doctor["checks"] if "clock is behind" in c["message"]], doctor["checks"]
    clock = FakeClock(NINE)
    status = project.run("--session", test_scheduling.SID, "status", "--json", clock=clock).json()
    assert not [p for p in status["problems"] if p["code"] == "clock_behind"], status["problems"]
    clock = FakeClock(NINE)
    assert project.run("cron", "validate", clock=clock).code == 0


def test_a_validate_racing_a_pass_confirms_an_orphan_start_before_it_reports_one(sched, project, monkeypatch):
    """Attacker: `cron validate` beside passes in a loop exited 5 with "orphan start …: no terminal
    and no active claim" 2 times in 24: it read the store before a pass claimed and the ledger after
    the pass started the run. An orphan start or a claim that differs is confirmed by a second reading."""
    import json as jsonlib

    from sxctl.clock import FakeClock
    from sxctl.cron.run import file_checks

    sched.add(NINE - MIN, "beat", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "beat")
    store = sched.root / ".scheduler" / "cron-jobs.json"
    before = jsonlib.loads(store.read_text())  # the store as the view read it, just before the pass claimed
    sched.agent_at(NINE + 5_000)
    killed_at(monkeypatch, "after-start", lambda: sched.run(NINE + 5_000, "cron", "tick"))  # claimed and started
    monkeypatch.undo()
    reads = []
    real = file_checks.read_store

    def first_read_is_stale(ws):
        reads.append(1)
        return before if len(reads) == 1 else real(ws)

    monkeypatch.setattr(file_checks, "read_store", first_read_is_stale)
    result = project.run("cron", "validate", "--json", clock=FakeClock(NINE + 6_000))
    assert len(reads) == 2 and result.code == 0, (reads, result.out)
    monkeypatch.setattr(file_checks, "read_store", lambda ws: before)  # an orphan both readings see is one
    assert "orphan start" in project.run("cron", "validate", clock=FakeClock(NINE + 6_000)).err


def test_a_damaged_run_history_is_a_warning_that_stops_no_pass(sched, project):
    """Attacker: one bad line in sxctl-spend-runs.jsonl made doctor FAIL "every scheduler pass stops
    on it" (exit 9) while passes went on; only `cron runs` needs the file."""
    sched.add(NINE - MIN, "beat", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "beat")
    sched.agent_at(NINE)
    assert sched.tick(NINE)["runs"]
    history = sched.root / ".scheduler" / "sxctl-spend-runs.jsonl"
    history.write_bytes(b'\xff\xfe{"x":1}\n')
    doctor = sched.run(NINE + MIN, "doctor", "--json").json()
    [files] = [c for c in doctor["checks"] if c["check"] == "cron files"]
    assert files["status"] == "warn" and "passes go on" in files["message"] and "stops" not in files["message"]
    validate = sched.run(NINE + MIN, "cron", "validate", "--json")
    assert validate.code == 5 and "passes go on" in validate.out
    status = sched.run(NINE + MIN, "cron", "status", "--json").json()
    assert [p["code"] for p in status["problems"] if "sxctl-spend-runs.jsonl" in str(p.get("file"))] == [
        "invalid_history"]
    sched.agent_at(NINE + 5 * MIN)
    assert sched.tick(NINE + 5 * MIN)["runs"]  # the pass goes on


def test_doctor_beside_a_writer_renaming_its_temp_file_is_not_a_failure(sched, monkeypatch):
    """Attacker: doctor beside passes failed "temps and locks: No such file or directory: …tmp"
    2 times in 182: a writer renamed its temp file between doctor's listing and its stat."""
    from sxctl.health import session_checks

    sched.add(NINE - MIN, "beat", "--every", "5m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "beat")
    temp = sched.root / ".scheduler" / "cron-jobs.json.1234.tmp"
    real = session_checks.os.scandir

    def listed_then_renamed(folder):
        entries = list(real(folder))
        if temp.exists() and any(entry.path == str(temp) for entry in entries):
            temp.unlink()  # the writer's rename, just after the listing
        return iter(entries)

    temp.write_text("{}")
    monkeypatch.setattr(session_checks.os, "scandir", listed_then_renamed)
    checks = {c["check"]: c for c in sched.run(NINE, "doctor", "--json").json()["checks"]}
    assert checks["temps"]["status"] == "ok", checks.get("temps")
    assert "No such file" not in json.dumps(checks)

"""Run limits (`--max-runs`, `--max-runs-per-day`, `--max-unconsumed`) counted from durable facts:
a pass killed at any moment never lets a job dispatch more than its limit."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest

from sxctl.clock import FakeClock
from sxctl.cron.run.ledger import scan_ledger
from tests.comis_strict import check_store_bytes
from tests.conftest import RandomKiller, now_ms, timed_run
from tests.core.cron.test_scheduling import MIN, NINE, SID

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

HOUR = 60 * MIN

LIMITS = {
    "max-runs": ("--max-runs", "1"),
    "max-runs-per-day": ("--max-runs-per-day", "1"),
    "max-unconsumed": ("--max-unconsumed", "1"),
}
POINTS = ("before-rename", "after-claim", "after-start", "after-dispatch", "after-terminal")


def _store_path(project):
    return project.root / ".scheduler" / "cron-jobs.json"


def _due_times():
    """Distinct due times in the two minutes before now (the daily limit counts one day: the
    per-day job's zone is one where it is about noon, `_flags`)."""
    now = now_ms()
    return iter(range(now - 130_000, now - 10_000, 400))  # 300: 60 rounds of 3 take 180


def _flags(limit: str) -> tuple[str, ...]:
    """The limit's flags; the per-day one in a fixed-offset zone where it is about noon now, so
    that no pass of the test crosses the job's midnight (a run after it counts toward a new day)."""
    if limit != "max-runs-per-day":
        return LIMITS[limit]
    offset = 12 - time.gmtime().tm_hour  # -11 .. 12 hours east of UTC
    zone = "Etc/GMT" + (f"{-offset:+d}" if offset else "")  # (Etc/GMT-5 is five hours EAST)
    return (*LIMITS[limit], "--tz", zone)


def _make_due(project, names, at_ms):
    """Move the scheduled jobs `names` to be due at `at_ms` (a paused job stays paused)."""
    path = _store_path(project)
    data = json.loads(path.read_text())
    for job in data["jobs"]:
        if job["name"] in names and job["lifecycle"]["status"] == "scheduled":
            job["lifecycle"]["nextRunAtMs"] = at_ms
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def _messages(folder, text):
    """The inbox messages (pending or read) whose text starts with `text`."""
    found = []
    for sub in ("inbox", "inbox/done"):
        for path in (folder / sub).glob("*.json"):
            body = json.loads(path.read_text())
            if body["text"].split("\n", 1)[0] == text:
                found.append(path.stem)
    return found


def _check_files(project):
    """The store loads in comis and the ledger is strictly valid after every command."""
    store = _store_path(project)
    assert check_store_bytes(store.read_bytes()) == []
    scan_ledger(project.root / ".scheduler" / "cron-executions.jsonl", full=True)


def _clean_pass(project):
    result = project.run("cron", "tick", "--json", "--lock-wait", "5")
    assert result.code == 0, result.err
    _check_files(project)
    return result.json()


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("limit", list(LIMITS))
def test_a_pass_killed_at_any_step_never_lets_a_job_exceed_its_limit(project, limit, point):
    """Each limit set to 1; a pass killed at `point` (a real process, exit 99 without clean-up),
    then clean passes with the job due again before each: at most one message ever reaches the
    inbox (nobody reads it, so `--max-unconsumed 1` is at its limit too)."""
    folder = project.session()
    assert project.run("cron", "add", "capped", "--every", "1h", "--payload", "heartbeat-event", "--text", "capped",
                       *_flags(limit)).code == 0
    times = _due_times()
    _make_due(project, {"capped"}, next(times))
    killed = project.fork("cron", "tick", "-q", "--fault-inject", point)
    assert killed.code == 99, killed.err  # the kill happened
    _check_files(project)
    for _ in range(2):
        _make_due(project, {"capped"}, next(times))
        project.session()  # the agent is live
        _clean_pass(project)
        assert len(_messages(folder, "capped")) <= 1, f"--{limit} 1 exceeded after a kill at {point}"
    assert len(_messages(folder, "capped")) == 1  # and the limit did not stop the first run


@pytest.mark.slow
def test_sigkill_at_random_moments_never_exceeds_a_limit(project):
    """Three jobs, one per limit (each 1), created afresh each round; a pass SIGKILLed at a random
    moment, then two clean passes with the jobs due again: at most one message per job."""
    seed = int(os.environ.get("SXCTL_TEST_SEED", random.randrange(1 << 30)))
    print(f"\nseed {seed} (SXCTL_TEST_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    folder = project.session()
    argv = ["cron", "tick", "-q"]
    times = _due_times()

    def add_round(n):
        names = {f"r{n}-{limit}": _flags(limit) for limit in LIMITS}
        for name, flags in names.items():
            assert project.run("cron", "add", name, "--every", "1h", "--payload", "heartbeat-event", "--text", name,
                               *flags).code == 0
        return names

    names = add_round(0)
    _make_due(project, names, next(times))
    project.session()
    full, calibration = timed_run(argv, cwd=project.root, env=project.env())
    assert calibration.code == 0, calibration.err
    killer = RandomKiller(rng, full, 0.2, 1.0)
    n = 0
    # 30 rounds at least, and 30 kills (a pass that ended first is not one) unless 60 rounds did not
    # get them (a loaded machine stretches the runs)
    while n < 30 or (killer.kills < 30 and n < 60):
        n += 1
        for name in names:
            assert project.run("cron", "remove", name, "--yes").code == 0
        names = add_round(n)
        _make_due(project, names, next(times))
        project.session()
        killer.run(argv, cwd=project.root, env=project.env())
        _check_files(project)
        for _ in range(2):
            _make_due(project, names, next(times))
            project.session()
            _clean_pass(project)
        over = {name: len(_messages(folder, name)) for name in names if len(_messages(folder, name)) > 1}
        assert not over, f"limit exceeded after a SIGKILL (seed {seed}, round {n}): {over}"
    assert killer.kills >= 8, f"only {killer.kills} of {n} passes were killed (seed {seed}); the test proved little"


# --- what counts: a dispatch, read from durable facts ----------------------------------------------

def test_an_unknown_run_whose_message_is_in_the_inbox_counts_before_the_next_pass_settles_it(project):
    """A pass killed right after it dispatched leaves a claim and an unsettled start; the message
    is in the inbox. `cron show`/`cron list` count it already (one rule with the pass), and the
    next pass expires the job instead of running it again."""
    folder = project.session()
    assert project.run("cron", "add", "once", "--every", "1h", "--payload", "heartbeat-event", "--text", "once",
                       "--max-runs", "1").code == 0
    _make_due(project, {"once"}, now_ms() - 1000)
    assert project.fork("cron", "tick", "--fault-inject", "after-dispatch").code == 99
    assert len(_messages(folder, "once")) == 1 and json.loads(_store_path(project).read_text())["activeClaims"]
    assert project.run("cron", "show", "once", "--json").json()["policy"]["runs"] == 1
    [row] = project.run("cron", "list", "--json").json()["jobs"]
    assert row["policy"]["runs"] == 1
    _make_due(project, {"once"}, now_ms() - 1000)
    project.session()
    report = _clean_pass(project)
    assert report["runs"] == [] and [p["reason"] for p in report["paused"]] == ["expired"]
    assert report["reconciled"]["ownerLostAfterStart"] == 1
    assert len(_messages(folder, "once")) == 1
    shown = project.run("cron", "show", "once", "--json").json()
    assert shown["state"] == "paused:expired" and shown["policy"]["runs"] == 1


def test_a_run_killed_before_it_sent_anything_spends_no_limit(project):
    """Killed after its start row, before dispatch: `unknown`, no message — it counts for nothing,
    and the next occurrence runs."""
    folder = project.session()
    assert project.run("cron", "add", "once", "--every", "1h", "--payload", "heartbeat-event", "--text", "once",
                       "--max-runs", "1").code == 0
    _make_due(project, {"once"}, now_ms() - 1000)
    assert project.fork("cron", "tick", "--fault-inject", "after-start").code == 99
    assert project.run("cron", "show", "once", "--json").json()["policy"]["runs"] == 0
    _make_due(project, {"once"}, now_ms() - 1000)
    project.session()
    [run] = _clean_pass(project)["runs"]
    assert run["status"] == "dispatched" and len(_messages(folder, "once")) == 1


def test_a_given_up_occurrence_spends_no_max_runs(sched):
    """Past its --hold-max with no live agent the occurrence is given up (a failed run, nothing
    dispatched): the job's only run is still there for the next occurrence."""
    sched.add(NINE, "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "1",
              "--hold-max", "10m")
    sched.agent_at(NINE)  # the agent stops after 09:00
    [given_up] = sched.tick(NINE + HOUR + 16 * MIN)["runs"]
    assert (given_up["status"], given_up["errorKind"]) == ("failed", "precondition")
    assert sched.job("hourly")["state"] == "scheduled" and sched.job("hourly")["policy"]["runs"] == 0
    sched.agent_at(NINE + 2 * HOUR)
    report = sched.tick(NINE + 2 * HOUR)
    assert [r["status"] for r in report["runs"]] == ["dispatched"] and len(sched.pending()) == 1
    assert [p["reason"] for p in report["paused"]] == ["expired"]


def test_a_pass_killed_between_its_policy_and_store_writes_counts_the_run_once(project, monkeypatch):
    """The next pass counts a dead pass's run in the policy file, then dies before the store
    write that drops the claim: the pass after it finds the claim counted already — a budget of
    2 still gives two messages, not one."""
    from sxctl.cron.run import pass_files as runner

    folder = project.session()
    assert project.run("cron", "add", "a", "--every", "1h", "--payload", "heartbeat-event", "--text", "a",
                       "--max-runs", "2").code == 0
    _make_due(project, {"a"}, now_ms() - 1000)
    assert project.fork("cron", "tick", "--fault-inject", "after-terminal").code == 99
    policy = project.root / ".scheduler" / "sxctl-policy.json"
    [claim] = json.loads(_store_path(project).read_text())["activeClaims"]

    def killed(*args, **kwargs):
        raise SystemExit(99)

    with monkeypatch.context() as patch:
        patch.setattr(runner, "write_store", killed)
        assert project.run("cron", "tick", "--lock-wait", "5").code == 99
    [entry] = json.loads(policy.read_text())["jobs"].values()
    assert entry["runs"] == 1 and entry["countedId"] == claim["executionId"]  # counted ...
    assert json.loads(_store_path(project).read_text())["activeClaims"] == [claim]  # ... and still claimed
    _make_due(project, {"a"}, now_ms() - 1000)
    project.session()
    report = _clean_pass(project)
    assert report["reconciled"]["settledFromTerminal"] == 1 and [r["status"] for r in report["runs"]] == ["dispatched"]
    assert len(_messages(folder, "a")) == 2
    assert project.run("cron", "show", "a", "--json").json()["state"] == "paused:expired"


# --- the policy file never outgrows what its readers take -------------------------------------------

def _crowd(project, count: int, records: int) -> None:
    """`count` jobs due at NINE, each kept out by its active hours, each with `records` skip
    records in the policy file — as a long run of passes leaves them."""
    import uuid

    assert project.run("cron", "add", "j0", "--every", "1m", "--payload", "heartbeat-event", "--text", "x",
                       clock=FakeClock(NINE - HOUR)).code == 0
    store = json.loads(_store_path(project).read_text())
    [job] = store["jobs"]
    jobs, entries = [], {}
    for n in range(count):
        job_id = str(uuid.uuid4())
        jobs.append({**job, "id": job_id, "name": f"j{n}",
                     "lifecycle": {**job["lifecycle"], "nextRunAtMs": NINE - 1000}})
        recent = [{"scheduledForMs": NINE - (records - i) * MIN, "lastMs": NINE - (records - i) * MIN, "count": 1,
                   "reason": "inactive_hours", "atMs": NINE - (records - i) * MIN} for i in range(records)]
        entries[job_id] = {"activeHours": "03:00-04:00", "skips": {"total": records + 100, "recent": recent}}
    store["jobs"] = jobs
    _store_path(project).write_text(json.dumps(store, separators=(",", ":")) + "\n")
    (project.root / ".scheduler" / "sxctl-policy.json").write_text(
        json.dumps({"formatVersion": 1, "jobs": entries}, separators=(",", ":")) + "\n")


def _cap(monkeypatch, size: int) -> None:
    from sxctl.cron.policy import file as policy

    monkeypatch.setattr(policy, "FILE_CAP", size)
    monkeypatch.setattr(policy, "READ_CAP", 2 * size, raising=False)


def test_a_pass_never_grows_the_policy_file_past_its_cap(project, monkeypatch):
    """A file just under the cap; a pass skips one more occurrence of every job: the file it
    writes is within the cap (each job keeps fewer recent skips, every total counts on), and
    every command still reads it."""
    _crowd(project, 40, 19)
    path = project.root / ".scheduler" / "sxctl-policy.json"
    _cap(monkeypatch, len(path.read_bytes()) + 500)
    from sxctl.cron.policy import file as policy

    report = project.run("cron", "tick", "--json", clock=FakeClock(NINE))
    assert report.code == 0, report.err
    assert len(report.json()["skippedOccurrences"]) == 40
    assert len(path.read_bytes()) <= policy.FILE_CAP
    entries = json.loads(path.read_text())["jobs"].values()
    assert {entry["skips"]["total"] for entry in entries} == {121}  # 119 + 09:00 less a second, and 09:00
    assert {len(entry["skips"]["recent"]) for entry in entries} == {19}  # the same for all: 20 each would not fit
    assert {entry["skips"]["recent"][-1]["scheduledForMs"] for entry in entries} == {NINE - 1000}  # the newest kept
    for args in (("cron", "list"), ("cron", "show", "j3"), ("cron", "runs", "j3"), ("cron", "tick")):
        assert project.run(*args, clock=FakeClock(NINE + MIN)).code == 0, args
    assert check_store_bytes(_store_path(project).read_bytes()) == []


def test_remove_and_update_work_on_a_policy_file_already_past_its_cap(project, monkeypatch):
    """A file an older sxctl grew past the cap: read (up to READ_CAP), and the next write brings
    it back within the cap."""
    _crowd(project, 40, 20)
    path = project.root / ".scheduler" / "sxctl-policy.json"
    _cap(monkeypatch, len(path.read_bytes()) - 3000)
    from sxctl.cron.policy import file as policy

    for args in (("cron", "list"), ("cron", "remove", "j0", "--yes"), ("cron", "update", "j1", "--max-runs", "3")):
        result = project.run(*args, clock=FakeClock(NINE))
        assert result.code == 0, (args, result.err)
    assert len(path.read_bytes()) <= policy.FILE_CAP
    entries = json.loads(path.read_text())["jobs"]
    assert len(entries) == 39 and {e["skips"]["total"] for e in entries.values()} == {120}  # kept, trimmed or not
    assert project.run("cron", "show", "j1", "--json", clock=FakeClock(NINE)).json()["policy"]["maxRuns"] == 3


def test_settings_alone_past_the_cap_are_refused_and_nothing_is_written(project, monkeypatch):
    _crowd(project, 40, 0)
    path = project.root / ".scheduler" / "sxctl-policy.json"
    before = path.read_bytes()
    _cap(monkeypatch, len(before) - 10)
    refused = project.run("cron", "update", "j1", "--max-runs", "3", clock=FakeClock(NINE))
    assert refused.code == 4 and "sxctl-policy.json" in refused.err and "cap" in refused.err
    assert path.read_bytes() == before


@pytest.mark.slow
def test_3650_jobs_with_skip_history_stay_usable(project):
    """The reported case at full size: 3,650 jobs with 20 skip records each (8.6 MB, past the
    8 MiB cap) — cron remove works, and the next write is within the cap."""
    from sxctl.cron.policy.file import FILE_CAP

    _crowd(project, 3650, 20)
    path = project.root / ".scheduler" / "sxctl-policy.json"
    assert len(path.read_bytes()) > FILE_CAP
    assert project.run("cron", "remove", "j0", "--yes", clock=FakeClock(NINE)).code == 0
    assert project.run("cron", "update", "j1", "--max-runs", "3", clock=FakeClock(NINE)).code == 0
    assert len(path.read_bytes()) <= FILE_CAP
    assert project.run("cron", "list", "--json", clock=FakeClock(NINE)).code == 0


# --- the views say what the pass does ---------------------------------------------------------------

def test_cron_next_says_a_held_job_waits_as_the_pass_does(sched):
    sched.add(NINE - HOUR, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "morning", "--hold-max", "2h")
    sched.agent_at(NINE - MIN)  # the agent stopped at 08:59
    at = NINE + 10 * MIN
    [fire] = sched.run(at, "cron", "next", "daily", "-n", "1", "--json").json()["fires"]
    [waiting] = sched.tick(at)["waiting"]
    assert (fire["due"], fire["overdue"]) == (True, False)  # held by the pass: not missed by it
    assert fire["waiting"] == {"status": "waiting", "reason": "no_live_session", "dueSinceMs": NINE,
                               "giveUpAtMs": waiting["giveUpAtMs"], "holdMaxMs": 2 * HOUR}
    assert waiting["giveUpAtMs"] == NINE + 2 * HOUR
    shown = sched.run(at, "cron", "next", "daily", "-n", "1", "--tz", "UTC")
    assert "waiting for agent until 2026-12-01 11:00" in shown.out and "catchup" not in shown.out
    merged = sched.run(at, "--session", SID, "next", "--json").json()
    assert [row["waiting"] for row in merged["rows"] if row["source"] == "cron"][0] is True

    late = NINE + 2 * HOUR + MIN  # past its hold limit: the pass gives it up
    [fire] = sched.run(late, "cron", "next", "daily", "-n", "1", "--json").json()["fires"]
    assert fire["waiting"]["status"] == "given_up"
    assert "given up at the next pass" in sched.run(late, "cron", "next", "daily", "-n", "1").out
    [run] = sched.tick(late)["runs"]
    assert (run["status"], run["errorKind"]) == ("failed", "precondition")

    sched.agent_at(NINE + 24 * HOUR + MIN)  # live again: an overdue job just runs at the next pass
    [fire] = sched.run(NINE + 24 * HOUR + MIN, "cron", "next", "daily", "-n", "1", "--json").json()["fires"]
    assert (fire["due"], fire["mark"], fire["waiting"]) == (True, "due", None)


def test_a_max_runs_job_made_a_one_shot_drops_its_lifetime_and_takes_other_flags(sched):
    sched.add(NINE, "trial", "--every", "1h", "--payload", "heartbeat-event", "--text", "x", "--max-runs", "1")
    sched.agent_at(NINE + HOUR)
    sched.tick(NINE + HOUR)
    assert sched.job("trial")["state"] == "paused:expired"
    changed = sched.run(NINE + HOUR + MIN, "cron", "update", "trial", "--in", "30m", "--json")
    assert changed.code == 0, changed.err
    other = sched.run(NINE + HOUR + MIN, "cron", "update", "trial", "--max-unconsumed", "2")
    assert other.code == 0, other.err  # an unrelated flag is not refused for a limit the job no longer has
    assert "dropped --max-runs: a one-shot runs once" in changed.json()["notes"]
    row = sched.job("trial")
    assert row["state"] == "scheduled" and row["policy"]["maxRuns"] is None and row["policy"]["paused"] is None
    refused = sched.run(NINE + HOUR + MIN, "cron", "update", "trial", "--max-runs", "2")
    assert refused.code == 2 and "recurring" in refused.err
    sched.agent_at(NINE + HOUR + 31 * MIN)
    [run] = sched.tick(NINE + HOUR + 31 * MIN)["runs"]
    assert run["status"] == "dispatched" and len(sched.pending()) == 2


# --- changing a limit never resets what was spent; the policy file cannot undercount the ledger ------

def _texts(sched, text: str) -> int:
    return sum(1 for message in sched.pending() if message["text"].split("\n", 1)[0] == text)


def _hourly_passes(sched, first_ms: int, count: int) -> list[dict]:
    """`count` passes an hour apart from `first_ms`, the agent live at each; the sxctl pauses
    they report."""
    paused = []
    for n in range(count):
        at = first_ms + n * HOUR
        sched.agent_at(at)
        paused += sched.tick(at)["paused"]
    return paused


@pytest.mark.parametrize(("new", "total"), [(3, 3), (2, 2), (1, 2), (5, 5)],
                         ids=["same", "lower-reached", "lower-passed", "higher"])
def test_updating_max_runs_keeps_the_runs_already_spent(sched, new, total):
    """--max-runs 3, two runs, then `cron update --max-runs N`: the two runs still count, so the
    job dispatches max(N, 2) messages in all — never N more — and the pause says how many ran."""
    sched.add(NINE, "jE", "--every", "1h", "--payload", "agent-turn", "--to", SID, "--text", "E", "--max-runs", "3")
    assert _hourly_passes(sched, NINE + HOUR, 2) == [] and _texts(sched, "E") == 2
    changed = sched.run(NINE + 2 * HOUR + MIN, "cron", "update", "jE", "--max-runs", str(new))
    assert changed.code == 0, changed.err
    assert sched.job("jE")["policy"]["runs"] == 2  # kept: only `cron resume` starts a new budget
    [paused] = _hourly_passes(sched, NINE + 3 * HOUR, 6)
    assert _texts(sched, "E") == total
    assert paused["reason"] == "expired"
    assert f"it has run {total} time(s) (--max-runs {new})" in paused["message"], paused["message"]
    shown = sched.job("jE")
    assert shown["state"] == "paused:expired" and shown["policy"]["runs"] == total


def test_resume_after_max_runs_still_gives_a_fresh_budget(sched):
    """Only `cron resume` starts a new budget: the ledger's runs before the resume count no more."""
    sched.add(NINE, "jR", "--every", "1h", "--payload", "heartbeat-event", "--text", "R", "--max-runs", "2")
    [paused] = _hourly_passes(sched, NINE + HOUR, 3)
    assert _texts(sched, "R") == 2 and "it has run 2 time(s)" in paused["message"]
    assert sched.run(NINE + 4 * HOUR, "cron", "resume", "jR").code == 0
    assert sched.job("jR")["policy"]["runs"] == 0
    [paused] = _hourly_passes(sched, NINE + 5 * HOUR, 3)
    assert _texts(sched, "R") == 4 and "it has run 2 time(s)" in paused["message"]


def _edit_entry(sched, change) -> None:
    """Rewrite the job's policy entry as an attacker (or a clock that lied) would."""
    policy = json.loads(sched.policy_file.read_text())
    [entry] = policy["jobs"].values()
    change(entry)
    sched.policy_file.write_text(json.dumps(policy))


def test_a_policy_file_edited_to_zero_runs_never_lets_max_runs_be_exceeded(sched):
    """`runs: 0` written before every pass: the ledger proves the runs, so --max-runs 3 still
    means three messages, and `cron show` counts what the pass counts."""
    sched.add(NINE, "jB", "--every", "1h", "--payload", "heartbeat-event", "--text", "B", "--max-runs", "3")
    paused = []
    for n in range(1, 9):
        if n > 1:
            _edit_entry(sched, lambda entry: entry.update(runs=0))
            assert sched.job("jB")["policy"]["runs"] == min(n - 1, 3)  # the view counts the ledger too
        paused += _hourly_passes(sched, NINE + n * HOUR, 1)
    assert _texts(sched, "B") == 3
    assert [p["reason"] for p in paused] == ["expired"] and "it has run 3 time(s)" in paused[0]["message"]


@pytest.mark.parametrize("edit", ["day.runs=0", "day.date=future"])
def test_a_policy_file_that_undercounts_the_day_never_lets_max_runs_per_day_be_exceeded(sched, edit):
    """--max-runs-per-day 4 on an hourly job in New York: before every pass of one New York day
    (15:00-22:00, across UTC midnight) the day's count is zeroed, or stamped with a future date
    as a clock that ran ahead leaves it. The ledger proves the day's runs, in the job's zone:
    four messages, the other occurrences skipped."""
    def undercount(entry):
        if "day" in entry:
            entry["day"] = {"date": entry["day"]["date"], "runs": 0} if edit == "day.runs=0" \
                else {"date": "2027-06-01", "runs": entry["day"]["runs"]}

    start = NINE + 11 * HOUR  # 20:00 UTC, 15:00 in New York
    sched.add(start - 30 * MIN, "jD", "--cron", "0 * * * *", "--tz", "America/New_York", "--payload",
              "heartbeat-event", "--text", "D", "--max-runs-per-day", "4")
    for n in range(8):  # 15:00 to 22:00 New York, 20:00 to 03:00 UTC
        _edit_entry(sched, undercount)
        assert _hourly_passes(sched, start + n * HOUR, 1) == []
    assert _texts(sched, "D") == 4
    skips = sched.job("jD")["policy"]["skips"]
    assert skips["total"] == 4 and {s["reason"] for s in skips["recent"]} == {"max_runs_per_day"}


def test_a_day_stamped_in_the_future_is_replaced_by_the_ledgers_count_before_retention_drops_it(sched):
    """The day's count stamped once with a future date, every pass keeping a single execution in
    the ledger (--retain-executions 1): the next pass puts the count the ledger proves back into
    the policy file, which counts on from there — four messages, not one an hour."""
    sched.add(NINE, "jF", "--every", "1h", "--payload", "heartbeat-event", "--text", "F", "--max-runs-per-day", "4")
    for n in range(1, 9):
        if n == 2:
            _edit_entry(sched, lambda entry: entry.update(day={"date": "2027-06-01", "runs": 1}))
        sched.agent_at(NINE + n * HOUR)
        sched.tick(NINE + n * HOUR, "--retain-executions", "1")
    assert _texts(sched, "F") == 4
    [entry] = json.loads(sched.policy_file.read_text())["jobs"].values()
    assert entry["day"] == {"date": "2026-12-01", "runs": 4}


def test_a_max_runs_added_later_counts_the_scheduled_runs_the_ledger_holds(sched):
    """A job without limits runs twice on schedule and once by hand; `--max-runs 3` added then
    counts the two scheduled runs (not the manual one): one more message, and `cron show` says so."""
    sched.add(NINE, "jL", "--every", "1h", "--payload", "heartbeat-event", "--text", "L")
    sched.agent_at(NINE + 30 * MIN)
    assert sched.run(NINE + 30 * MIN, "cron", "run", "jL").code == 0
    assert _hourly_passes(sched, NINE + HOUR, 2) == []
    assert sched.run(NINE + 2 * HOUR + MIN, "cron", "update", "jL", "--max-runs", "3").code == 0
    assert sched.job("jL")["policy"]["runs"] == 2
    [paused] = _hourly_passes(sched, NINE + 3 * HOUR, 3)
    assert _texts(sched, "L") == 4 and "it has run 3 time(s) (--max-runs 3)" in paused["message"]


def test_the_human_cron_show_says_the_policy(project):
    assert project.run("cron", "add", "day", "--every", "1h", "--payload", "heartbeat-event", "--text", "t",
                       "--tz", "Europe/Berlin", "--active-hours", "08:00-18:00", "--active-days", "mon-fri",
                       "--max-runs-per-day", "5", "--max-runs", "3", "--hold-max", "2h").code == 0
    lines = project.run("cron", "show", "day").out.splitlines()
    assert lines[1] == ("policy: hold up to 2h0m for a live agent; catch-up once; active 08:00-18:00 mon,tue,wed,thu,fri; "
                        "at most 5 run(s) a day; expires after 3 run(s) (0 so far); zone Europe/Berlin")


def _on_a_terminal(project, *args: str, columns: int, color: bool = False) -> list[str]:
    """`sxctl ARGS` with its stdout on a pseudo-terminal `columns` wide: the plain table, or with
    `color` the one rich draws (its escapes removed from the lines returned)."""
    import pty
    import re

    leader, follower = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "sxctl", *args, *(() if color else ("--no-color",))],
                          cwd=project.root, env=project.env(COLUMNS=str(columns), TERM="xterm-256color"),
                          stdout=follower, stderr=subprocess.PIPE, timeout=60)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.returncode == 0, proc.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode().replace("\r\n", "\n")).splitlines()


@pytest.mark.parametrize("columns", [80, 100])
def test_cron_runs_fits_the_terminal_and_json_keeps_every_value(project, columns):
    assert project.run("cron", "add", "a-rather-long-job-name", "--every", "1h", "--payload", "agent-turn",
                       "--text", "t").code == 0
    assert project.run("cron", "run", "a-rather-long-job-name", "--mode", "force").code == 10  # no live session
    for extra in ((), ("--evidence",)):
        lines = _on_a_terminal(project, "cron", "runs", "--all-jobs", *extra, columns=columns)
        assert len(lines) == 2 and all(len(line) <= columns for line in lines), lines
        assert lines[0].split()[:3] == ["JOB", "STARTED", "STATUS"] and "…" in lines[1]
        assert "COUNTERS" not in lines[0] and "EVIDENCE" not in lines[0]  # nothing in them: left out
    [run] = project.run("cron", "runs", "--all-jobs", "--json").json()["runs"]
    assert len(run["executionId"]) == 36 and run["errorKind"] == "precondition"
    piped = project.run("cron", "runs", "--all-jobs", env=project.env(COLUMNS=str(columns))).out.splitlines()
    assert run["executionId"] in piped[1] and "…" not in piped[1]  # a pipe gets every value whole


def _skipping_jobs(project) -> int:
    """Two `--catch-up skip` jobs a pass at the real now left behind: `beat` skipped 3 stale
    occurrences and has one run, `late` skipped 1. Returns that now."""
    from datetime import UTC, datetime

    now = now_ms() // 1000 * 1000
    project.session(SID)
    for name, first in (("beat", now - 150 * MIN), ("late", now - 30 * MIN)):
        anchor = datetime.fromtimestamp(first / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        added = project.run("cron", "add", name, "--every", "1h", "--anchor", anchor, "--catch-up", "skip",
                            "--stale-after", "10m", "--payload", "heartbeat-event", "--text", "t",
                            clock=FakeClock(now - 3 * HOUR))
        assert added.code == 0, added.err
    assert project.run("--session", SID, "cron", "tick", clock=FakeClock(now)).code == 0
    assert project.run("--session", SID, "cron", "run", "beat", clock=FakeClock(now)).code == 0
    return now


def test_cron_runs_says_one_occurrence_at_its_time_and_more_from_one_to_the_other(project):
    """It said "skipped 1 occurrence(s) X to X"."""
    now = _skipping_jobs(project)
    [late] = project.run("cron", "runs", "late", clock=FakeClock(now)).out.splitlines()[:1]
    assert late.startswith("skipped 1 occurrence at 2") and late.endswith(" (30m0s ago): stale"), late
    [beat] = project.run("cron", "runs", "beat", clock=FakeClock(now)).out.splitlines()[:1]
    assert beat.startswith("skipped 3 occurrences from 2") and " (2h30m ago) to 2" in beat, beat
    assert beat.endswith(" (30m0s ago): stale") and "(s)" not in beat + late


@pytest.mark.parametrize("color", [True, False])
def test_cron_runs_keeps_within_columns_on_a_terminal_in_colour_too(project, color):
    """Colour on (a terminal's default), rich drew its own table: every column squeezed, each
    run wrapped over five lines; the skipped line ran past the edge. Now the same fitting as
    the plain table, and the sentence wraps."""
    _skipping_jobs(project)
    lines = _on_a_terminal(project, "cron", "runs", "beat", columns=80, color=color)
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("skipped 3 occurrences from ") and lines[1].startswith("  ")  # wrapped, indented
    header = next(i for i, line in enumerate(lines) if line.startswith("STARTED"))
    assert len(lines) == header + 2 and "dispatched" in lines[-1] and "…" in lines[-1], lines  # one line a run

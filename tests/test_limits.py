"""Run limits (`--max-runs`, `--max-runs-per-day`, `--max-unconsumed`) counted from durable facts:
a pass killed at any moment never lets a job dispatch more than its limit."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from sxctl.cron.ledger import scan_ledger

from . import test_scheduling
from .comis_strict import check_store_bytes
from .conftest import now_ms
from .test_scheduling import MIN, NINE

sched = test_scheduling.sched  # the fixture of tests/test_scheduling.py: a project at a fake time

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
    """Distinct due times, all on one UTC day that has begun (the daily limit counts one day)."""
    now = now_ms()
    day_start = now - now % 86_400_000
    base = day_start if now - day_start > 120_000 else day_start - 3_600_000
    return iter(range(base + 1000, base + 120_000, 1000))


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
    """Each limit set to 1; two rounds of a pass killed at `point` (a real process, exit 99)
    followed by a clean pass, the job due again before each: at most one message ever reaches
    the inbox (nobody reads it, so `--max-unconsumed 1` is at its limit too)."""
    folder = project.session()
    assert project.run("cron", "add", "capped", "--every", "1h", "--payload", "heartbeat-event", "--text", "capped",
                       *LIMITS[limit]).code == 0
    times = _due_times()
    crashes = 0
    for _ in range(2):
        _make_due(project, {"capped"}, next(times))
        project.session()  # the agent is live
        killed = project.process("cron", "tick", "-q", "--fault-inject", point)
        assert killed.code in (0, 99), killed.err
        crashes += killed.code == 99
        _check_files(project)
        _make_due(project, {"capped"}, next(times))
        project.session()
        _clean_pass(project)
        assert len(_messages(folder, "capped")) <= 1, f"--{limit} 1 exceeded after a kill at {point}"
    assert crashes >= 1, "the pass was never killed: the test proved nothing"
    assert len(_messages(folder, "capped")) == 1  # and the limit did not stop the first run


@pytest.mark.slow
def test_sigkill_at_random_moments_never_exceeds_a_limit(project):
    """Three jobs, one per limit (each 1), created afresh each round; a pass SIGKILLed at a random
    moment, then two clean passes with the jobs due again: at most one message per job."""
    seed = int(os.environ.get("SXCTL_TEST_SEED", random.randrange(1 << 30)))
    print(f"\nseed {seed} (SXCTL_TEST_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    folder = project.session()
    argv = [sys.executable, "-m", "sxctl", "cron", "tick", "-q"]
    times = _due_times()

    def add_round(n):
        names = {f"r{n}-{limit}": LIMITS[limit] for limit in LIMITS}
        for name, flags in names.items():
            assert project.run("cron", "add", name, "--every", "1h", "--payload", "heartbeat-event", "--text", name,
                               *flags).code == 0
        return names

    names = add_round(0)
    _make_due(project, names, next(times))
    project.session()
    started = time.monotonic()
    subprocess.run(argv, cwd=project.root, env=project.env(), check=True)
    full = time.monotonic() - started
    kills = 0
    for n in range(1, 31):
        for name in names:
            assert project.run("cron", "remove", name, "--yes").code == 0
        names = add_round(n)
        _make_due(project, names, next(times))
        project.session()
        proc = subprocess.Popen(argv, cwd=project.root, env=project.env(), stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.0) * full)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        _check_files(project)
        for _ in range(2):
            _make_due(project, names, next(times))
            project.session()
            _clean_pass(project)
        over = {name: len(_messages(folder, name)) for name in names if len(_messages(folder, name)) > 1}
        assert not over, f"limit exceeded after a SIGKILL (seed {seed}, round {n}): {over}"
    assert kills >= 8, f"only {kills} of 30 passes were killed (seed {seed}); the test proved little"


# --- what counts: a dispatch, read from durable facts ----------------------------------------------

def test_an_unknown_run_whose_message_is_in_the_inbox_counts_before_the_next_pass_settles_it(project):
    """A pass killed right after it dispatched leaves a claim and an unsettled start; the message
    is in the inbox. `cron show`/`cron list` count it already (one rule with the pass), and the
    next pass expires the job instead of running it again."""
    folder = project.session()
    assert project.run("cron", "add", "once", "--every", "1h", "--payload", "heartbeat-event", "--text", "once",
                       "--max-runs", "1").code == 0
    _make_due(project, {"once"}, now_ms() - 1000)
    assert project.process("cron", "tick", "--fault-inject", "after-dispatch").code == 99
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
    assert project.process("cron", "tick", "--fault-inject", "after-start").code == 99
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
    from sxctl.cron import runner

    folder = project.session()
    assert project.run("cron", "add", "a", "--every", "1h", "--payload", "heartbeat-event", "--text", "a",
                       "--max-runs", "2").code == 0
    _make_due(project, {"a"}, now_ms() - 1000)
    assert project.process("cron", "tick", "--fault-inject", "after-terminal").code == 99
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

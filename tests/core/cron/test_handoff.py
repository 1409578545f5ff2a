"""`cron handoff` to a comis daemon, which runs every job by comis's store alone: each job that
sxctl's policy file holds back is listed with what comis will do instead, and the hand-off is
refused without `--accept-policy-loss`, or pauses those jobs in the store (`--pause-affected`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.core.cron.test_scheduling import MIN, NINE

from . import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

HEARTBEAT = ("--payload", "heartbeat-event", "--text", "x")


@pytest.fixture
def held(sched):
    """Jobs sxctl holds back — in a maintenance window, pinned to another host, under a spend
    guard, short of --max-runs — a plain one, a paused one with a pin, and a ledger with a run."""
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "plain", "--every", "1h", "--anchor", "2026-12-01T09:00Z", *HEARTBEAT)
    sched.add(NINE - MIN, "window", "--every", "1h", *HEARTBEAT)
    assert sched.run(NINE, "cron", "pause", "window", "--until", "2026-12-01T14:00Z", "--reason", "migration").code == 0
    sched.add(NINE - MIN, "pinned", "--every", "1h", "--host", "build-1", *HEARTBEAT)
    sched.add(NINE - MIN, "guarded", "--every", "1h", "--max-tokens-per-day", "50000", *HEARTBEAT)
    sched.add(NINE - MIN, "limited", "--every", "1h", "--max-runs", "10", *HEARTBEAT)
    sched.add(NINE - MIN, "stopped", "--every", "1h", "--host", "build-1", *HEARTBEAT)
    assert sched.run(NINE, "cron", "pause", "stopped").code == 0
    assert [run["name"] for run in sched.tick(NINE)["runs"]] == ["plain"]
    return sched


def files(sched) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (sched.root / ".scheduler").iterdir() if p.is_file()}


def states(sched) -> dict[str, str]:
    store = json.loads((sched.root / ".scheduler" / "cron-jobs.json").read_text())
    return {job["name"]: job["lifecycle"]["status"] for job in store["jobs"]}


def test_a_hand_off_names_each_job_comis_would_run_differently_and_changes_nothing(held):
    before = files(held)
    refused = held.run(NINE + MIN, "cron", "handoff", "--json")
    assert refused.code == 4, refused.out
    doc = refused.json()
    assert doc["error"]["code"] == "policy_loss" and doc["error"]["file"].endswith("sxctl-policy.json")
    assert {row["name"]: [s["setting"] for s in row["settings"]] for row in doc["policy_loss"]} == {
        "window": ["its maintenance window until 2026-12-01 14:00 UTC (migration)"],
        "pinned": ["--host build-1"],
        "guarded": ["--max-tokens-per-day 50,000"],
        "limited": ["--max-runs 10"],
    }  # not `plain` (nothing held), nor `stopped` (paused in the store: comis does not run it either)
    assert [s["comis"] for row in doc["policy_loss"] for s in row["settings"]] == [
        "runs its occurrences inside the window", "runs it on the daemon's host, whichever host that is",
        "runs it whatever the agent's usage", "keeps running it after those 10 run(s)"]
    human = held.run(NINE + MIN, "cron", "handoff")
    assert human.code == 4 and human.err.count("\n") == 1 and human.out == ""
    assert "pinned: --host build-1 (comis runs it on the daemon's host, whichever host that is)" in human.err
    assert human.err.rstrip().endswith("nothing was changed: hand off with --accept-policy-loss to let comis run "
                                       "them so, or --pause-affected to pause them in the store first")
    assert files(held) == before  # the ledger is where it was; store and policy untouched


def test_accepting_the_loss_hands_off_and_says_what_comis_will_do(held):
    done = held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss", "--json")
    assert done.code == 0, done.err
    doc = done.json()
    assert doc["moved_to"] and [row["name"] for row in doc["policy_loss"]] == ["window", "pinned", "guarded", "limited"]
    assert doc["paused"] == [] and "cron-executions.jsonl" not in files(held)
    assert "warning: comis runs job pinned differently: --host build-1 (comis runs it on the daemon's host" in done.err
    assert set(states(held).values()) == {"scheduled", "paused"} and states(held)["pinned"] == "scheduled"


def test_pause_affected_pauses_those_jobs_in_the_store_and_says_so(held):
    done = held.run(NINE + MIN, "cron", "handoff", "--pause-affected")
    assert done.code == 0, done.err
    assert done.out.splitlines()[0] == ("paused in the store, which comis's daemon does not run: window, pinned, "
                                        "guarded, limited (resume each with comis's cron tool once its sxctl settings "
                                        "no longer matter)")
    assert done.out.splitlines()[1].startswith("moved ")
    assert states(held) == {"plain": "scheduled", "window": "paused", "pinned": "paused", "guarded": "paused",
                            "limited": "paused", "stopped": "paused"}  # comis's own pause (checked strictly)
    assert held.run(NINE + MIN, "cron", "handoff", "--json").json()["policy_loss"] == []  # nothing left to lose


@pytest.mark.parametrize("flags, setting, comis", [
    (["--active-hours", "08:00-18:00"], "active hours 08:00-18:00 UTC", "runs it outside them too"),
    (["--max-runs-per-day", "3"], "--max-runs-per-day 3", "runs every occurrence, however many a day"),
    (["--until", "2027-01-01T00:00Z"], "--until 2027-01-01 00:00 UTC", "keeps running it after then"),
    (["--max-unconsumed", "2"], "--max-unconsumed 2", "never pauses it for unread messages"),
    (["--overlap", "replace"], "--overlap replace", "runs it while its previous message is unread, and retracts none"),
    (["--catch-up", "skip", "--stale-after", "30m"], "--catch-up skip --stale-after 30m",
     "runs a late occurrence as a catch-up instead of skipping it"),
    (["--jitter", "10m"], "--jitter 10m", "runs it at each due time, without the delay"),
    (["--ping-url", "https://hc-ping.com/SECRET-UUID"], "--ping-url https://hc-ping.com/…",
     "sends no ping: the monitor will say the job stopped"),
    (["--rate-limit-ceiling", "0.8"], "--rate-limit-ceiling 0.8", "runs it whatever the agent's usage"),
])
def test_every_setting_comis_ignores_is_named(sched, flags, setting, comis):
    sched.add(NINE - MIN, "job", "--every", "1h", *HEARTBEAT, *flags)
    refused = sched.run(NINE, "cron", "handoff", "--json")
    assert refused.code == 4 and refused.json()["policy_loss"][0]["settings"] == [{"setting": setting, "comis": comis}]
    assert "SECRET-UUID" not in refused.out


def test_the_workspaces_settings_are_named_for_the_jobs_they_hold(sched):
    for name in ("a", "b"):
        sched.add(NINE - MIN, name, "--every", "1h", *HEARTBEAT)
    assert sched.run(NINE, "cron", "budget", "set", "--max-session-tokens", "900000").code == 0
    assert sched.run(NINE, "cron", "defaults", "--max-catchup", "5").code == 0
    refused = sched.run(NINE, "cron", "handoff")
    assert refused.code == 4 and "3 job(s)" not in refused.err and ("all 2: --max-session-tokens 900,000 (the "
                                                                    "workspace's cron budget) (comis runs it") in refused.err
    done = sched.run(NINE, "cron", "handoff", "--accept-policy-loss")
    assert done.code == 0 and "warning: comis does not use the catch-up budget (cron defaults --max-catchup 5)" \
        in done.err


def test_pause_affected_is_refused_while_a_comis_daemon_owns_the_workspace(held):
    daemon = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(120)",
                               "comis-daemon"], stdout=subprocess.PIPE)
    daemon.stdout.readline()  # running: its command line names comis
    try:
        (held.root / ".daemon.lock").write_text(str(daemon.pid))
        before = files(held)
        env = held.env(COMIS_HOME=str(held.root))  # the daemon's home is the workspace
        refused = held.run(NINE + MIN, "cron", "handoff", "--pause-affected", env=env)
        assert refused.code == 4 and "a comis daemon" in refused.err and "owns this workspace" in refused.err
        assert files(held) == before
        both = held.run(NINE + MIN, "cron", "handoff", "--pause-affected", "--accept-policy-loss", env=env)
        assert both.code == 2 and "cannot be combined" in both.err
    finally:
        daemon.kill()
        daemon.wait()


def test_a_hand_off_is_refused_while_this_workspaces_pass_is_installed(held, tmp_path):
    """`cron handoff` said it worked while the crontab still ran sxctl's pass here, whose next
    tick wrote a ledger the daemon rejects: it is refused (naming the fix) until the entry goes,
    from the user's crontab or the file `--crontab-file` names."""
    assert held.run(NINE, "cron", "export", "--target", "crontab", "--install").code == 0
    table = tmp_path / "crontab.txt"
    assert held.run(NINE, "cron", "export", "--target", "crontab", "--install", "--crontab-file", str(table)).code == 0
    before = files(held)
    for extra in ([], ["--crontab-file", str(table)]):
        refused = held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss", *extra, "--json")
        assert refused.code == 4 and refused.json()["error"]["code"] == "pass_installed", refused.out
        assert f"sxctl cron export --target crontab --uninstall{' --crontab-file ' if extra else '`'}" in \
            refused.json()["error"]["message"]
        assert files(held) == before  # nothing changed
    assert held.run(NINE, "cron", "export", "--target", "crontab", "--uninstall").code == 0
    assert held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss", "--crontab-file", str(table)).code == 4
    assert held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss").code == 0  # the user's crontab: gone


def test_after_a_hand_off_sxctls_passes_write_no_ledger_until_the_mark_is_removed(held):
    held.agent_at(NINE + 60 * MIN)  # a live agent: a pass would run `plain`
    assert held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss").code == 0
    mark = held.root / ".scheduler" / "sxctl-handed-off.json"
    for argv in (["cron", "tick"], ["cron", "run", "plain"], ["cron", "run", "--mode", "due"]):
        refused = held.run(NINE + 60 * MIN, *argv, "--json")
        assert refused.code == 4 and refused.json()["error"]["code"] == "daemon_owns_workspace", refused.out
        assert refused.json()["error"]["file"] == str(mark) and "remove" in refused.json()["error"]["message"]
        assert "cron-executions.jsonl" not in files(held)  # no ledger the daemon would reject
    assert held.run(NINE + 60 * MIN, "cron", "tick", "--dry-run").code == 0  # writes nothing: allowed
    mark.unlink()  # the undo (after stopping the daemon): sxctl's passes run here again
    held.agent_at(NINE + 60 * MIN)
    assert held.run(NINE + 60 * MIN, "cron", "tick").code == 0 and "cron-executions.jsonl" in files(held)


def test_a_pass_that_waited_for_the_store_lock_a_hand_off_held_writes_no_ledger(held, monkeypatch):
    """The mark was looked for before the pass took the store lock: a `cron run` waiting on the
    lock a hand-off held ran after it and left a ledger the daemon rejects. It is looked for under
    the lock. (Here the hand-off finishes while the pass waits: its mark appears, its ledger is aside.)"""
    from sxctl.cron.run import tick

    held.agent_at(NINE + 60 * MIN)
    real_lock = tick.store_lock

    def lock_after_a_hand_off(ws, boot_id, wait_s):
        lock = real_lock(ws, boot_id, wait_s)
        acquire = lock.acquire

        def waited() -> None:
            ws.handed_off.write_text('{"handed_off_ms": 1}')
            if ws.ledger.exists():
                ws.ledger.rename(ws.ledger.with_name("cron-executions.jsonl.sxctl-aside"))
            acquire()

        lock.acquire = waited
        return lock

    monkeypatch.setattr(tick, "store_lock", lock_after_a_hand_off)
    refused = held.run(NINE + 60 * MIN, "cron", "run", "plain", "--json")
    assert refused.code == 4 and refused.json()["error"]["code"] == "daemon_owns_workspace", refused.out
    assert "cron-executions.jsonl" not in files(held)


def test_a_hand_off_that_cannot_read_the_crontab_says_it_did_not_check_it(held, tmp_path):
    """A crontab file that is a FIFO (or a `crontab -l` past its cap) was passed over in
    silence: the entry stayed installed and every pass after refused. It is said."""
    fifo = tmp_path / "crontab"
    os.mkfifo(fifo)
    done = held.run(NINE + MIN, "cron", "handoff", "--accept-policy-loss", "--crontab-file", str(fifo))
    assert done.code == 0, done.err
    assert "the crontab could not be read" in done.err and "was not checked" in done.err, done.err
    assert f"--uninstall --crontab-file {fifo}" in done.err

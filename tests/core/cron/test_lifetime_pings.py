"""Jobs' message lifetimes (`cron add --expires --read-within --ping-on read`): a local HTTP server
gets a job's success ping only once a pass sees the agent read its message, `/fail` with the
reason when the read deadline passes, none twice; every pass withdraws expired messages (a job's
and a plain send's) and `cron runs` says `expired`; the settings round-trip through jobs as code;
and the "continue when the usage limit resets" recipe delivers once."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from tests.conftest import now_ms
from tests.core.cron.test_pings import SECRET
from tests.core.cron.test_scheduling import MIN

from . import test_pings, test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked
endpoint = test_pings.endpoint  # a local HTTP server that records the pings it gets


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def add_turn(sched, b: int, name: str, *flags: str, every: str = "1h", first: int | None = None) -> None:
    """An agent-turn job `name` (its text is its name), every `every` from `first` (default `b`), added
    a minute before `b`."""
    sched.add(b - MIN, name, "--every", every, "--anchor", iso(b if first is None else first), "--payload",
              "agent-turn", "--text", name, *flags)


def read_all(sched) -> list[str]:
    """The agent reads every pending message (it claims each by moving it into done/)."""
    inbox = sched.folder / "inbox"
    (inbox / "done").mkdir(exist_ok=True)
    names = sorted(p.name for p in inbox.glob("*.json"))
    for name in names:
        os.rename(inbox / name, inbox / "done" / name)
    return [name[:-5] for name in names]


def paths(endpoint) -> list[str]:
    return [path for path, _ in endpoint.received]


def test_ping_on_read_says_success_only_after_the_read_and_fail_when_the_deadline_passes(sched, endpoint):
    b = now_ms() // MIN * MIN + MIN
    url = f"{endpoint.url}/{SECRET}"
    sched.agent_at(b)
    for name in ("read", "unread"):
        add_turn(sched, b, name,
                 "--ping-url", f"{url}-{name}", "--ping-on", "read", "--read-within", "10m", "--expires", "30m")
    shown = sched.run(b, "cron", "show", "read").out
    assert "when read" in shown and "unread for 30m is withdrawn" in shown and "read within 10m" in shown, shown[:600]
    policy = sched.run(b, "cron", "list", "--json").json()["jobs"][0]["policy"]
    assert (policy["pingOn"], policy["expiresMs"], policy["readWithinMs"]) == ("read", 30 * MIN, 10 * MIN)
    runs = {run["name"]: run["executionId"] for run in sched.tick(b)["runs"]}
    assert sorted(paths(endpoint)) == [f"/{SECRET}-read/start", f"/{SECRET}-unread/start"]  # written is not read
    pending = sorted((sched.folder / "inbox").glob("*.json"))
    texts = {json.loads(p.read_text())["text"]: p.name for p in pending}
    os.makedirs(sched.folder / "inbox" / "done")
    os.rename(pending[0].parent / texts["read"], sched.folder / "inbox" / "done" / texts["read"])
    sched.tick(b + MIN)
    assert paths(endpoint)[2:] == [f"/{SECRET}-read"]
    assert endpoint.received[2][1] == f"run {runs['read']}: read: read"
    sched.tick(b + 2 * MIN)
    assert len(endpoint.received) == 3  # told once
    report = sched.tick(b + 11 * MIN)
    assert paths(endpoint)[3:] == [f"/{SECRET}-unread/fail"]
    assert endpoint.received[3][1].startswith(f"run {runs['unread']}: unread: not read within its deadline")
    assert [(row["event"], row["stem"]) for row in report["lifetimes"]] == [("missed", texts["unread"][:-5])]
    report = sched.tick(b + 31 * MIN)
    assert [row["event"] for row in report["lifetimes"]] == ["expired", "pinged"]
    assert len(endpoint.received) == 4  # the deadline's fail was the one fail
    runs_doc = sched.run(b + 31 * MIN, "cron", "runs", "unread", "--json").json()
    [row] = runs_doc["runs"]
    assert row["consumption"]["state"] == "expired" and row["consumption"]["readByMs"] == b + 10 * MIN
    human = sched.run(b + 31 * MIN, "cron", "runs", "unread").out
    assert "expired" in human


@pytest.mark.real_time  # a read's time is the file system's (its ctime): the machine's own clock
def test_a_message_read_after_its_deadline_gets_its_success_late(sched, endpoint):
    b = now_ms() // MIN * MIN - 20 * MIN  # its read (now) comes after its deadline
    sched.agent_at(b)
    add_turn(sched, b, "late", "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read", "--read-within", "1m")
    sched.tick(b)
    sched.tick(b + 2 * MIN)
    read_all(sched)
    sched.tick(b + 3 * MIN)
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}/fail", f"/{SECRET}"]
    assert "after its deadline" in endpoint.received[2][1]
    [row] = sched.run(b + 3 * MIN, "cron", "runs", "late", "--json").json()["runs"]
    assert row["consumption"]["state"] == "read" and row["consumption"]["late"] is True


def test_ping_on_written_keeps_todays_meaning(sched, endpoint):
    b = now_ms() // MIN * MIN
    sched.agent_at(b)
    add_turn(sched, b, "job", "--ping-url", f"{endpoint.url}/{SECRET}", "--expires", "1h")
    sched.tick(b)
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}"]


def test_ping_on_read_without_a_url_and_a_deadline_past_the_expiry_are_refused(sched):
    b = now_ms()
    for args, said in [(["--ping-on", "read"], "--ping-on read needs --ping-url URL"),
                       (["--expires", "10m", "--read-within", "1h"], "--read-within must be shorter than --expires")]:
        result = sched.run(b, "cron", "add", "j", "--every", "1h", "--payload", "agent-turn", "--text", "x", *args)
        assert result.code == 2 and said in result.err, result.err
    assert not (sched.root / ".scheduler" / "cron-jobs.json").exists() or "j" not in (
        sched.root / ".scheduler" / "cron-jobs.json").read_text()


def test_every_pass_withdraws_an_expired_plain_message(sched):
    b = now_ms()
    sched.agent_at(b - 10 * MIN)  # the agent went away
    sent = sched.run(b - 10 * MIN, "inbox", "send", "--no-wait", "--json", "--expires", "5m", "stale news")
    stem = sent.json()["stem"]
    sched.add(b - MIN, "noop", "--every", "1d", "--payload", "agent-turn", "--text", "x")  # a workspace with a pass
    report = sched.tick(b)
    assert [(row["event"], row["stem"]) for row in report["lifetimes"]] == [("expired", stem)]
    human = sched.run(b + 1, "cron", "tick").out
    assert "withdrawn" not in human  # once
    assert (sched.folder / "inbox" / "retracted" / f"{stem}.json").exists()


def test_the_lifetime_settings_round_trip_through_jobs_as_code(sched, endpoint, monkeypatch):
    b = now_ms()
    (sched.root / "sxctl.toml").write_text(
        '[jobs.standup]\nevery = "1d"\ntext = "standup"\nexpires = "2h"\nread-within = "30m"\n'
        'ping-on = "read"\nping-url-env = "PING"\n')
    env = sched.env(PING=f"{endpoint.url}/{SECRET}")
    applied = sched.run(b, "cron", "apply", env=env)
    assert applied.code == 0, applied.err
    policy = json.loads(sched.policy_file.read_text())
    [entry] = policy["jobs"].values()
    assert (entry["expiresMs"], entry["readWithinMs"], entry["pingOn"]) == (7_200_000, 1_800_000, "read")
    assert sched.run(b, "cron", "plan", "--detailed-exitcode", env=env).code == 0  # converged
    dumped = sched.run(b, "cron", "dump").out
    assert 'expires = "2h"' in dumped and 'read-within = "30m"' in dumped and 'ping-on = "read"' in dumped
    shown = sched.run(b, "cron", "update", "standup", "--ping-on", "written")
    assert shown.code == 0
    assert sched.run(b, "cron", "plan", "--detailed-exitcode", env=env).code == 11  # the drift is seen


def test_continue_when_the_usage_limit_resets_delivers_once(sched):
    """The recipe (docs/guides/message-lifetimes.md): a one-shot guarded by --rate-limit-ceiling
    waits while the agent's 5-hour usage is above it, then delivers once."""
    b = now_ms() // MIN * MIN

    def agent(ms: int, used: float) -> None:
        sched.folder.mkdir(parents=True, exist_ok=True)
        (sched.folder / "stats.json").write_text(json.dumps({"updated_ms": ms, "model": "m",
                                                             "usage": {"rl_5h": used, "rl_7d": 0.2}}))

    agent(b, 0.97)
    added = sched.run(b, "inbox", "send", "--when-below", "90%", "continue where you stopped", "--json")
    assert added.code == 0, added.err
    doc = added.json()
    assert doc["held"] is True and doc["job"]
    for minute in (1, 30, 120):
        agent(b + minute * MIN, 0.95)
        assert sched.tick(b + minute * MIN)["runs"] == []
    assert not list((sched.folder / "inbox").glob("*.json"))
    agent(b + 200 * MIN, 0.05)  # the window reset
    [run] = sched.tick(b + 200 * MIN)["runs"]
    assert run["status"] == "dispatched"
    assert [json.loads(p.read_text())["text"] for p in (sched.folder / "inbox").glob("*.json")] == [
        "continue where you stopped"]
    agent(b + 201 * MIN, 0.05)
    assert sched.tick(b + 201 * MIN)["runs"] == []  # once
    now = sched.run(b, "inbox", "send", "--when-below", "90%", "right away", "--json", "--no-wait")
    assert now.json()["held"] is False and now.json()["state"] == "pending"  # below already: sent now


def test_prune_keeps_a_read_message_until_its_pass_told_the_monitor(sched, endpoint):
    b = now_ms() // MIN * MIN
    sched.agent_at(b)
    add_turn(sched, b, "job", "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read")
    sched.tick(b)
    [stem] = read_all(sched)
    pruned = sched.run(b + 2 * MIN, "inbox", "prune", "--older-than", "0", "--json")
    assert pruned.code == 0 and pruned.json()["removed"] == []  # its monitor has not heard yet
    sched.tick(b + MIN)
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}"]
    pruned = sched.run(b + 2 * MIN, "inbox", "prune", "--older-than", "0", "--json").json()
    assert any(path.endswith(f"done/{stem}.json") for path in pruned["removed"])


def test_a_forged_record_gets_no_ping_for_a_run_the_ledger_never_started(sched, endpoint):
    b = now_ms() // MIN * MIN
    sched.agent_at(b)
    add_turn(sched, b, "job",
             "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read", every="1d", first=b + 60 * MIN)
    job_id = sched.job("job")["job"]["id"]
    stem = sched.run(b, "inbox", "send", "--no-wait", "--json", "hand sent").json()["stem"]
    lifetimes = sched.folder / "inbox" / ".lifetimes"
    lifetimes.mkdir()
    (lifetimes / f"{stem}.json").write_text(json.dumps({
        "stem": stem, "sent_ms": b, "expires_ms": None, "read_by_ms": None,
        "run": {"jobId": job_id, "executionId": "never-ran", "pingOn": "read"}}))
    read_all(sched)
    sched.tick(b + MIN)
    assert endpoint.received == []


def test_a_run_trimmed_from_the_ledger_still_gets_its_read_ping(sched, endpoint):
    b = now_ms() // MIN * MIN - 10 * MIN
    sched.agent_at(b)
    add_turn(sched, b, "a",
             "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read", "--read-within", "1h", every="1d")
    sched.add(b - MIN, "b", "--every", "1m", "--anchor", iso(b), "--payload", "heartbeat-event", "--text", "b")
    for minute in range(4):
        sched.agent_at(b + minute * MIN)
        sched.tick(b + minute * MIN, "--retain-executions", "1")
    inbox = sched.folder / "inbox"
    (inbox / "done").mkdir(exist_ok=True)
    texts = {json.loads(p.read_text())["text"]: p.name for p in inbox.glob("*.json")}
    os.rename(inbox / texts["a"], inbox / "done" / texts["a"])
    sched.agent_at(b + 5 * MIN)
    sched.tick(b + 5 * MIN, "--retain-executions", "1")
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}"]


def test_a_run_sent_before_its_job_changed_keeps_its_lifetime_and_its_target_is_swept(sched, endpoint, tmp_path):
    other = tmp_path / "other"
    (other / ".scorpiox" / "sessions" / "2026_09_21_other_one").mkdir(parents=True)
    b = now_ms() // MIN * MIN
    (other / ".scorpiox" / "sessions" / "2026_09_21_other_one" / "stats.json").write_text(
        json.dumps({"updated_ms": b, "model": "m"}))
    sched.agent_at(b)
    add_turn(sched, b, "tp",
             "--to-project", str(other), "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read",
             "--read-within", "1h", every="1d")
    sched.tick(b)
    assert sched.run(b, "cron", "update", "tp", "--ping-on", "written", "--read-within", "0").code == 0
    inbox = other / ".scorpiox" / "sessions" / "2026_09_21_other_one" / "inbox"
    (inbox / "done").mkdir()
    [message] = inbox.glob("*.json")
    os.rename(message, inbox / "done" / message.name)
    sched.tick(b + MIN)
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}"]  # the run was sent to ping on read


def test_an_expired_message_is_withdrawn_before_the_pass_decides_on_overlap(sched):
    b = now_ms() // MIN * MIN
    sched.agent_at(b)
    add_turn(sched, b, "o", "--expires", "5m", "--overlap", "skip", every="10m")
    assert [r["status"] for r in sched.tick(b)["runs"]] == ["dispatched"]
    sched.agent_at(b + 10 * MIN)
    report = sched.tick(b + 10 * MIN)
    assert [row["event"] for row in report["lifetimes"]] == ["expired"]
    assert [r["status"] for r in report["runs"]] == ["dispatched"]  # the expired one is not unread: no skip


def test_a_record_copied_onto_another_message_gets_no_ping_and_the_run_gets_one(sched, endpoint):
    b = now_ms() // MIN * MIN
    sched.agent_at(b)
    add_turn(sched, b, "j",
             "--ping-url", f"{endpoint.url}/{SECRET}", "--ping-on", "read", "--read-within", "1h", every="1d")
    sched.tick(b)
    inbox = sched.folder / "inbox"
    [run_message] = inbox.glob("*.json")
    other = sched.run(b, "inbox", "send", "--no-wait", "--json", "other").json()["stem"]
    body = json.loads((inbox / ".lifetimes" / run_message.name).read_text())
    (inbox / ".lifetimes" / f"{other}.json").write_text(json.dumps({**body, "stem": other}))
    (inbox / "done").mkdir()
    os.rename(inbox / f"{other}.json", inbox / "done" / f"{other}.json")
    sched.tick(b + MIN)
    assert paths(endpoint) == [f"/{SECRET}/start"]  # the copy is not the run's message
    os.rename(run_message, inbox / "done" / run_message.name)
    sched.tick(b + 2 * MIN)
    sched.tick(b + 3 * MIN)
    assert paths(endpoint) == [f"/{SECRET}/start", f"/{SECRET}"]  # one success, for the run's own message

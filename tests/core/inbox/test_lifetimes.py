"""Message lifetimes (`--expires`, `--read-within`, docs/guides/message-lifetimes.md): the record
beside the message and never in it, withdrawal by `inbox expire`, a pass and a wait, a racing
reader that wins or loses but never both, `inbox forward` and restarts, crashes at each write,
lying records, and the one story `status`, `doctor` and `metrics` tell of a missed deadline."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from tests.conftest import EXAMPLES, RACER, forks, now_ms, tree

SEC = 1000


def inbox(folder: Path) -> Path:
    return folder / "inbox"


def send(project, at: int, *args: str) -> dict:
    result = project.run("inbox", "send", "--no-wait", "--json", *args, clock=FakeClock(at))
    assert result.code == 0, result.err
    return result.json()


def states(project, at: int, *args: str) -> dict[str, str]:
    rows = project.run("inbox", "list", "--all", "--json", *args, clock=FakeClock(at)).json()["messages"]
    return {row["stem"]: row["state"] for row in rows}


def record(folder: Path, stem: str, settled: bool = False) -> dict:
    path = inbox(folder) / ".lifetimes" / ("settled" if settled else "") / f"{stem}.json"
    return json.loads(path.read_text())


def test_the_lifetime_is_kept_beside_the_message_never_in_it(project):
    folder = project.session()
    t = now_ms()
    doc = send(project, t, "--stem", "1789972202_061734902", "--mode", "queue", "--expires", "2h",
               "--read-within", "15m", "Review the current project risks.")
    assert (doc["expires_ms"], doc["read_by_ms"]) == (t + 7200 * SEC, t + 900 * SEC)
    message = inbox(folder) / "1789972202_061734902.json"
    assert message.read_bytes() == (EXAMPLES / "inbox" / "1789972202_061734902.json").read_bytes()  # no new key
    assert record(folder, "1789972202_061734902") == {
        "stem": "1789972202_061734902", "sent_ms": t, "expires_ms": t + 7200 * SEC, "read_by_ms": t + 900 * SEC}
    assert os.stat(inbox(folder) / ".lifetimes").st_mode & 0o777 == 0o700
    row = project.run("inbox", "list", "--json", clock=FakeClock(t)).json()["messages"][0]
    assert (row["state"], row["expires_ms"], row["read_by_ms"]) == ("pending", t + 7200 * SEC, t + 900 * SEC)
    human = project.run("inbox", "list", clock=FakeClock(t + 1000 * SEC)).out
    assert "pending, read by" in human and "(overdue 1m40s)" in human and "expires in 1h43m" in human
    plain = send(project, t, "no lifetime")
    assert "expires_ms" not in plain and not (inbox(folder) / ".lifetimes" / f"{plain['stem']}.json").exists()


@pytest.mark.parametrize("args, error", [
    (["--expires", "0"], "--expires 0 is not in the future"),
    (["--expires", "2020-01-01T00:00Z"], "is not in the future"),
    (["--expires", "soon"], "invalid --expires 'soon': use a number of seconds or units like"),
    (["--expires", "2026-13-01T09:00"], "invalid --expires '2026-13-01T09:00': give a DURATION"),
    (["--read-within", "0"], "--read-within must be longer than 0"),
    (["--expires", "10m", "--read-within", "1h"], "--read-within ends after --expires"),
    (["--expires", "104249991d"], "is too far ahead (at most 3650 days)"),
    (["--read-within", "4000d"], "--read-within is too long"),
    (["--expires", "-1"], "invalid --expires '-1': use a number of seconds"),
    (["--expires", "3w"], "invalid --expires '3w': use a number of seconds"),
])
def test_a_lifetime_that_cannot_be_kept_is_refused_and_nothing_is_written(project, args, error):
    folder = project.session()
    before = tree(folder)
    result = project.run("inbox", "send", "--no-wait", "hello", *args)
    assert result.code == 2 and error in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert tree(folder) == before


def test_expire_withdraws_what_is_unread_and_says_expired_everywhere(project):
    folder = project.session(live=False)
    t = now_ms()
    stale = send(project, t, "--expires", "30m", "stale")["stem"]
    fresh = send(project, t, "--expires", "3h", "fresh")["stem"]
    read = send(project, t, "--expires", "30m", "read in time")["stem"]
    (inbox(folder) / "done").mkdir()
    os.rename(inbox(folder) / f"{read}.json", inbox(folder) / "done" / f"{read}.json")
    before = tree(folder)
    dry = project.run("inbox", "expire", "--dry-run", "--json", clock=FakeClock(t + 3600 * SEC))
    assert dry.code == 0 and [e["stem"] for e in dry.json()["expired"]] == [stale]
    assert tree(folder) == before  # a dry run changes nothing
    done = project.run("inbox", "expire", "--json", clock=FakeClock(t + 3600 * SEC))
    assert done.code == 0, done.err
    assert [e["stem"] for e in done.json()["expired"]] == [stale]
    assert [e["stem"] for e in done.json()["settled"]] == [read]
    assert states(project, t + 3600 * SEC) == {fresh: "pending", read: "consumed", stale: "expired"}
    assert (inbox(folder) / "retracted" / f"{stale}.json").read_bytes() == before[f"inbox/{stale}.json"]
    assert record(folder, stale, settled=True)["outcome"] == "expired"
    assert record(folder, read, settled=True)["outcome"] == "read"
    assert sorted(p.name for p in (inbox(folder) / ".lifetimes").glob("*.json")) == [f"{fresh}.json"]
    shown = project.run("inbox", "show", stale, "--json").json()
    assert shown["state"] == "expired" and shown["path"].endswith(f"retracted/{stale}.json")
    again = project.run("inbox", "expire", "--json", clock=FakeClock(t + 3600 * SEC)).json()
    assert again["expired"] == [] and again["settled"] == []
    said = project.run("inbox", "expire", clock=FakeClock(t + 4 * 3600 * SEC))
    assert said.out.splitlines() == [f"withdrew {fresh} in {folder.name}: expired unread"]


def test_a_wait_ends_at_the_expiry_with_its_own_exit_status(project):
    folder = project.session()
    t = now_ms()
    stem = send(project, t, "--expires", "5s", "deploy when green")["stem"]
    result = project.run("inbox", "wait", stem, "--timeout", "60", "--json", clock=FakeClock(t))
    assert result.code == 12, result.err
    doc = json.loads(result.out)
    assert doc["error"]["code"] == "expired" and doc["state"] == "expired"
    assert (inbox(folder) / "retracted" / f"{stem}.json").exists()
    assert project.run("inbox", "wait", stem, clock=FakeClock(t)).code == 12  # and so it stays
    sent = project.run("inbox", "send", "--expires", "1s", "--wait", "30", "x", clock=FakeClock(t))
    assert sent.code == 12 and "expired unread and was withdrawn" in sent.err


RACING_READER = RACER + r"""
import json, os, sys, time
inbox, log = sys.argv[2], sys.argv[3]
retracted = os.path.join(inbox, "retracted")
claimed = []
while True:  # the reference agent's claim: a rename into done/ before it reads
    names = sorted(n for n in os.listdir(inbox) if n.endswith(".json"))
    if not names:
        break
    try:
        os.rename(os.path.join(inbox, names[0]), os.path.join(inbox, "done", names[0]))
    except FileNotFoundError:
        continue  # withdrawn first
    claimed.append(names[0][:-5])
    if len(claimed) == 1:  # on a loaded machine the expirer may start late: it races once it withdrew one
        deadline = time.monotonic() + 60
        while not (os.path.isdir(retracted) and os.listdir(retracted)) and time.monotonic() < deadline:
            time.sleep(0.001)
    time.sleep(0.0005)
open(log, "w").write(json.dumps(claimed))
"""


def test_a_racing_reader_and_expire_never_both_have_a_message_and_none_is_lost(project, tmp_path):
    folder = project.session()
    t = now_ms() - 60 * SEC  # sent a minute ago, expired since
    stems = [send(project, t + n, "--expires", "1s", f"note {n}")["stem"] for n in range(150)]
    (inbox(folder) / "done").mkdir()
    gun, log = tmp_path / "gun", tmp_path / "claimed.json"
    reader = forks().start([str(gun), str(inbox(folder)), str(log)], cwd=project.root, env=project.env(),
                           python=RACING_READER)
    expirer = forks().start([str(gun), "inbox", "expire", "--json"], cwd=project.root, env=project.env(),
                            python=RACER + "from sxctl.cli import main\nmain(sys.argv[2:])\n")
    while len(list(tmp_path.glob("gun.ready-*"))) < 2:
        pass
    gun.touch()
    assert reader.wait().code == 0
    result = expirer.wait()
    assert result.code == 0, result.err
    claimed = set(json.loads(log.read_text()))
    expired = {e["stem"] for e in json.loads(result.out)["expired"]}
    assert claimed and expired, "the race did not happen: one side took every message"  # both sides won some
    assert claimed.isdisjoint(expired) and claimed | expired == set(stems)  # never both, none lost
    final = states(project, now_ms())
    assert {s for s, v in final.items() if v == "consumed"} == claimed
    assert {s for s, v in final.items() if v == "expired"} == expired
    for stem in claimed:  # a message the reader took counts as read, whatever the expiry record says
        assert not (inbox(folder) / "retracted" / f"{stem}.json").exists()
    settle = project.run("inbox", "expire", "--json").json()
    assert {e["stem"] for e in settle["settled"]} <= claimed and settle["expired"] == []


def test_forward_carries_the_lifetime_and_the_target_session_withdraws_it(project):
    old = project.session("2026_09_21_quiet_euler", live=False)
    t = now_ms()
    stem = send(project, t, "--session", old.name, "--expires", "10m", "--read-within", "5m", "sent while down")["stem"]
    new = project.session("2026_09_21_brave_curie", live=True)
    moved = project.run("inbox", "forward", "--json", clock=FakeClock(t))
    assert moved.code == 0, moved.err
    [row] = moved.json()["forwarded"]
    to = row["to_stem"]
    assert not (inbox(old) / ".lifetimes" / f"{stem}.json").exists()
    carried = record(new, to)
    assert carried["expires_ms"] == t + 600 * SEC and carried["moved_from"] == {"session": old.name, "stem": stem}
    listing = project.run("inbox", "list", "--json", "--session", new.name, clock=FakeClock(t)).json()
    assert listing["messages"][0]["read_by_ms"] == t + 300 * SEC
    expired = project.run("inbox", "expire", "--json", clock=FakeClock(t + 700 * SEC)).json()
    assert [(e["session"], e["stem"]) for e in expired["expired"]] == [(new.name, to)]


def test_a_forward_killed_before_its_commit_takes_its_carried_record_back(project):
    old = project.session("2026_09_21_quiet_euler", live=False)
    t = now_ms()
    stem = send(project, t, "--session", old.name, "--expires", "10m", "sent while down")["stem"]
    new = project.session("2026_09_21_brave_curie", live=True)
    killed = forks().run(["inbox", "forward"], cwd=project.root, env=project.env(), kill_at=("before-rename", 1))
    assert killed.code == -9  # the SIGKILL happened
    assert list((inbox(new) / ".lifetimes").glob("*.json"))  # the record was carried before the commit
    again = project.run("inbox", "forward", "--json")
    assert again.code == 0 and again.json()["recovered"][0]["outcome"] == "undone"
    to = again.json()["forwarded"][0]["to_stem"]
    assert [p.name for p in (inbox(new) / ".lifetimes").glob("*.json")] == [f"{to}.json"]
    assert not (inbox(old) / ".lifetimes" / f"{stem}.json").exists()


@pytest.mark.parametrize("point", ["after-lifetime", "before-rename"])
def test_a_send_killed_after_its_record_leaves_no_message_and_the_record_goes(project, point):
    folder = project.session()
    killed = forks().run(["inbox", "send", "--no-wait", "--expires", "1s", "x"], cwd=project.root,
                         env=project.env(), kill_at=(point, 1))
    assert killed.code == -9  # the SIGKILL happened
    [orphan] = (inbox(folder) / ".lifetimes").glob("*.json")
    assert not list(inbox(folder).glob("*.json"))
    held = project.run("inbox", "expire", "--json", clock=FakeClock(now_ms() + 60 * SEC)).json()
    assert held["expired"] == [] and orphan.exists()  # its temp holds the stem: a send may be at work
    project.run("inbox", "clean", "--older-than", "0")
    project.run("inbox", "expire", clock=FakeClock(now_ms() + 60 * SEC))
    assert not orphan.exists() and not list(inbox(folder).glob("**/*.json"))


def test_an_expiry_killed_between_its_record_and_its_retract_is_finished_by_the_next(project):
    folder = project.session(live=False)
    t = now_ms() - 60 * SEC
    stem = send(project, t, "--expires", "1s", "stale")["stem"]
    killed = forks().run(["inbox", "expire"], cwd=project.root, env=project.env(), kill_at=("before-withdraw", 1))
    assert killed.code == -9  # the SIGKILL happened
    assert record(folder, stem, settled=True)["outcome"] == "expired"
    assert states(project, now_ms()) == {stem: "pending"}  # the message decides, not the record
    assert project.run("inbox", "expire", "--json").json()["expired"][0]["stem"] == stem
    assert states(project, now_ms()) == {stem: "expired"}


@pytest.mark.parametrize("body", [
    b"not json", b'{"stem":"other","expires_ms":1}', b'{"stem":"S","expires_ms":"soon"}', b"[]",
    b'{"stem":"S","expires_ms":1,"outcome":"eaten"}', b"x" * 10_000,
    b'{"stem":"S","expires_ms":9999999999999,"expires_ms":1}',  # a key twice: the last must not win
])
def test_a_record_that_lies_is_never_acted_on(project, body):
    folder = project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--expires", "1s", "keep me")["stem"]
    path = inbox(folder) / ".lifetimes" / f"{stem}.json"
    path.write_bytes(body.replace(b'"S"', f'"{stem}"'.encode()))
    result = project.run("inbox", "expire", "--json")
    assert result.code == 0 and result.json()["expired"] == []
    assert states(project, now_ms()) == {stem: "pending"}
    assert project.run("inbox", "list").code == 0


def test_a_linked_lifetimes_folder_is_refused(project, tmp_path):
    folder = project.session()
    (inbox(folder)).mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", inbox(folder) / ".lifetimes")
    result = project.run("inbox", "send", "--no-wait", "--expires", "1h", "x")
    assert result.code == 5 and "symbolic link" in result.err
    assert os.listdir(tmp_path / "elsewhere") == [] and not list(inbox(folder).glob("*.json"))


def test_prune_removes_the_records_with_their_messages(project):
    folder = project.session(live=False)
    t = now_ms() - 3600 * SEC
    stem = send(project, t, "--expires", "1s", "stale")["stem"]
    project.run("inbox", "expire")
    result = project.run("inbox", "prune", "--older-than", "0", "--retracted", "--json",
                         clock=FakeClock(now_ms() + 1000))
    assert str(inbox(folder) / ".lifetimes" / "settled" / f"{stem}.json") in result.json()["removed"]
    assert not list((inbox(folder) / ".lifetimes").rglob("*.json"))


def test_status_doctor_and_metrics_tell_one_story_of_a_missed_deadline(project):
    project.session()
    t = now_ms()
    late = send(project, t - 600 * SEC, "--read-within", "5m", "look at the build")["stem"]
    send(project, t, "--read-within", "1h", "not late yet")
    status = project.run("status", "--json", clock=FakeClock(t)).json()
    lifetimes = status["inbox"]["lifetimes"]
    assert [row["stem"] for row in lifetimes["overdue"]] == [late] and lifetimes["tracked"] == 2
    [problem] = [p for p in status["problems"] if p["code"] == "messages_unread_past_deadline"]
    assert late in problem["message"]
    doctor = project.run("doctor", "--json", clock=FakeClock(t))
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "message deadlines"]
    assert check["status"] == "warn" and late in check["message"] and check["message"] in problem["message"]
    strict = project.run("doctor", "--strict", "-q", clock=FakeClock(t))
    assert strict.code == 9 and "message deadlines" in strict.err
    metrics = project.run("metrics", clock=FakeClock(t)).out
    assert "sxctl_inbox_unread_past_deadline_messages{" in metrics
    sample = next(line for line in metrics.splitlines()
                  if line.startswith("sxctl_inbox_unread_past_deadline_messages{"))
    assert sample.endswith(f" {len(lifetimes['overdue'])}")


@pytest.mark.parametrize("link", [".lifetimes", ".lifetimes/settled", ""])
def test_no_verb_deletes_or_moves_through_a_linked_lifetimes_folder(project, tmp_path, link):
    folder = project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--expires", "1s", "stale")["stem"]
    elsewhere = tmp_path / "elsewhere"
    target = inbox(folder) / link if link else inbox(folder)
    if link != ".lifetimes/settled":
        os.rename(target, elsewhere)
    else:
        elsewhere.mkdir()
    (elsewhere / "1700000000_000000000.json").write_text('{"stem":"1700000000_000000000","expires_ms":1}')
    (elsewhere / "keep.json.tmp").write_text("x")
    os.symlink(elsewhere, target)
    before = tree(elsewhere)
    for args in (["inbox", "expire"], ["inbox", "prune", "--older-than", "0", "--retracted"],
                 ["inbox", "clean", "--older-than", "0"]):
        result = project.run(*args)
        assert result.code == 5 and "symbolic link" in result.err, (args, result.err)
    assert tree(elsewhere) == before
    assert states(project, now_ms())[stem] == "pending"
    assert project.run("cron", "add", "later", "--in", "1h", "--payload", "agent-turn", "--text", "x").code == 0
    report = project.run("cron", "tick", "--json")  # a pass warns and runs on
    assert report.code == 0 and any("not swept" in w for w in report.json()["warnings"]), report.out
    assert tree(elsewhere) == before


def test_a_deadline_inbox_expire_noted_first_still_gets_the_jobs_fail_ping(project):
    """`inbox expire` notes a missed deadline it has no monitor for; the job's pass still tells
    its monitor, once (tests/core/cron/test_lifetime_pings.py has the server)."""
    from sxctl.inbox.expiry import sweep_session
    from sxctl.inbox.folder import InboxDir
    from sxctl.inbox.lifetimes import write_open
    from sxctl.project import as_session, session_info

    folder = project.session(live=False)
    stem = send(project, now_ms(), "job message")["stem"]
    box = InboxDir(inbox(folder))
    write_open(box, stem, {"stem": stem, "sent_ms": 1, "expires_ms": None, "read_by_ms": 2,
                           "run": {"jobId": "J", "executionId": "E", "pingOn": "read"}})
    session = as_session(session_info(folder), project.root, "flag")
    noted = sweep_session(session, 10)
    assert [e.event for e in noted] == ["missed"]
    pings: list[tuple[str, str]] = []
    mine = lambda run, record, where: run["executionId"] == "E"  # noqa: E731 - the pass's ledger started run E
    told = sweep_session(session, 20, owns=mine, ping=lambda run, kind, why: pings.append((run["executionId"], kind)))
    assert told == [] and pings == [("E", "fail")]
    sweep_session(session, 30, owns=mine, ping=lambda run, kind, why: pings.append((run["executionId"], kind)))
    assert pings == [("E", "fail")]  # once


@pytest.mark.parametrize("args, said", [
    (["--when-below", "150%"], "invalid --when-below '150%': a share of the rate limit"),
    (["--when-below", "0"], "invalid --when-below '0'"),
    (["--when-below", "ninety"], "invalid --when-below 'ninety'"),
    (["--when-below", "90%", "--wait", "10"], "--when-below cannot be combined with --wait"),
    (["--when-below", "90%", "--key", "k", "--mode", "queue"], "cannot be combined with --mode, --key"),
    (["--when-below", "90%", "--expires", "2026-12-31T00:00Z"], "invalid --expires"),
    (["--when-below", "90%", "--expires", "0"], "--expires 0 is not in the future"),
    (["--when-below", "90%", "--read-within", "0"], "--read-within must be longer than 0"),
])
def test_when_below_refuses_what_a_held_message_cannot_keep(project, args, said):
    folder = project.session(stats={"usage": {"rl_5h": 0.95, "rl_7d": 0.1}})
    result = project.run("inbox", "send", "go on", *args)
    errors = [line for line in result.err.splitlines() if not line.startswith("sxctl: using session")]
    assert result.code == 2 and said in result.err and len(errors) == 1, result.err
    assert not (inbox(folder)).exists() or not list(inbox(folder).glob("*.json"))
    assert not (project.root / ".scheduler" / "cron-jobs.json").exists()


@pytest.mark.real_time  # a read's time is the file system's (its ctime): the machine's own clock
def test_with_the_reference_agent_across_its_restart_each_message_is_read_or_withdrawn_never_both(project, agents):
    agent = agents(project, "--turn-seconds", "0.05")
    t = now_ms()
    kept = [send(project, t, "--expires", "1h", f"read {n}")["stem"] for n in range(2)]
    agent.wait_for(lambda e: e["event"] == "inbox" and e["stem"] in kept, count=2)
    assert agent.stop() == 0  # the agent goes away; what is sent now waits
    stale = [send(project, t - 60 * SEC + n, "--expires", "1s", f"stale {n}")["stem"] for n in range(3)]
    late = send(project, t - 60 * SEC, "--read-within", "1s", "read late")["stem"]
    status = project.run("status", "--json").json()
    assert [row["stem"] for row in status["inbox"]["lifetimes"]["overdue"]] == [late]
    assert {row["stem"] for row in status["inbox"]["lifetimes"]["expiredPending"]} == set(stale)
    assert [e["stem"] for e in project.run("inbox", "expire", "--json").json()["expired"]] == stale
    agent = agents(project, "--turn-seconds", "0.05")  # it starts again, in the same session
    after = send(project, now_ms(), "--expires", "1h", "after the restart")["stem"]
    agent.wait_for(lambda e: e["event"] == "inbox" and e["stem"] in (late, after), count=2)
    read = {e["stem"] for e in agent.named("inbox")}  # every message it claimed (a turn, or an interrupt)
    assert read == {late, after} and read.isdisjoint(stale)
    final = states(project, now_ms())
    assert {s for s, v in final.items() if v == "expired"} == set(stale)
    assert {s for s, v in final.items() if v == "consumed"} == {*kept, late, after}
    project.run("inbox", "expire")  # settles what was read
    status = project.run("status", "--json").json()["inbox"]["lifetimes"]
    assert (status["overdue"], status["expired"], status["readLate"]) == ([], 3, 1)


def test_a_settled_record_with_a_bad_time_breaks_no_view(project):
    folder = project.session(live=False)
    stem = send(project, now_ms(), "--read-within", "1s", "x")["stem"]
    (inbox(folder) / "done").mkdir()
    os.rename(inbox(folder) / f"{stem}.json", inbox(folder) / "done" / f"{stem}.json")
    project.run("inbox", "expire")
    path = inbox(folder) / ".lifetimes" / "settled" / f"{stem}.json"
    path.write_text(path.read_text().replace('"read_ms":', '"read_ms":"soon","was":'))
    for args in (["status", "--json"], ["doctor", "--json"], ["metrics"], ["inbox", "list", "--all"]):
        result = project.run(*args)
        assert result.code in (0, 9) and "internal error" not in result.err, (args, result.err)


def test_a_record_a_killed_send_left_is_not_the_next_messages_of_that_stem(project):
    folder = project.session(live=False)
    killed = forks().run(["inbox", "send", "--no-wait", "--stem", "deploy1", "--expires", "1s", "old"],
                         cwd=project.root, env=project.env(), kill_at=("after-lifetime", 1))
    assert killed.code == -9 and (inbox(folder) / ".lifetimes" / "deploy1.json").exists()
    os.unlink(inbox(folder) / "deploy1.json.tmp")  # what the name_taken error says to do once no send runs
    assert project.run("inbox", "send", "--no-wait", "--stem", "deploy1", "important, no expiry").code == 0
    assert not (inbox(folder) / ".lifetimes" / "deploy1.json").exists()
    result = project.run("inbox", "expire", "--json", clock=FakeClock(now_ms() + 3600 * SEC)).json()
    assert result["expired"] == [] and states(project, now_ms()) == {"deploy1": "pending"}


def test_one_session_that_cannot_be_swept_stops_no_other(project):
    old = project.session("2026_09_20_old_session", live=False)
    new = project.session("2026_09_21_new_session", live=False)
    t = now_ms() - 60 * SEC
    stale_old = send(project, t, "--session", old.name, "--expires", "1s", "a")["stem"]
    send(project, t, "--session", new.name, "--expires", "1s", "b")
    (inbox(new) / ".lifetimes" / "settled").write_text("a file where a folder goes")
    result = project.run("inbox", "expire", "--json")
    assert result.code == 5 and new.name in result.out and "the other sessions were" in result.out
    assert [e["stem"] for e in json.loads(result.out)["expired"]] == [stale_old]
    assert (inbox(old) / "retracted" / f"{stale_old}.json").exists()


def test_a_hand_retract_after_a_killed_expiry_is_a_retract(project):
    project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--expires", "1s", "x")["stem"]
    assert forks().run(["inbox", "expire"], cwd=project.root, env=project.env(),
                       kill_at=("before-withdraw", 1)).code == -9
    assert project.run("inbox", "retract", stem).code == 0
    assert states(project, now_ms()) == {stem: "retracted"}
    assert project.run("inbox", "wait", stem).code == 4
    assert project.run("status", "--json").json()["inbox"]["lifetimes"]["expired"] == 0


@pytest.mark.real_time  # a read's time is the file system's (its ctime): the machine's own clock
def test_a_read_after_its_deadline_is_late_in_every_view_before_any_sweep(project):
    folder = project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--read-within", "1s", "x")["stem"]
    (inbox(folder) / "done").mkdir()
    os.rename(inbox(folder) / f"{stem}.json", inbox(folder) / "done" / f"{stem}.json")
    status = project.run("status", "--json").json()["inbox"]["lifetimes"]
    assert (status["readLate"], status["overdue"]) == (1, [])
    metrics = project.run("metrics").out
    assert next(line for line in metrics.splitlines()
                if line.startswith("sxctl_inbox_read_late_messages{")).endswith(" 1")
    project.run("inbox", "expire")  # settled: still one
    assert project.run("status", "--json").json()["inbox"]["lifetimes"]["readLate"] == 1


def test_a_keyed_duplicate_says_the_lifetime_its_message_has(project):
    project.session(live=False)
    t = now_ms()
    first = send(project, t, "--key", "k1", "--expires", "1h", "x")
    again = send(project, t + 1000, "--key", "k1", "--expires", "1s", "x")
    assert again["duplicate"] is True and again["expires_ms"] == first["expires_ms"] == t + 3600 * SEC


def test_forward_withdraws_an_expired_message_instead_of_delivering_it_late(project):
    old = project.session("2026_09_21_quiet_euler", live=False)
    stem = send(project, now_ms() - 60 * SEC, "--session", old.name, "--expires", "20s", "sent while down")["stem"]
    new = project.session("2026_09_21_brave_curie", live=True)
    dry = project.run("inbox", "forward", "--dry-run", "--json").json()
    assert [m["outcome"] for m in dry["skipped"]] == ["expired"] and dry["forwarded"] == []
    moved = project.run("inbox", "forward")
    assert moved.code == 0 and f"left {stem} in {old.name}: expired unread: withdrawn" in moved.out
    assert not list(inbox(new).glob("*.json")) if inbox(new).exists() else True
    assert project.run("--session", old.name, "inbox", "show", stem, "--json").json()["state"] == "expired"


def test_a_message_withdrawn_unread_is_a_warning_for_a_day_and_a_keyed_resend_says_expired(project):
    project.session(live=False)
    t = now_ms() - 60 * SEC
    stem = send(project, t, "--key", "ci-812", "--expires", "5s", "build 812 failed")["stem"]
    project.run("inbox", "expire")
    status = project.run("status", "--json").json()
    [problem] = [p for p in status["problems"] if p["code"] == "messages_expired_unread"]
    assert stem in problem["message"]
    doctor = project.run("doctor", "--strict", "--json")
    assert doctor.code == 9 and any(c["check"] == "message deadlines" and c["status"] == "warn"
                                    for c in json.loads(doctor.out)["checks"])
    later = project.run("status", "--json", clock=FakeClock(now_ms() + 25 * 3600 * SEC)).json()
    assert "messages_expired_unread" not in [p["code"] for p in later["problems"]]  # a day later: history
    again = project.run("inbox", "send", "build 812 failed", "--key", "ci-812", "--wait", "3", "--json")
    assert again.code == 12 and json.loads(again.out)["state"] == "expired"
    assert project.run("inbox", "wait", stem).code == 12  # the same answer both ways


def test_a_deadline_beyond_the_day_shows_its_date(project):
    project.session(live=False)
    t = now_ms()
    send(project, t, "--read-within", "2d", "x")
    human = project.run("inbox", "list", clock=FakeClock(t)).out
    assert "read by 20" in human  # 2026-…: a date, not a time that looks past


@pytest.mark.parametrize("point, side", [("after-move", "source"), ("before-rename", "target")])
def test_a_forward_recovery_never_deletes_through_a_linked_lifetimes_folder(project, tmp_path, point, side):
    old = project.session("2026_09_21_quiet_euler", live=False)
    send(project, now_ms(), "--session", old.name, "--expires", "1h", "x")
    new = project.session("2026_09_21_brave_curie", live=True)
    assert forks().run(["inbox", "forward"], cwd=project.root, env=project.env(), kill_at=(point, 1)).code == -9
    linked = inbox(old if side == "source" else new) / ".lifetimes"
    outside = tmp_path / "outside"
    os.rename(linked, outside)
    os.symlink(outside, linked)
    before = tree(outside)
    assert before, "the record the recovery would remove is there"
    result = project.run("inbox", "forward")
    assert result.code == 5 and "symbolic link" in result.err, result.err
    assert tree(outside) == before


def test_sweeps_at_once_take_turns_and_every_expiry_stays_an_expiry(project, tmp_path):
    from tests.conftest import start_together

    folder = project.session(live=False)
    t = now_ms() - 60 * SEC
    stems = [send(project, t + n, "--expires", "1s", f"n{n}")["stem"] for n in range(30)]
    runs = start_together(project, [["inbox", "expire", "--json"]] * 6, tmp_path / "gun")
    results = [run.wait() for run in runs]
    assert all(r.code == 0 for r in results), [r.err for r in results]
    withdrawn = [e["stem"] for r in results for e in json.loads(r.out)["expired"]]
    assert sorted(withdrawn) == sorted(stems)  # each once, by one of them
    assert set(states(project, now_ms()).values()) == {"expired"}
    assert not list((inbox(folder) / ".lifetimes").glob("*.json"))


def test_forward_leaves_a_message_whose_record_cannot_be_read(project):
    old = project.session("2026_09_21_quiet_euler", live=False)
    stem = send(project, now_ms() - 60 * SEC, "--session", old.name, "--expires", "1s", "x")["stem"]
    record_file = inbox(old) / ".lifetimes" / f"{stem}.json"
    record_file.write_text(record_file.read_text()[:-2] + ',"sent_ms":1}')  # a key twice
    project.session("2026_09_21_brave_curie", live=True)
    result = project.run("inbox", "forward")
    assert result.code == 4 and "(invalid lifetime)" in result.err
    assert (inbox(old) / f"{stem}.json").exists() and record_file.exists()
    doctor = project.run("doctor", "--json").json()
    assert any(c["check"] == "message deadlines" and stem in c["message"] for c in doctor["checks"])


def test_completing_an_abandoned_keyed_send_keeps_the_first_lifetime(project):
    folder = project.session(live=False)
    first = forks().run(["inbox", "send", "--no-wait", "--key", "K2", "--expires", "1s", "y"], cwd=project.root,
                        env=project.env(), kill_at=("after-lifetime", 1))
    assert first.code == -9
    recorded = json.loads(next((inbox(folder) / ".lifetimes").glob("*.json")).read_text())
    project.run("inbox", "clean", "--older-than", "0", clock=FakeClock(now_ms() + 3600 * SEC))
    again = send(project, now_ms(), "--key", "K2", "--expires", "1h", "y")
    assert again["completed_abandoned"] is True and again["expires_ms"] == recorded["expires_ms"]
    assert record(folder, again["stem"])["expires_ms"] == recorded["expires_ms"]


def test_a_file_in_the_way_of_one_withdrawal_stops_no_other(project):
    folder = project.session(live=False)
    t = now_ms() - 60 * SEC
    a, b = (send(project, t + n, "--expires", "1s", name)["stem"] for n, name in enumerate("ab"))
    (inbox(folder) / "retracted").mkdir()
    (inbox(folder) / "retracted" / f"{a}.json").write_text("someone else's")
    result = project.run("inbox", "expire", "--json")
    assert result.code == 5 and [e["stem"] for e in json.loads(result.out)["expired"]] == [b]
    assert "already exists" in result.out  # the one it could not withdraw, named
    rows = project.run("inbox", "list", "--all", "--json").json()["messages"]
    assert sorted((r["stem"], r["state"]) for r in rows) == [(a, "pending"), (a, "retracted"), (b, "expired")]
    assert not (inbox(folder) / ".lifetimes" / "settled" / f"{a}.json").exists()


def test_past_both_deadline_and_expiry_is_both_in_every_view(project):
    project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--expires", "10s", "--read-within", "5s", "x")["stem"]
    status = project.run("status", "--json").json()
    codes = [p["code"] for p in status["problems"]]
    assert "messages_unread_past_deadline" in codes and "messages_expired_not_withdrawn" in codes
    metrics = project.run("metrics").out
    assert next(line for line in metrics.splitlines()
                if line.startswith("sxctl_inbox_unread_past_deadline_messages{")).endswith(" 1")
    assert stem in project.run("inbox", "list").out


def test_the_messages_of_lifetime_errors_say_what_was_given(project):
    project.session(stats={"usage": {"rl_5h": 0.95}})
    said = {
        ("--when-below", "90%", "--expires", "3651d"): "--expires 3651d is too far ahead",
        ("--expires", "1h30",): "invalid --expires '1h30': use a number of seconds",
        ("--when-below", "٩٠%",): "invalid --when-below",
    }
    for args, message in said.items():
        result = project.run("inbox", "send", "x", "--no-wait", *args)
        assert result.code == 2 and message in result.err, (args, result.err)
    result = project.run("cron", "add", "k", "--every", "1h", "--payload", "agent-turn", "--text", "x",
                         "--expires", "3651d")
    assert result.code == 2 and "--expires must be 0 (none), or 1ms to 3650 days" in result.err
    result = project.run("cron", "add", "d", "--every", "1h", "--payload", "delivery", "--text", "x", "--expires", "1h")
    assert result.code == 2 and "a delivery job sends none" in result.err


def test_forward_makes_no_lock_through_a_linked_sessions_folder(project, tmp_path):
    old = project.session("2026_09_21_quiet_euler", live=False)
    send(project, now_ms(), "--session", old.name, "--expires", "1h", "x")
    project.session("2026_09_21_brave_curie", live=True)
    sessions = project.root / ".scorpiox" / "sessions"
    outside = tmp_path / "outside"
    os.rename(sessions, outside)
    os.symlink(outside, sessions)
    before = tree(outside)
    result = project.run("inbox", "forward", "--from", old.name, "--to", "2026_09_21_brave_curie")
    assert result.code == 5 and "symbolic link" in result.err
    assert tree(outside) == before


def test_a_folder_where_the_sweep_lock_goes_is_named(project):
    folder = project.session(live=False)
    stem = send(project, now_ms() - 60 * SEC, "--expires", "1s", "x")["stem"]
    (inbox(folder) / ".lifetimes" / ".sweep.lock").mkdir()
    result = project.run("inbox", "wait", stem)
    assert result.code == 5 and "a folder, not a lock file" in result.err
    assert states(project, now_ms()) == {stem: "pending"}

"""Hostile input and a hostile file system (issue: nothing outside the project is ever touched,
no success is ever false, no input is "internal error"): symlinks on the way to anything sxctl
deletes, moves or creates; FIFOs, deep nesting, NaN and out-of-range numbers in the files it
reads; input that never ends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Project, forks, tree

SID = "2026_09_21_quiet_euler"


@pytest.fixture
def outside(project):
    """A folder outside the project full of old files: what a symlink could expose."""
    folder = project.root.parent / "outside"
    folder.mkdir()
    for name in ("keep.json", "1789972202_061734902.json", "notes.txt", "a.json.tmp", "1789972202_061734902.png"):
        (folder / name).write_text("precious")
        os.utime(folder / name, (time.time() - 86400 * 400, time.time() - 86400 * 400))
    return folder


def _link(path, target):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.symlink_to(target, target_is_directory=True)


def _pending(folder, stem="1789972202_061734902"):
    inbox = folder / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / f"{stem}.json").write_text('{"text":"hi","mode":"auto"}\n')
    return stem


INBOX_CASES = [
    ("inbox/done", ["inbox", "prune", "--older-than", "0"]),
    ("inbox/retracted", ["inbox", "prune", "--older-than", "0", "--retracted"]),
    ("inbox/retracted", ["inbox", "retract", "1789972202_061734902"]),
    ("inbox/.keys", ["inbox", "prune", "--older-than", "0", "--keys"]),
    ("inbox/.keys", ["inbox", "clean", "--older-than", "0"]),
    ("inbox/.keys", ["inbox", "send", "x", "--key", "k", "--no-wait"]),
    ("inbox", ["inbox", "prune", "--older-than", "0", "--retracted", "--keys"]),
    ("inbox", ["inbox", "clean", "--older-than", "0"]),
    ("inbox", ["inbox", "retract", "1789972202_061734902"]),
    ("inbox", ["inbox", "send", "x", "--no-wait"]),
]


@pytest.mark.parametrize(("link", "args"), INBOX_CASES, ids=[f"{link} {' '.join(args[:2])}" for link, args in INBOX_CASES])
def test_inbox_verbs_never_delete_move_or_create_through_a_symlink(project, outside, link, args):
    folder = project.session(SID, live=False)
    if link != "inbox":
        _pending(folder)
    _link(folder / link, outside)
    before = tree(outside)
    result = project.run(*args, "--json")
    assert result.code == 5, (result.out, result.err)
    error = result.json()["error"]
    assert error["message"] == f"refusing to use {folder / link}: it is a symbolic link"
    assert error["file"] == str(folder / link)
    assert tree(outside) == before


def test_a_symlinked_session_folder_is_never_written_through(project, outside):
    (project.root / ".scorpiox" / "sessions" / SID).symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    result = project.run("--session", SID, "inbox", "send", "x", "--no-wait", "--json")
    assert result.code in (3, 5), result.out
    assert tree(outside) == before


CRON_CASES = [
    (".scheduler", "dir", ["cron", "init"]),
    (".scheduler", "dir", ["cron", "add", "j", "--every", "1h", "--payload", "heartbeat-event", "--text", "t"]),
    (".scheduler", "dir", ["cron", "tick"]),
    (".scheduler", "dir", ["cron", "run", "next-check-in"]),
    (".scheduler", "dir", ["cron", "update", "next-check-in", "--text", "changed"]),
    (".scheduler", "dir", ["cron", "pause", "next-check-in"]),
    (".scheduler", "dir", ["cron", "resume", "ci-watch"]),
    (".scheduler", "dir", ["cron", "remove", "ci-watch", "--yes"]),
    (".scheduler/cron-jobs.lock", "file", ["cron", "pause", "next-check-in"]),
    (".scheduler/cron-jobs.lock.owner", "file", ["cron", "pause", "next-check-in"]),
    (".scheduler/cron-executions.jsonl", "file", ["cron", "tick"]),
    (".scheduler/cron-executions.lock", "file", ["cron", "tick"]),
    (".scheduler/cron-jobs.json", "file", ["cron", "pause", "next-check-in"]),
]


@pytest.mark.parametrize(("link", "kind", "args"), CRON_CASES, ids=[f"{c[0]} {' '.join(c[2][:2])}" for c in CRON_CASES])
def test_cron_verbs_never_write_through_a_symlink(project, outside, link, kind, args):
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    for name in ("cron-jobs.json", "cron-executions.jsonl"):
        shutil.copy(EXAMPLES / name, scheduler / name)
    target = outside
    if kind == "file":
        target = outside / "keep.json"
        (scheduler / link.split("/")[1]).unlink(missing_ok=True)
    else:
        shutil.rmtree(scheduler)
    (project.root / link).symlink_to(target)
    project.session(SID)
    before = tree(outside)
    result = project.run(*args, "--json")
    assert result.code == 5, (result.out, result.err)
    assert result.json()["error"]["message"].endswith(": it is a symbolic link")
    assert tree(outside) == before


class StaleAgentClock:
    """A fake clock whose first sleep is the moment the agent writes back the table it read
    before sxctl's write, under the revision sxctl just used (the same rev)."""

    def __init__(self, clock, path):
        self.clock, self.path, self.stale = clock, path, path.read_bytes()
        self.wrote = False

    def __getattr__(self, name):
        return getattr(self.clock, name)

    def sleep(self, seconds):
        if not self.wrote:
            self.wrote = True
            rev = json.loads(self.path.read_bytes())["rev"]
            doc = json.loads(self.stale)
            doc["rev"] = rev  # the agent bumped its old copy to the same number
            temp = self.path.with_name("agent.tmp")
            temp.write_text(json.dumps(doc, indent=2))
            os.replace(temp, self.path)
        self.clock.sleep(seconds)


@pytest.mark.parametrize("args", [["cb", "set", "mine", "--every", "60"], ["cb", "cancel", "0"],
                                  ["cb", "edit", "0", "--message", "edited"], ["cb", "pause"]])
def test_a_stale_copy_under_the_same_rev_is_a_lost_update_not_verified(project, args):
    from sxctl.clock import FakeClock
    from tests.conftest import now_ms

    folder = project.session(SID, live=True)
    shutil.copy(EXAMPLES / "callbacks.json", folder / "callbacks.json")
    clock = StaleAgentClock(FakeClock(now_ms()), folder / "callbacks.json")
    result = project.run(*args, "--json", clock=clock)
    assert clock.wrote
    assert result.code == 4, result.out
    assert result.json()["error"]["code"] == "lost_update"


def test_two_keys_racing_for_one_stem_never_drop_a_message(project, figures):
    """200 trials: two senders with different keys and texts on one explicit stem, and two on
    default stems taken in the same clock tick. A key only ever matches its own message."""
    import threading

    from sxctl.clock import FakeClock
    from sxctl.inbox.request import SendRequest
    from sxctl.inbox.sending import send
    from sxctl.project import select_session

    folder = project.session(SID, live=False)
    session = select_session(project.root, SID)
    tick = FakeClock(1_789_974_090_000)  # every default stem of a trial is the same name
    silent_drops = 0
    for trial in range(200):
        explicit = trial % 2 == 0
        tick.advance(0.001)
        barrier = threading.Barrier(2)
        outcomes: list = [None, None]

        def sender(i, trial=trial, explicit=explicit, barrier=barrier, outcomes=outcomes):
            request = SendRequest(f"text {trial}-{i}", key=f"key-{trial}-{i}", no_wait=True,
                                  stem=f"s{trial}" if explicit else None)
            barrier.wait()
            try:
                outcomes[i] = send(session, request, clock=tick)
            except Exception as error:  # noqa: BLE001 - the outcome under test
                outcomes[i] = error

        threads = [threading.Thread(target=sender, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, Exception):
                assert explicit and getattr(outcome, "code", None) == "name_taken", outcome
                continue
            assert outcome.duplicate is False
            written = json.loads((folder / "inbox" / f"{outcome.stem}.json").read_text())
            silent_drops += written["text"] != f"text {trial}-{i}"
        figures["operations"] += 2
    assert silent_drops == 0


def test_a_consumed_keyed_message_is_not_sent_again_after_prune(project):
    folder = project.session(SID, live=False)
    first = project.run("inbox", "send", "nightly report", "--key", "nightly", "--json").json()
    done = folder / "inbox" / "done"
    done.mkdir()
    os.rename(folder / "inbox" / f"{first['stem']}.json", done / f"{first['stem']}.json")  # the agent read it
    assert project.run("inbox", "prune", "--older-than", "0").code == 0
    assert not (done / f"{first['stem']}.json").exists()
    again = project.run("inbox", "send", "nightly report", "--key", "nightly", "--json").json()
    assert again["duplicate"] is True and again["state"] == "consumed" and again["stem"] == first["stem"]
    assert "completed_abandoned" not in again
    assert [p.name for p in (folder / "inbox").glob("*.json")] == []
    assert project.run("inbox", "prune", "--older-than", "0", "--keys").code == 0  # forgets the key
    fresh = project.run("inbox", "send", "nightly report", "--key", "nightly", "--json").json()
    assert fresh["duplicate"] is False and fresh["state"] == "pending"


def _die_holding_the_store_lock(root) -> None:
    """Another sxctl process takes the store lock and dies without releasing it (a fork of the
    suite's single-threaded fork server, not of this test process: a fork of a process with
    threads can inherit a held lock and hang)."""

    code = ("import os, sys\nfrom pathlib import Path\nfrom sxctl.cron.store.file import store_lock\nfrom sxctl.cron.store.workspace import Workspace\n"
            "try:\n    store_lock(Workspace(Path(sys.argv[1])), 'sxctl-doomed', 0).acquire()\n"
            "finally:\n    os._exit(0)\n")
    done = forks().run([str(root)], cwd=root, env=dict(os.environ), python=code)
    assert done.code == 0, done.err


@pytest.fixture
def on_disk(project):
    """The project in a folder on disk, not in the suite's memory (conftest.pytest_configure):
    ext4 hands a directory made again the inode number of the one just removed, a tmpfs never
    does. /var/tmp is kept across reboots, so it is no tmpfs."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="sxctl-on-disk-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    (folder / ".scorpiox" / "sessions").mkdir(parents=True)
    yield Project(Path(os.path.realpath(folder)), project.home)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.real_time
def test_a_dead_holders_note_never_takes_a_live_comis_lock_after_inode_reuse(on_disk, figures):
    """50 trials on a real file system: an sxctl holder is killed holding the store lock; comis
    later removes the stale directory and makes its own (with the same inode number, now and
    then, on ext4); sxctl must wait for comis's lock, never remove it."""
    project = on_disk
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    for name in ("cron-jobs.json", "cron-executions.jsonl"):
        shutil.copy(EXAMPLES / name, scheduler / name)
    lockdir = scheduler / "cron-jobs.lock.lock"
    reused = 0
    for trial in range(50):
        _die_holding_the_store_lock(project.root)
        assert lockdir.is_dir() and (scheduler / "cron-jobs.lock.owner").exists()
        old_inode = lockdir.stat().st_ino
        os.rmdir(lockdir)  # comis: the lock went stale (30 s), rmdir, mkdir, refresh in ms
        os.mkdir(lockdir)
        if trial % 2:
            now = time.time_ns() // 1_000_000 * 1_000_000
            os.utime(lockdir, ns=(now, now))
        reused += lockdir.stat().st_ino == old_inode
        result = project.run("cron", "pause", "next-check-in", "--lock-wait", "0", "--json")
        assert result.code == 4 and result.json()["error"]["code"] == "lock_busy", (trial, result.out)
        assert lockdir.is_dir()
        os.rmdir(lockdir)  # comis releases
        figures["operations"] += 2
    print(f"inode reused in {reused} of 50 trials")
    figures["inode_reuse_trials"] += reused


# --- files that are not what they should be: FIFOs, hostile JSON ------------------------------------

def _store_and_ledger(project):
    scheduler = project.root / ".scheduler"
    scheduler.mkdir(exist_ok=True)
    for name in ("cron-jobs.json", "cron-executions.jsonl"):
        shutil.copy(EXAMPLES / name, scheduler / name)
    return scheduler


FIFO_CASES = [
    ("callbacks.json", ["cb", "list"], 5),
    ("callbacks.json", ["cb", "set", "x", "--every", "5"], 5),
    ("stats.json", ["session", "list"], 0),
    (".scheduler/cron-jobs.json", ["cron", "list"], 5),
    (".scheduler/cron-jobs.json", ["cron", "pause", "ci-watch"], 5),
    (".scheduler/cron-executions.jsonl", ["cron", "runs", "--all-jobs"], 5),
    (".scheduler/cron-executions.jsonl", ["cron", "tick"], 5),
]


@pytest.mark.parametrize(("where", "args", "code"), FIFO_CASES, ids=[f"{w} {' '.join(a[:2])}" for w, a, _ in FIFO_CASES])
def test_a_fifo_where_a_file_should_be_is_refused_not_waited_on(project, where, args, code):
    folder = project.session(SID, live=False)
    _store_and_ledger(project)
    path = (project.root / where) if where.startswith(".scheduler") else folder / where
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    result = project.run(*args, "--json")
    assert result.code == code, result.out
    if code == 5:
        assert result.json()["error"]["message"] == f"invalid data in {path}: cannot read it (not a regular file)"
    # nothing was left locked: the next edit works once the file is back
    path.unlink()
    assert not (project.root / ".scheduler" / "cron-jobs.lock.lock").exists()


DEEP = b"[" * 200_000 + b"]" * 200_000
HOSTILE_TABLES = {
    "deep nesting": (b'{"rev": 1, "slots": ' + DEEP + b"}", "nested too deeply"),
    "NaN": (b'{"rev": NaN, "slots": []}', "NaN is not a JSON value"),
    "Infinity": (b'{"rev": 1, "slots": [], "x": -Infinity}', "-Infinity is not a JSON value"),
    "1e400": (b'{"rev": 1, "slots": [{"id": 0, "active": true, "message": "m", "delay_ms": 1000, '
              b'"repeat_count": 1, "fire_at_ms": 1e400}]}', "the number 1e400 is out of range"),
    "lone surrogate": (b'{"rev": 1, "slots": [{"id": 0, "active": true, "message": "\\ud800", "delay_ms": 1000, '
                       b'"repeat_count": 1, "fire_at_ms": 1}]}', "lone surrogate"),
}


@pytest.mark.parametrize("case", list(HOSTILE_TABLES))
def test_hostile_json_in_the_timer_table_is_invalid_data_for_every_verb(project, case):
    folder = project.session(SID, live=False)
    raw, reason = HOSTILE_TABLES[case]
    (folder / "callbacks.json").write_bytes(raw)
    for args in (["cb", "list"], ["cb", "set", "x", "--every", "5"], ["cb", "cancel-all"], ["cb", "pause"],
                 ["status"], ["next"]):
        result = project.run(*args, "--json")
        if args[0] in ("status", "next"):
            assert result.code == 0, (args, result.out)  # one unreadable part is a problem, not a failure
            json.loads(result.out)
            continue
        assert result.code == 5, (args, result.out)
        message = result.json()["error"]["message"]
        assert message.startswith(f"invalid data in {folder / 'callbacks.json'}: ") and reason in message
    assert (folder / "callbacks.json").read_bytes() == raw


def _store_with(project, mutate):
    scheduler = _store_and_ledger(project)
    raw = (scheduler / "cron-jobs.json").read_bytes()
    (scheduler / "cron-jobs.json").write_bytes(mutate(raw))
    return scheduler / "cron-jobs.json"


@pytest.mark.parametrize(("case", "mutate"), [
    ("deep nesting", lambda raw: raw.replace(b'"jobs":', b'"x":' + DEEP + b',"jobs":', 1)),
    ("NaN", lambda raw: raw.replace(b'"nextRunAtMs":', b'"nextRunAtMs":NaN,"y":', 1)),
    ("lone surrogate", lambda raw: raw.replace(b'"name":"', b'"name":"\\udc00', 1)),
])
def test_hostile_json_in_the_store_is_invalid_data(project, case, mutate):
    store = _store_with(project, mutate)
    before = store.read_bytes()
    for args in (["cron", "list"], ["cron", "validate"], ["cron", "pause", "ci-watch"], ["cron", "tick"]):
        result = project.run(*args, "--json")
        assert result.code == 5, (args, result.out)
        assert result.json()["error"]["file"] == str(store)
    assert store.read_bytes() == before


@pytest.mark.parametrize("row", [b'{"recordType":"started","startedAtMs":NaN}', b"[" * 50_000])
def test_hostile_json_in_the_ledger_is_invalid_data_and_stdout_stays_json(project, row):
    scheduler = _store_and_ledger(project)
    ledger = scheduler / "cron-executions.jsonl"
    ledger.write_bytes(ledger.read_bytes() + row + b"\n")
    for args in (["cron", "runs", "--all-jobs"], ["cron", "validate"], ["cron", "tick"]):
        result = project.run(*args, "--json")
        assert result.code == 5, (args, result.out)
        json.loads(result.out)  # never NaN on stdout


def test_a_largest_safe_next_run_does_not_break_listings(project):
    store = _store_and_ledger(project) / "cron-jobs.json"
    doc = json.loads(store.read_text())
    doc["jobs"][0]["lifecycle"]["nextRunAtMs"] = 2**53 - 1
    store.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    project.session(SID)
    for args in (["cron", "list"], ["cron", "next"], ["next"], ["status"]):
        for extra in ([], ["--json"]):
            result = project.run(*args, *extra)
            assert result.code == 0, (args, extra, result.out, result.err)


def test_hostile_inbox_files_are_rows_marked_invalid_and_the_rest_still_works(project):
    folder = project.session(SID, live=False)
    inbox = folder / "inbox"
    inbox.mkdir()
    good = project.run("inbox", "send", "fine", "--no-wait", "--json").json()["stem"]
    (inbox / "0_deep.json").write_bytes(b"[" * 30_000 + b"]" * 30_000)  # under the 64,000-byte cap
    (inbox / "0_nan.json").write_bytes(b'{"text": NaN, "mode": "auto"}')
    os.close(os.open(os.fsencode(inbox) + b"/0_bad\xff.json", os.O_CREAT | os.O_WRONLY, 0o600))
    os.mkfifo(inbox / "0_fifo.json")
    listing = project.run("inbox", "list", "--json")
    assert listing.code == 0, listing.out
    rows = {row["stem"]: row for row in listing.json()["messages"]}
    assert rows[good].get("invalid") is None
    assert "nested too deeply" in rows["0_deep"]["invalid"] and "NaN" in rows["0_nan"]["invalid"]
    assert rows["0_fifo"]["invalid"] == "not a regular file"
    assert rows["0_bad\\xff"]["invalid"] == "its file name is not valid UTF-8"
    human = project.run("inbox", "list")
    assert human.code == 0 and "0_bad\\xff" in human.out
    assert project.run("status", "--json").code == 0
    assert project.run("inbox", "show", "0_nan", "--json").code == 0


# --- input that never ends ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["inbox", "send", "--text-file", "/dev/zero", "--no-wait"],
                                  ["cron", "add", "j", "--every", "1h", "--payload", "heartbeat-event",
                                   "--text-file", "/dev/zero"]])
def test_an_endless_text_file_is_a_usage_error(project, args):
    project.session(SID, live=False)
    _store_and_ledger(project)
    result = project.run(*args, "--json")
    assert result.code == 2 and "is larger than" in result.json()["error"]["message"]


@pytest.mark.parametrize("args", [["inbox", "send", "-", "--no-wait"], ["cb", "set", "-", "--every", "5"]])
def test_an_endless_stdin_is_a_usage_error(project, args):
    import subprocess
    import sys

    project.session(SID, live=False)
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run([sys.executable, "-m", "sxctl", *args, "--json"], stdin=yes.stdout, capture_output=True,
                              cwd=project.root, env=project.env(), timeout=60)
    finally:
        yes.kill()
        yes.wait()
    assert proc.returncode == 2 and b"is larger than" in proc.stdout, proc.stdout
    assert list((project.root / ".scorpiox" / "sessions" / SID).glob("inbox/*.json")) == []


def test_a_message_read_from_stdin_or_a_file_has_the_limit_of_an_argument(project, tmp_path):
    """64,000 bytes, whichever way the text comes (the read said "larger than 64002 bytes"), and a
    line break that ends the file does not count; `--text-file -` is stdin."""
    folder = project.session(SID, live=False)
    at_limit, over = "é" * 31_950 + "\n", "x" * 64_001  # 63,900 bytes of text: within the message limit
    (tmp_path / "at.txt").write_text(at_limit)
    (tmp_path / "over.txt").write_text(over)
    assert project.run("inbox", "send", "--text-file", str(tmp_path / "at.txt"), "--no-wait").code == 0
    assert project.run("inbox", "send", "-", "--no-wait", input=at_limit).code == 0
    assert project.run("inbox", "send", "--text-file", "-", "--no-wait", input=at_limit).code == 0
    for result in (project.run("inbox", "send", "--text-file", str(tmp_path / "over.txt"), "--no-wait"),
                   project.run("inbox", "send", "-", "--no-wait", input=over),
                   project.run("inbox", "send", over, "--no-wait")):
        assert result.code == 2 and "64000" in result.err, result.err
    assert len(list((folder / "inbox").glob("*.json"))) == 3


@pytest.mark.parametrize("args", [["--session", "", "inbox", "send", "x", "--no-wait"],
                                  ["--project=", "inbox", "send", "x", "--no-wait"],
                                  ["inbox", "send", "x", "--no-wait", "--session", ""],
                                  ["--session", "", "--", "inbox", "list"], ["session", "show", ""],
                                  ["--workspace", "", "cron", "list"], ["--workspace", "", "inbox", "send", "x"],
                                  ["cron", "show", ""], ["config", "get", ""]])
def test_an_empty_session_project_or_workspace_is_refused_not_taken_for_none(project, args):
    """`--session "$SID"` with SID unset: the message went to the newest session."""
    folder = project.session(SID, live=False)
    for way in (project.run, project.process):  # the click command and the plain `inbox send`
        result = way(*args)
        assert result.code == 2 and ("empty" in result.err or "invalid session id ''" in result.err), result.err
    assert list(folder.glob("inbox/*.json")) == []


def test_a_session_folder_that_is_a_link_or_a_sessions_folder_that_is_a_file_is_named_as_such(project):
    """Exit 5 naming what is wrong, for both ways in (it was "not found … did you mean <itself>?",
    and exit 8 "Not a directory")."""
    project.session(SID, live=False)
    (project.root / ".scorpiox" / "sessions" / "2026_12_02_link").symlink_to(SID)
    for way in (project.run, project.process):
        linked = way("--session", "2026_12_02_link", "inbox", "send", "x", "--no-wait")
        assert linked.code == 5 and "symbolic link" in linked.err and "did you mean" not in linked.err, linked.err
    sessions = project.root / ".scorpiox" / "sessions"
    shutil.rmtree(sessions)
    sessions.write_text("")
    for way in (project.run, project.process):
        result = way("inbox", "send", "x", "--no-wait")
        assert result.code == 5 and f"invalid data in {sessions}: not a folder" in result.err, result.err


@pytest.mark.parametrize("args, where", [(["inbox", "send", "x", "--wait"], "sxctl inbox send"),
                                         (["inbox", "send", "x", "--no-wait=1"], "sxctl inbox send"),
                                         (["cron", "add", "j", "--every"], "sxctl cron add"),
                                         (["--project"], "sxctl")])
def test_a_missing_or_unwanted_option_value_names_the_command(project, args, where):
    result = project.run(*args)
    assert result.code == 2 and result.err.endswith(f"(see '{where} --help')\n"), result.err


@pytest.mark.parametrize("script", ["\"$PY\" -m sxctl inbox send - --no-wait <&-",
                                    "\"$PY\" -m sxctl inbox send --no-wait <&-",
                                    "\"$PY\" -m sxctl cb set - --every 5 <&-",
                                    "\"$PY\" -m sxctl cron remove j <&-"])
@pytest.mark.real_time
def test_a_closed_stdin_is_a_usage_error(project, script):
    folder = project.session(SID, live=False)
    proc = _sh(project, script)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1, proc.stderr
    assert b"internal error" not in proc.stderr
    assert list(folder.glob("inbox/*.json")) == []


def test_control_characters_in_file_names_cannot_fake_rows(project):
    folder = project.session(SID, live=False)
    inbox = folder / "inbox"
    inbox.mkdir()
    (inbox / "0_a\nfake row pending auto.json").write_text('{"text":"x","mode":"auto"}')
    (inbox / "0_b\x1b[2J.json").write_text('{"text":"y","mode":"auto"}')
    listing = project.run("inbox", "list")
    assert listing.code == 0
    lines = listing.out.splitlines()
    assert len(lines) == 3  # the header and two rows
    assert "0_a\\nfake row" in listing.out and "\x1b" not in listing.out and "0_b\\x1b[2J" in listing.out


def test_an_owner_note_that_is_a_folder_is_refused_and_leaves_no_lock(project):
    scheduler = _store_and_ledger(project)
    (scheduler / "cron-jobs.lock.owner").mkdir()
    result = project.run("cron", "pause", "ci-watch", "--json")
    assert result.code == 5 and result.json()["error"]["file"] == str(scheduler / "cron-jobs.lock.owner")
    assert not (scheduler / "cron-jobs.lock.lock").exists()


# --- the operating system says no ------------------------------------------------------------------

def _sh(project, script, **env):
    import subprocess
    import sys

    return subprocess.run(["/bin/sh", "-c", script], cwd=project.root, capture_output=True, timeout=60,
                          env=project.env(PY=sys.executable, **env))


@pytest.mark.real_time
def test_a_closed_stdout_is_one_line_and_nothing_is_done(project):
    folder = project.session(SID, live=False)
    proc = _sh(project, '"$PY" -m sxctl inbox send "never sent" --no-wait >&-')
    assert proc.returncode == 8 and proc.stderr == b"sxctl: standard output is closed; nothing was done\n"
    assert not (folder / "inbox").exists()
    proc = _sh(project, '"$PY" -m sxctl session list >&-')
    assert proc.returncode == 8 and b"Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["session", "list"], ["cron", "list"], ["inbox", "list"], ["status"]])
@pytest.mark.real_time
def test_a_reader_that_goes_away_is_the_broken_pipe_status_and_silence(project, args):
    project.session(SID, live=False)
    scheduler = _store_and_ledger(project)
    store = json.loads((scheduler / "cron-jobs.json").read_text())
    for n in range(300):  # enough output to outlast the pipe's buffer
        job = json.loads(json.dumps(store["jobs"][1]))
        job["id"], job["name"] = f"j-{n:04d}", f"job-{n:04d}"
        store["jobs"].append(job)
    (scheduler / "cron-jobs.json").write_text(json.dumps(store, separators=(",", ":")) + "\n")
    for n in range(300):
        (project.root / ".scorpiox" / "sessions" / f"2026_09_{n % 28 + 1:02d}_s{n}").mkdir(exist_ok=True)
    import subprocess
    import sys

    reader = subprocess.Popen([sys.executable, "-m", "sxctl", *args], cwd=project.root, env=project.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.read(1)
    reader.stdout.close()
    err = reader.stderr.read()
    assert reader.wait(timeout=60) in (0, 141), err  # 0 when it had finished writing already
    assert b"Traceback" not in err and b"Error" not in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--help"], ["session", "list", "--json"], ["cron", "list"],
                                  ["--json", "no-such-command"], ["inbox", "send", "--json", "--stem", "a/b", "x"]])
def test_a_full_stdout_is_exit_8_and_one_line(project, args):
    project.session(SID, live=False)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "sxctl", *args], cwd=project.root, env=project.env(),
                              stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 8, proc.stderr
    assert proc.stderr == b"sxctl: cannot write standard output: No space left on device\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["inbox", "send", "x", "--no-wait"], ["--json", "inbox", "send", "x", "--no-wait"],
                                  ["inbox", "send", "-", "--no-wait"]])  # (the last: the click command)
@pytest.mark.real_time
def test_a_send_whose_output_cannot_be_written_says_the_message_was_sent(project, args):
    """Exit 8 and only "cannot write standard output": an unkeyed script sent the message again."""
    folder = project.session(SID, live=False)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "sxctl", "-q", *args], input=b"x", cwd=project.root,
                              env=project.env(), stdout=full, stderr=subprocess.PIPE, timeout=60)
    [written] = (folder / "inbox").glob("*.json")
    assert proc.returncode == 8 and proc.stderr.decode() == (
        f"sxctl: cannot write standard output (No space left on device); the message was sent: {written.stem} is "
        f"pending in {folder / 'inbox'}\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["inbox", "send", "x", "--no-wait"], ["--", "inbox", "send", "x", "--no-wait"],
                                  ["inbox", "list"]])
@pytest.mark.real_time
def test_a_full_stderr_loses_a_note_never_the_command(project, args):
    """A note ("using session …", "no readable stats.json") that cannot be written to stderr is
    lost; the command still does its work and exits as it would (it exited 1, nothing sent)."""
    folder = project.session(SID, live=None)  # no stats.json: a warning on stderr
    if "list" in args:
        assert project.run("inbox", "send", "x", "--no-wait").code == 0
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "sxctl", *args], cwd=project.root, env=project.env(),
                              stdout=subprocess.PIPE, stderr=full, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert len(list((folder / "inbox").glob("*.json"))) == 1
    assert proc.stdout.startswith(b"sent " if "send" in args else b"STEM")


def test_a_non_utf8_argument_is_shown_escaped_once(project):
    proc = _sh(project, "\"$PY\" -m sxctl inbox send \"$(printf 'bad \\377')\" --no-wait")
    assert proc.stderr == b"sxctl: argument 'bad \\xff' is not valid UTF-8 text\n"
    proc = _sh(project, "\"$PY\" -m sxctl --json inbox send \"$(printf 'bad \\377')\" --no-wait")
    assert json.loads(proc.stdout)["error"]["message"] == "argument 'bad \\xff' is not valid UTF-8 text"


def test_arguments_that_are_not_utf8_are_a_usage_error(project):
    folder = project.session(SID, live=False)
    for script in ("\"$PY\" -m sxctl inbox send \"$(printf 'bad \\377')\" --no-wait",
                   "\"$PY\" -m sxctl inbox send ok --key \"$(printf 'k\\377')\" --no-wait",
                   "\"$PY\" -m sxctl cb set \"$(printf 'bad \\377')\" --every 5"):
        proc = _sh(project, script)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(b"sxctl: argument ") and b"is not valid UTF-8 text" in proc.stderr
    assert not (folder / "inbox").exists()


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.real_time
def test_narrow_output_encodings_still_print_and_json_stays_json(project, encoding):
    folder = project.session(SID, live=False)
    sent = project.process("inbox", "send", "naïve café ☕", "--no-wait", "--json",
                           env=project.env(PYTHONIOENCODING=encoding))
    assert sent.code == 0, sent.err
    assert json.loads(sent.out)["state"] == "pending"
    listing = _sh(project, '"$PY" -m sxctl inbox list', PYTHONIOENCODING=encoding)
    assert listing.returncode == 0 and b"Traceback" not in listing.stderr
    shown = project.process("inbox", "list", "--json", env=project.env(PYTHONIOENCODING=encoding))
    assert json.loads(shown.out)["messages"][0]["preview"] == "naïve café ☕"
    assert len(list((folder / "inbox").glob("*.json"))) == 1


@pytest.mark.real_time
def test_strange_environments_get_answers_not_tracebacks(project, tmp_path):
    project.session(SID, live=False)
    _store_and_ledger(project)
    home_file = tmp_path / "home-is-a-file"
    home_file.write_text("")
    for args in (["status"], ["cron", "list"], ["cron", "next"], ["next"], ["session", "list"]):
        result = project.run(*args, env=project.env(HOME=str(home_file)))
        assert result.code == 0 and "Traceback" not in result.err, (args, result.err)
    # TZ is read once per process: a real one
    proc = _sh(project, 'for a in status "cron list" "cron next" next; do "$PY" -m sxctl $a >/dev/null || exit 1; done',
               TZ="UTC+99")
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr


def test_a_deleted_working_folder_is_named(project, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = _sh(project, f'cd {gone} && rmdir {gone} && "$PY" -m sxctl status')
    assert proc.returncode == 3 and b"the working folder no longer exists" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("errno_name", "what"), [("EACCES", "Permission denied"), ("ENOSPC", "No space left"),
                                                  ("EROFS", "Read-only file system")])
def test_a_refused_write_is_exit_8_naming_the_file(project, monkeypatch, errno_name, what):
    import errno

    folder = project.session(SID, live=False)
    code = getattr(errno, errno_name)

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), args[0] if args else None)

    monkeypatch.setattr(os, "open", lambda path, *a, **k: refuse(path) if str(path).endswith(".tmp")
                        else _real_open(path, *a, **k))
    result = project.run("inbox", "send", "x", "--no-wait", "--json")
    assert result.code == 8, result.out
    error = result.json()["error"]
    assert error["code"] == "os_refused" and what in error["message"] and str(folder) in error["message"]


_real_open = os.open


def test_an_unreadable_done_folder_is_not_taken_for_a_missing_message(project, monkeypatch):
    import errno

    folder = project.session(SID, live=False)
    stem = project.run("inbox", "send", "x", "--no-wait", "--json").json()["stem"]
    done = folder / "inbox" / "done"
    done.mkdir()
    os.rename(folder / "inbox" / f"{stem}.json", done / f"{stem}.json")
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        if os.fspath(path).startswith(os.fspath(done) + os.sep):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    waited = project.run("inbox", "wait", stem, "--timeout", "1", "--json")
    assert waited.code == 8 and "Permission denied" in waited.json()["error"]["message"]
    reused = project.run("inbox", "send", "again", "--stem", stem, "--no-wait", "--json")
    assert reused.code == 8


# --- limits comis states -------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "env", "message"), [
    (["--model", "m" * 600, "--payload", "agent-turn"], {}, ".payload.model: must be 1-512 UTF-8 bytes (is 600) (job 'j')"),
    (["--max-dependency-errors", str(2**53), "--payload", "heartbeat-event"], {},
     ".maxConsecutiveDependencyErrors: must be between 0 and 9007199254740991 (job 'j')"),
    (["--payload", "heartbeat-event"], {"SXCTL_AGENT": "a" * 300}, ".agentId: must be 1-256 UTF-8 bytes (is 300) (job 'j')"),
])
def test_values_beyond_comis_limits_are_usage_errors(project, args, env, message):
    _store_and_ledger(project)
    store = project.root / ".scheduler" / "cron-jobs.json"
    before = store.read_bytes()
    result = project.run("cron", "add", "j", "--every", "1h", "--text", "t", *args, "--json", env=project.env(**env))
    assert result.code == 2, result.out
    text = result.json()["error"]["message"]
    assert text.startswith("invalid value for $.jobs[") and text.endswith(message), text
    assert store.read_bytes() == before


def test_zone_names_in_any_case_are_stored_canonically(project):
    _store_and_ledger(project)
    for given, stored in (("utc", "UTC"), ("europe/berlin", "Europe/Berlin"), ("AMERICA/NEW_YORK", "America/New_York")):
        name = f"j-{stored.replace('/', '-').lower()}"
        assert project.run("cron", "add", name, "--cron", "0 9 * * *", "--tz", given, "--payload", "heartbeat-event",
                           "--text", "t").code == 0
        job = next(j for j in json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())["jobs"]
                   if j["name"] == name)
        assert job["schedule"]["tz"] == stored


@pytest.mark.parametrize("flag", [["--at", "9999-12-31 23:59", "--tz", "UTC"], ["--in", str(2**52 // 1000)]])
def test_times_no_calendar_can_show_are_refused_at_add(project, flag):
    _store_and_ledger(project)
    result = project.run("cron", "add", "far", *flag, "--payload", "heartbeat-event", "--text", "t", "--json")
    assert result.code == 2 and "before 9999-01-01" in result.json()["error"]["message"]
    assert project.run("cron", "next").code == 0 and project.run("next").code in (0, 3)


@pytest.mark.parametrize("start", ["0001-01-01T00:01Z", "1969-12-31T23:59Z"])
def test_a_preview_from_before_1970_is_a_usage_error_not_a_crash(project, start):
    result = project.run("cron", "next", "--cron", "* * * * *", "--from", start, "-n", "2", "--json")
    assert result.code == 2 and "before 1970-01-01" in result.json()["error"]["message"], result.out + result.err

"""Many senders at once, one key from many processes, and writers killed at the worst moments."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from tests.conftest import RACER, RandomKiller, now_ms, start_together, timed_run, tree

pytestmark = pytest.mark.slow

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 4096

# one process per sender, each running `sxctl inbox send` `count` times in a row (the whole
# command, argument parsing to exit status, without paying a process start per message)
SENDER = RACER + r"""
from sxctl.cli.root import cli
sender, count = sys.argv[2], int(sys.argv[3])
for n in range(count):
    try:
        cli.main(args=["inbox", "send", f"{sender}-{n}", "--mode", "queue", "-q"])
    except SystemExit as exit_:
        if exit_.code:
            sys.exit(exit_.code)
"""


def test_eight_senders_thirty_messages_each_consumed_exactly_once_in_order(project, consumer_factory, tmp_path):
    folder = project.session()
    consumer = consumer_factory(folder)
    start = tmp_path / "go"
    for run in start_together(project, [[f"s{i}", "30"] for i in range(8)], start, SENDER):
        result = run.wait(timeout=600)
        assert result.code == 0, result.err
    records = consumer.stop()
    violations = [r for r in records if "violation" in r]
    assert violations == []
    texts = [r["text"] for r in records]
    assert len(texts) == 240 and len(set(texts)) == 240
    assert set(texts) == {f"s{i}-{n}" for i in range(8) for n in range(30)}
    for i in range(8):
        order = [int(t.split("-")[1]) for t in texts if t.startswith(f"s{i}-")]
        assert order == list(range(30)), f"sender s{i} consumed out of order: {order}"
    assert all(r["mode"] == "queue" for r in records)
    inbox = folder / "inbox"
    assert [p.name for p in inbox.iterdir() if p.is_file()] == []
    assert len(list((inbox / "done").glob("*.json"))) == 240


@pytest.mark.parametrize("round_", range(3))
def test_sixteen_concurrent_senders_with_one_key_write_one_message(project, tmp_path, round_):
    folder = project.session(live=False)
    start = tmp_path / "go"
    key = f"deploy-{round_}"
    docs = []
    for run in start_together(project, [["inbox", "send", "deploy finished", "--key", key, "--json"]] * 16, start):
        result = run.wait(timeout=120)
        assert result.code == 0, result.err
        docs.append(result.json())
    assert len({d["stem"] for d in docs}) == 1
    assert sum(1 for d in docs if not d["duplicate"]) <= 1
    inbox = folder / "inbox"
    messages = list(inbox.glob("*.json"))
    assert [p.name for p in messages] == [f"{docs[0]['stem']}.json"]
    assert not list(inbox.glob("*.tmp")) and len(list((inbox / ".keys").iterdir())) == 1


def _race_worker(args):
    root, key, barrier = args
    from sxctl.inbox.request import SendRequest
    from sxctl.inbox.sending import send
    from sxctl.project import select_session

    session = select_session(Path(root), environ={})
    barrier.wait()
    return send(session, SendRequest("same", key=key, no_wait=True)).stem


def test_key_race_in_process_pool(project):
    """A tighter race than process start-up allows: 16 workers released by one barrier. The
    workers come from a fork server (a fresh single-threaded process): a fork of this test
    process, which may have threads left by earlier tests, can inherit a held lock and hang."""
    folder = project.session(live=False)
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(16)
        with ctx.Pool(16) as pool:
            for round_ in range(5):
                stems = pool.map(_race_worker, [(str(project.root), f"k{round_}", barrier)] * 16)
                assert len(set(stems)) == 1
                barrier.reset()
    pending = list((folder / "inbox").glob("*.json"))
    assert len(pending) == 5 and not list((folder / "inbox").glob("*.tmp"))


# --- crashes ---------------------------------------------------------------------------------

FOREIGN = {
    "notes.txt": b"someone else's",
    "deploy.json.tmp": b"a user-stem temp: not sxctl's pattern",
    "1789972202_061734902.json.tmp.bak": b"not a temp",
}


def _seed_foreign(inbox: Path) -> None:
    inbox.mkdir(exist_ok=True)
    for name, data in FOREIGN.items():
        (inbox / name).write_bytes(data)


def _visible_messages(inbox: Path) -> list[Path]:
    return [p for p in inbox.glob("*.json")]


@pytest.mark.parametrize(
    ("point", "with_image", "left"),
    [("before-rename", False, {".json.tmp"}), ("before-rename", True, {".json.tmp", ".png"}),
     ("after-sidecar", True, {".json.tmp", ".png"})],
)
@pytest.mark.real_time
def test_fault_points_leave_no_visible_message_and_clean_removes_the_rest(project, point, with_image, left):
    folder = project.session(live=False)
    inbox = folder / "inbox"
    _seed_foreign(inbox)
    args = ["inbox", "send", "half-written", "--fault-inject", point]
    if with_image:
        image = project.root.parent / "a.png"
        image.write_bytes(PNG)
        args += ["--image", str(image)]
    result = project.run(*args)
    assert result.code == 99
    assert _visible_messages(inbox) == []
    stray = [p for p in inbox.iterdir() if p.name not in FOREIGN]
    assert {p.name.split(".", 1)[1] for p in stray} == {s.lstrip(".") for s in left}
    if point == "before-rename":
        temp = next(p for p in stray if p.name.endswith(".json.tmp"))
        assert temp.read_bytes() == b'{"text":"half-written","mode":"auto"}\n'  # complete, never renamed
    assert project.run("inbox", "clean", "--older-than", "1h", "--json").json()["removed"] == []  # too young
    removed = project.run("inbox", "clean", "--older-than", "0", "--json").json()["removed"]
    assert sorted(removed) == sorted(str(p) for p in stray)
    assert {p.name: p.read_bytes() for p in inbox.iterdir() if p.is_file()} == FOREIGN


def test_a_crashed_keyed_send_is_completed_by_the_next_sender(project):
    """inbox.md §6: the next sender of the key completes the record of one that died before its
    message appeared (it was refused as busy until `inbox clean` ran, an hour later)."""
    folder = project.session(live=False)
    crashed = project.run("inbox", "send", "once", "--key", "nightly", "--fault-inject", "before-rename")
    assert crashed.code == 99
    before = tree(folder)
    [temp] = (folder / "inbox").glob("*.json.tmp")
    alive = os.open(temp, os.O_RDONLY)  # as if its writer were still at work: it holds the temp's lock
    fcntl.flock(alive, fcntl.LOCK_EX)
    try:  # it waits 5 s for the writer to finish: on a fake clock, at once
        busy = project.run("inbox", "send", "once", "--key", "nightly", "--json", clock=FakeClock(now_ms()))
    finally:
        os.close(alive)
    assert busy.code == 4 and busy.json()["error"]["code"] == "lock_busy"
    assert tree(folder) == before
    # the writer is gone: the next sender removes its temp and writes the message
    done = project.run("inbox", "send", "once", "--key", "nightly", "--json", clock=FakeClock(now_ms()))
    assert done.code == 0, done.err
    assert done.json()["duplicate"] is True and done.json()["completed_abandoned"] is True
    assert [p.name for p in (folder / "inbox").iterdir() if p.name.endswith(".tmp")] == []
    assert len(_visible_messages(folder / "inbox")) == 1
    again = project.run("inbox", "send", "once", "--key", "nightly", "--json").json()
    assert again["stem"] == done.json()["stem"] and "completed_abandoned" not in again


def _crashed_keyed_send(project, *extra: str, key: str = "nightly") -> tuple[Path, Path]:
    """A keyed send killed before its rename: (the session folder, its temp file)."""
    folder = project.session(live=False)
    crashed = project.run("inbox", "send", "once", "--key", key, *extra, "--fault-inject", "before-rename")
    assert crashed.code == 99
    [temp] = (folder / "inbox").glob("*.json.tmp")
    return folder, temp


def test_a_crashed_keyed_send_with_an_image_is_completed_too(project):
    """The dead writer's published image stood in the way (lock_busy, every time, until `inbox
    clean` an hour later)."""
    image = project.root.parent / "a.png"
    image.write_bytes(PNG)
    folder, _ = _crashed_keyed_send(project, "--image", str(image))
    assert list((folder / "inbox").glob("*.png"))  # published before the message: now an orphan
    done = project.run("inbox", "send", "once", "--key", "nightly", "--image", str(image), "--json",
                       clock=FakeClock(now_ms()))
    assert done.code == 0, done.err
    assert done.json()["completed_abandoned"] is True
    stem = done.json()["stem"]
    assert sorted(p.name for p in (folder / "inbox").iterdir() if p.is_file()) == [f"{stem}.json", f"{stem}.png"]
    assert (folder / "inbox" / f"{stem}.png").read_bytes() == PNG


def test_prune_keys_keeps_the_record_of_a_message_being_written(project):
    """`prune --keys` dropped a record whose message was still being written: the next send of
    the key wrote a second message."""
    folder, temp = _crashed_keyed_send(project)
    alive = os.open(temp, os.O_RDONLY)  # its writer, still at work
    fcntl.flock(alive, fcntl.LOCK_EX)
    try:
        pruned = project.run("inbox", "prune", "--keys", "--older-than", "0", "--json").json()
        assert [p for p in pruned["removed"] if "/.keys/" in p] == []
        cleaned = project.run("inbox", "clean", "--older-than", "0", "--json").json()
        assert cleaned["removed"] == []  # `inbox clean` leaves a live writer's temp too
    finally:
        os.close(alive)
    done = project.run("inbox", "send", "once", "--key", "nightly", "--json", clock=FakeClock(now_ms()))
    assert done.json()["completed_abandoned"] is True
    assert len(_visible_messages(folder / "inbox")) == 1


def test_clean_leaves_the_image_of_a_send_at_work_and_a_foreign_image_is_named(project):
    """`inbox clean` deleted the image a stopped writer had published before its message: the
    message arrived without it."""
    image = project.root.parent / "a.png"
    image.write_bytes(PNG)
    folder, temp = _crashed_keyed_send(project, "--image", str(image))
    [sidecar] = (folder / "inbox").glob("*.png")
    alive = os.open(temp, os.O_RDONLY)  # its writer, still at work
    fcntl.flock(alive, fcntl.LOCK_EX)
    try:
        assert project.run("inbox", "clean", "--older-than", "0", "--json").json()["removed"] == []
    finally:
        os.close(alive)
    assert sidecar.read_bytes() == PNG
    sidecar.unlink()
    os.mkfifo(sidecar)  # not what a writer leaves: named, never removed
    stuck = project.run("inbox", "send", "once", "--key", "nightly", "--image", str(image), "--json",
                        clock=FakeClock(now_ms()))
    assert stuck.code == 5 and stuck.json()["error"]["file"] == str(sidecar), stuck.out


def test_a_temp_from_a_clock_that_was_ahead_is_abandoned_and_a_foreign_one_is_named(project):
    folder, temp = _crashed_keyed_send(project)
    os.utime(temp, (time.time() + 86_400, time.time() + 86_400))  # written while the clock was a day ahead
    done = project.run("inbox", "send", "once", "--key", "nightly", "--json", clock=FakeClock(now_ms()))
    assert done.code == 0 and done.json()["completed_abandoned"] is True, done.err
    folder, temp = _crashed_keyed_send(project, key="weekly")
    temp.unlink()
    os.mkfifo(temp)  # not what a writer leaves: named, never removed nor waited on
    stuck = project.run("inbox", "send", "once", "--key", "weekly", "--json", clock=FakeClock(now_ms()))
    assert stuck.code == 5 and stuck.json()["error"]["file"] == str(temp), stuck.out
    assert "not a regular file" in stuck.json()["error"]["message"] and temp.exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_message_is_written_names_what_was_written(project, monkeypatch, signum):
    """Ctrl-C or SIGTERM during the write said "interrupted" with no stem (or nothing at all)
    though the message was written: a script sent it again."""
    from sxctl import faults

    folder = project.session(live=False)
    monkeypatch.setattr(faults, "hit", lambda point: point == "before-rename" and os.kill(os.getpid(), signum))
    result = project.run("inbox", "send", "x", "--no-wait", "--json")
    assert result.code == 130, result.out
    doc = result.json()
    [written] = _visible_messages(folder / "inbox")
    assert doc["error"]["code"] == "interrupted" and doc["stem"] == written.stem and doc["state"] == "pending"
    assert doc["error"]["message"].startswith(f"interrupted: {written.stem} was written and is pending")


def test_a_stem_held_by_a_leftover_temp_names_it(project):
    folder = project.session(live=False)
    assert project.run("inbox", "send", "hi", "--stem", "foo", "--fault-inject", "before-rename").code == 99
    taken = project.run("inbox", "send", "hi", "--stem", "foo", "--json")
    assert taken.code == 4 and taken.json()["error"]["file"] == str(folder / "inbox" / "foo.json.tmp")
    assert "by " + str(folder / "inbox" / "foo.json.tmp") + ": a send is writing it, or one that crashed left it" \
        in taken.json()["error"]["message"]


def test_sigkill_at_random_moments_never_shows_a_partial_message(project, consumer_factory):
    folder = project.session()
    inbox = folder / "inbox"
    _seed_foreign(inbox)
    consumer = consumer_factory(folder)
    image = project.root.parent / "a.png"
    image.write_bytes(PNG)
    rng = random.Random(20261130)
    argv = ["inbox", "send", "--no-wait", "--image", str(image)]
    runs = []
    for _ in range(3):
        took, calibration = timed_run([*argv, "calibrate"], cwd=project.root, env=project.env())
        assert calibration.code == 0, calibration.err
        runs.append(took)
    killer = RandomKiller(rng, sorted(runs)[1], 0.2, 1.0)
    sent = 0
    # forty sends at least, and forty kills (a send that ended first is not one) unless 120 sends did
    # not get them (a loaded machine stretches the runs)
    while sent < 40 or (killer.kills < 40 and sent < 120):
        killer.run([*argv, f"img-{sent}"], cwd=project.root, env=project.env())
        sent += 1
    kills = killer.kills
    records = consumer.stop()
    assert kills >= 5, "the kill window missed every writer; the test proved nothing"
    assert [r for r in records if "violation" in r] == []
    assert all(r["image"] == "png" for r in records), "a message became visible without its sidecar"
    project.run("inbox", "clean", "--older-than", "0")
    assert _visible_messages(inbox) == []
    leftovers = sorted(p.name for p in inbox.iterdir() if p.is_file() and p.name not in FOREIGN)
    assert leftovers == []
    consumed = {r["text"] for r in records}
    assert "calibrate" in consumed and len(consumed) >= 1 + sent - kills
    print(f"\nsigkill: {kills} writers killed, {len(consumed)} messages consumed intact")

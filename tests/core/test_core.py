"""Core primitives: error codes, durations and times, atomic writes, directories, locks."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from sxctl import fsio
from sxctl.clock import FakeClock
from sxctl.errors import EXIT_BY_CODE, ConflictError, ErrorCode, InvalidDataError, SxctlError, UsageError
from sxctl.locks import writer_lock
from sxctl.scratch import scratch_writes
from sxctl.timeparse import format_duration_ms, format_relative_ms, parse_duration_ms, parse_time_ms


def test_every_spec_error_code_maps_to_its_exit_status():
    expected = {
        "internal": 1, "usage": 2, "invalid_value": 2, "unsupported": 2, "project_not_found": 3,
        "session_not_found": 3, "stem_not_found": 3, "file_not_found": 3, "slots_full": 4,
        "key_conflict": 4, "name_taken": 4, "retracted": 4, "lost_update": 4, "invalid_data": 5,
        "clock_behind": 5, "timeout": 6, "too_late": 7, "os_refused": 8, "doctor_failed": 9, "run_failed": 10, "expired": 12, "interrupted": 130,
        "key_not_set": 3,
    }
    for code, exit_code in expected.items():
        assert SxctlError("x", code=ErrorCode(code)).exit_code == exit_code
    assert set(EXIT_BY_CODE.values()) == {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 130}
    with pytest.raises(ValueError):
        ErrorCode("no_such_code")


def test_error_document_shape():
    error = InvalidDataError("/p/callbacks.json", '"slots" is not an array')
    assert error.document() == {
        "ok": False,
        "error": {
            "code": "invalid_data", "exit": 5, "file": "/p/callbacks.json",
            "message": 'invalid data in /p/callbacks.json: "slots" is not an array',
        },
    }
    assert ConflictError("busy", details={"stem": "s"}).document()["stem"] == "s"


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90", 90_000), ("1.5", 1500), ("250ms", 250), ("30s", 30_000), ("5m", 300_000),
     ("1h30m", 5_400_000), ("7d", 604_800_000), ("1h0m5s", 3_605_000), ("0", 0), (".5s", 500),
     ("1H", 3_600_000), ("250MS", 250)],
)
def test_parse_duration(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "abc", "5x", "1h1h", "-5", "1m h", "5 m", "1M", "1h30M"])  # M: a month?
def test_parse_duration_rejects(text):
    with pytest.raises(UsageError) as info:
        parse_duration_ms(text)
    assert repr(text) in info.value.message


def test_parse_time_absolute_and_naive():
    assert parse_time_ms("2026-09-21T06:30:00Z") == (1789972200000, False)
    assert parse_time_ms("2026-09-21T08:30:00+02:00") == (1789972200000, False)
    assert parse_time_ms("2026-09-21T08:30:00+0200") == (1789972200000, False)
    assert parse_time_ms("2026-09-21 08:30", tz="Europe/Berlin") == (1789972200000, True)
    assert parse_time_ms("2026-09-21T06:30:00") == (1789972200000, True)  # UTC by default


def test_parse_time_dst_gaps_and_folds():
    # Berlin 2026-03-29 02:30 does not exist; 2026-10-25 02:30 happens twice.
    with pytest.raises(UsageError, match="does not exist in the requested timezone"):
        parse_time_ms("2026-03-29T02:30", tz="Europe/Berlin")
    with pytest.raises(UsageError, match="requires earlier or later fold"):
        parse_time_ms("2026-10-25T02:30", tz="Europe/Berlin")
    earlier, _ = parse_time_ms("2026-10-25T02:30", tz="Europe/Berlin", fold="earlier")
    later, _ = parse_time_ms("2026-10-25T02:30", tz="Europe/Berlin", fold="later")
    assert earlier == parse_time_ms("2026-10-25T00:30Z")[0]  # CEST, UTC+2
    assert later == parse_time_ms("2026-10-25T01:30Z")[0]  # CET, UTC+1


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("2026-09-21T06:30Z", {"tz": "UTC"}, "An offset-bearing timestamp cannot also specify a timezone"),
        ("2026-09-21T06:30Z", {"fold": "later"}, "Fold selection is legal only for a naive"),
        ("2026-09-21T25:30", {}, "Invalid naive wall-clock timestamp"),
        ("tomorrow", {}, "Invalid naive wall-clock timestamp"),
        ("2026-09-21T06:30", {"tz": "Mars/Olympus"}, "Invalid wall-clock timezone"),
        ("2026-13-21T06:30Z", {}, "Invalid offset-bearing timestamp"),
    ],
)
def test_parse_time_errors(text, kwargs, message):
    with pytest.raises(UsageError, match=message):
        parse_time_ms(text, **kwargs)


def test_human_durations():
    assert format_duration_ms(800) == "0.8s"
    assert format_duration_ms(12_000) == "12s"
    assert format_duration_ms(192_000) == "3m12s"
    assert format_duration_ms(11_520_000) == "3h12m"
    assert format_relative_ms(12_000, 0) == "in 0m12s"
    assert format_relative_ms(0, 180_000) == "3m0s ago"


def test_fake_clock_sleep_advances_both_clocks():
    clock = FakeClock(1000)
    clock.sleep(1.5)
    assert clock.now_ms() == 2500 and clock.monotonic() == 1001.5


# --- atomic writes ---------------------------------------------------------------------------

def test_atomic_write_creates_0600_and_replaces(tmp_path):
    target = tmp_path / "f.json"
    fsio.atomic_write(target, b"one")
    assert target.read_bytes() == b"one"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    fsio.atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["f.json"]


def test_scratch_writes_skip_fsync_only_below_the_scratch_folder(tmp_path, monkeypatch):
    """`cron simulate`'s copy is scratch: its writes are not fsynced. A write anywhere else, or
    through a link in the scratch folder that leads out of it, still is."""
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(fsio.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    scratch, outside = tmp_path / "scratch", tmp_path / "project"
    scratch.mkdir()
    outside.mkdir()
    (scratch / "out").symlink_to(outside)
    with scratch_writes(scratch):
        fsio.atomic_write(scratch / "store.json", b"{}")
        assert synced == []
        fsio.atomic_write(outside / "store.json", b"{}")
        assert len(synced) == 2  # the file, then its folder
        fsio.atomic_write(scratch / "out" / "ledger.json", b"{}")
        assert len(synced) == 4
    fsio.atomic_write(scratch / "store.json", b"[]")
    assert len(synced) == 6  # the block is over: durable again
    assert (scratch / "store.json").read_bytes() == b"[]" and (outside / "ledger.json").read_bytes() == b"{}"


def test_a_lock_in_the_scratch_folder_is_the_process_own_and_one_through_a_link_out_is_taken(tmp_path):
    """`cron simulate`'s copy has one writer: its scheduler locks are held without a lock
    directory. A sentinel anywhere else, or reached through a link that leads out, is locked
    on disk as always."""
    from sxctl.locks import MkdirLock

    scratch, outside = tmp_path / "scratch", tmp_path / "project"
    scratch.mkdir()
    outside.mkdir()
    (scratch / "out").symlink_to(outside)
    with scratch_writes(scratch):
        with MkdirLock(scratch / "cron-jobs.lock", boot_id="sxctl-a", wait_s=0, what="the store") as lock:
            lock.check_held()
            assert sorted(os.listdir(scratch)) == ["out"]  # no sentinel, no lock directory, no note
        with MkdirLock(scratch / "out" / "cron-jobs.lock", boot_id="sxctl-a", wait_s=0, what="the store"):
            assert "cron-jobs.lock.lock" in os.listdir(outside)
            with pytest.raises(ConflictError):  # a real lock: a second holder waits, then is refused
                MkdirLock(outside / "cron-jobs.lock", boot_id="sxctl-b", wait_s=0, what="the store").acquire()
    assert "cron-jobs.lock.lock" not in os.listdir(outside)


def test_atomic_write_keeps_mode_of_existing_file_when_asked(tmp_path):
    target = tmp_path / "callbacks.json"
    target.write_bytes(b"{}")
    os.chmod(target, 0o644)
    fsio.atomic_write(target, b"new", keep_mode=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    fsio.atomic_write(target, b"newer")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_atomic_write_refuses_symlinked_target(tmp_path):
    real = tmp_path / "real"
    real.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(SxctlError) as info:
        fsio.atomic_write(link, b"evil")
    assert info.value.exit_code == 5 and str(link) in info.value.message
    assert real.read_bytes() == b"keep" and sorted(os.listdir(tmp_path)) == ["link", "real"]


def test_atomic_write_never_follows_a_symlinked_temp_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    temp = tmp_path / "f.json.tmp"
    temp.symlink_to(victim)
    with pytest.raises(FileExistsError):
        fsio.atomic_write(tmp_path / "f.json", b"x", temp=temp)
    assert victim.read_bytes() == b"keep"


def test_failed_precommit_removes_the_temp_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"old")

    def refuse():
        raise ConflictError("moved", code=ErrorCode.REV_MOVED)

    with pytest.raises(ConflictError):
        fsio.atomic_write(target, b"new", precommit=refuse)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]


def test_link_create_never_clobbers(tmp_path):
    target = tmp_path / "record.json"
    fsio.link_create(target, b"first")
    with pytest.raises(FileExistsError):
        fsio.link_create(target, b"second")
    assert target.read_bytes() == b"first" and os.listdir(tmp_path) == ["record.json"]


def test_pending_file_discard_never_removes_a_successor_temp(tmp_path):
    target = tmp_path / "s.json"
    first = fsio.PendingFile(target, tmp_path / "s.json.tmp")
    first.write_all(b"a")
    first.commit()
    successor = fsio.PendingFile(target, tmp_path / "s.json.tmp")  # same temp name, new owner
    first.discard()
    assert (tmp_path / "s.json.tmp").exists()
    successor.discard()
    assert not (tmp_path / "s.json.tmp").exists()


def test_a_temp_is_abandoned_only_when_no_live_writer_holds_it(tmp_path):
    """A writer holds its temp (a lock) until it publishes it; the kernel drops the lock of a
    writer that dies. Only then, and only for a temp not written just now, is it removed."""
    import signal
    import subprocess
    import sys

    def aged(path):
        os.utime(path, ns=(10**18, 10**18))  # written long before `written_before_ms` below
        return path

    now_ms = 10**12 + 10**9  # after the aged mtime (10**18 ns = 10**12 ms)
    live = fsio.PendingFile(tmp_path / "a.json", tmp_path / "a.json.tmp")
    live.write_all(b"{}")
    assert fsio.remove_if_abandoned(aged(tmp_path / "a.json.tmp"), now_ms) is False  # its writer is alive
    assert (tmp_path / "a.json.tmp").exists()
    live.commit()  # published: the lock went with it
    assert (tmp_path / "a.json").exists() and not (tmp_path / "a.json.tmp").exists()

    killed = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom sxctl import fsio\n"
                               "fsio.PendingFile(sys.argv[1] + '/b.json', sys.argv[1] + '/b.json.tmp')\n"
                               "print('held', flush=True)\ntime.sleep(60)", str(tmp_path)], stdout=subprocess.PIPE)
    assert killed.stdout.readline() == b"held\n"
    assert fsio.remove_if_abandoned(aged(tmp_path / "b.json.tmp"), now_ms) is False  # still alive
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert fsio.remove_if_abandoned(tmp_path / "b.json.tmp", 10**12 + 500) is False  # written "just now"
    assert fsio.remove_if_abandoned(tmp_path / "b.json.tmp", now_ms) is True
    assert not (tmp_path / "b.json.tmp").exists()
    (tmp_path / "c.json.tmp").mkdir()  # not a file sxctl writes: named, and left alone
    with pytest.raises(InvalidDataError, match="not a regular file"):
        fsio.remove_if_abandoned(aged(tmp_path / "c.json.tmp"), now_ms)
    assert (tmp_path / "c.json.tmp").is_dir()
    later = fsio.PendingFile(tmp_path / "d.json", tmp_path / "d.json.tmp")  # a writer that dies …
    later.write_all(b"{}")
    os.close(later._fd)  # … (its lock goes with its descriptor)
    later._fd = None
    os.utime(tmp_path / "d.json.tmp", ns=(2 * 10**18, 2 * 10**18))  # … written while the clock was far ahead
    assert fsio.remove_if_abandoned(tmp_path / "d.json.tmp", now_ms) is True
    assert fsio.remove_if_abandoned(tmp_path / "gone.json.tmp", now_ms) is True


def test_ensure_private_dir(tmp_path):
    folder = fsio.ensure_private_dir(tmp_path / "inbox")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert fsio.ensure_private_dir(folder) == folder
    (tmp_path / "file").write_text("x")
    with pytest.raises(SxctlError):
        fsio.ensure_private_dir(tmp_path / "file")
    with pytest.raises(SxctlError) as info:
        fsio.ensure_private_dir(tmp_path / "missing" / "inbox")
    assert info.value.exit_code == 3


# --- locks -----------------------------------------------------------------------------------

def test_writer_lock_times_out_with_lock_busy(tmp_path):
    lock_path = tmp_path / ".sxctl-callbacks.lock"
    held = threading.Event()
    release = threading.Event()

    def holder():
        with writer_lock(lock_path, 5, "callbacks"):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(ConflictError) as info, writer_lock(lock_path, 0.2, "callbacks"):
            pass
        assert info.value.code == "lock_busy" and info.value.exit_code == 4
    finally:
        release.set()
        thread.join()
    with writer_lock(lock_path, 1, "callbacks"):
        assert stat.S_IMODE(lock_path.stat().st_mode) == 0o600


def test_only_a_file_this_process_wrote_in_its_scratch_copy_is_read_back_unchecked(tmp_path):
    """`cron simulate` reads back its own files without checking them again (they are sxctl's
    output); a file copied into the copy, changed by anyone since, or outside it is checked."""
    from sxctl.cron.policy.file import ROOT
    from sxctl.cron.store.schema_kit import read_checked_file

    scratch, outside = tmp_path / "scratch", tmp_path / "project"
    scratch.mkdir()
    outside.mkdir()
    bad = b'{"formatVersion": 9, "jobs": {}}'
    with scratch_writes(scratch):
        for folder in (scratch, outside):
            fsio.atomic_write(folder / "sxctl-policy.json", bad)
        assert fsio.written_here(str(scratch / "sxctl-policy.json"))
        assert read_checked_file(scratch / "sxctl-policy.json", 1 << 20, "policy", ROOT)["formatVersion"] == 9
        with pytest.raises(InvalidDataError):  # outside the scratch folder: checked as always
            read_checked_file(outside / "sxctl-policy.json", 1 << 20, "policy", ROOT)
        (scratch / "copied.json").write_bytes(bad)  # a copy of the user's file, not written by sxctl
        with pytest.raises(InvalidDataError):
            read_checked_file(scratch / "copied.json", 1 << 20, "policy", ROOT)
        (scratch / "sxctl-policy.json").write_bytes(bad + b" ")  # changed since: checked again
        with pytest.raises(InvalidDataError):
            read_checked_file(scratch / "sxctl-policy.json", 1 << 20, "policy", ROOT)
    fsio.atomic_write(scratch / "sxctl-policy.json", bad)  # the block is over: checked as always
    with pytest.raises(InvalidDataError):
        read_checked_file(scratch / "sxctl-policy.json", 1 << 20, "policy", ROOT)

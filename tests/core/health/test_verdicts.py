"""Verdicts that data which lies cannot fool: `doctor` on a heartbeat it cannot trust, every
validation path on sxctl's policy file as well as comis's files, the exit code of a file the
operating system refuses, a ledger a tail read sees to its start, and output cut by a closed pipe."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from tests.conftest import EXAMPLES, heartbeat_file, now_ms

HOUR = 3_600_000


def checks(result, name: str) -> list[dict]:
    return [c for c in result.json()["checks"] if c["check"] == name]


def scheduled(project, *, at_ms: int) -> Path:
    """A live agent, a job scheduled every hour, and one pass at `at_ms` (its heartbeat)."""
    project.session()
    assert project.run("cron", "add", "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "x",
                       clock=FakeClock(at_ms)).code == 0
    assert project.run("cron", "tick", clock=FakeClock(at_ms)).code == 0
    beat = heartbeat_file(project.root)
    assert json.loads(beat.read_text())["lastPassMs"] == at_ms
    return beat


# --- item 5: doctor and the heartbeat -----------------------------------------------------------------

def _empty(beat: Path, now: int) -> None:
    beat.write_bytes(b"")


def _truncated(beat: Path, now: int) -> None:
    beat.write_bytes(beat.read_bytes()[:30])


def _folder(beat: Path, now: int) -> None:
    beat.unlink()
    beat.mkdir()


def _fifo(beat: Path, now: int) -> None:
    beat.unlink()
    os.mkfifo(beat)


def _a_day_ahead(beat: Path, now: int) -> None:
    doc = json.loads(beat.read_text())
    beat.write_text(json.dumps({**doc, "lastPassMs": now + 24 * HOUR}))


def _bare_time(beat: Path, now: int) -> None:
    beat.write_text(json.dumps({"lastPassMs": now}))  # fresh, but not a record any pass writes


def _text_time(beat: Path, now: int) -> None:
    doc = json.loads(beat.read_text())
    beat.write_text(json.dumps({**doc, "lastPassMs": str(now)}))


@pytest.mark.parametrize("spoil", [_empty, _truncated, _folder, _fifo, _a_day_ahead, _bare_time, _text_time])
def test_doctor_fails_on_a_heartbeat_it_cannot_trust(project, spoil):
    start = now_ms() - 2 * HOUR
    beat = scheduled(project, at_ms=start)
    now = start + 2 * HOUR  # no pass for two hours
    spoil(beat, now)
    result = project.run("doctor", "--json", clock=FakeClock(now))
    assert result.code == 9, result.out
    assert result.json()["error"]["code"] == "doctor_failed"
    [check] = checks(result, "scheduler")
    assert check["status"] == "fail" and str(beat) in check["message"], check
    assert check["fix"], check
    human = project.run("doctor", clock=FakeClock(now))
    assert human.code == 9 and "FAIL  scheduler" in human.out and "fix: " in human.out


def test_doctor_fails_on_a_well_formed_heartbeat_two_hours_old(project):
    start = now_ms() - 2 * HOUR
    scheduled(project, at_ms=start)
    result = project.run("doctor", "--json", clock=FakeClock(start + 2 * HOUR))
    assert result.code == 9
    [check] = checks(result, "scheduler")
    assert check["status"] == "fail" and "no scheduler pass for 2h0m" in check["message"]
    assert check["fix"].startswith("sxctl cron export --target crontab --install")


def test_doctor_fails_with_scheduled_jobs_and_no_heartbeat(project):
    start = now_ms()
    beat = scheduled(project, at_ms=start)
    beat.unlink()
    result = project.run("doctor", "--json", clock=FakeClock(start + 60_000))
    assert result.code == 9
    [check] = checks(result, "scheduler")
    assert check["status"] == "fail" and "no scheduler pass has ever run here" in check["message"]
    assert check["fix"].startswith("sxctl cron export")
    quiet = project.run("-q", "doctor", clock=FakeClock(start + 60_000))  # a monitor: the failing checks only
    assert quiet.code == 9 and quiet.out.splitlines()[0].startswith("FAIL  scheduler  ")
    assert "fix: sxctl cron export" in quiet.out and not any(line.startswith("ok") for line in quiet.out.splitlines())


@pytest.mark.parametrize(("ahead_ms", "code"), [(50_000, 0), (61_000, 9), (-150_000, 0)])
def test_doctor_allows_a_minute_between_the_clocks(project, ahead_ms, code):
    """A heartbeat up to a minute ahead of this clock is one machine's clock a little off; more is
    a clock that disagrees with the one that wrote it (and a pass 150 s ago is fine)."""
    start = now_ms()
    scheduled(project, at_ms=start)
    result = project.run("doctor", "--json", clock=FakeClock(start - ahead_ms))
    assert result.code == code, result.out
    [check] = checks(result, "scheduler")
    assert check["status"] == ("ok" if code == 0 else "fail"), check
    if code:
        assert "clock" in check["message"] and "ahead" in check["message"] and check["fix"]


def test_an_unreadable_heartbeat_without_scheduled_jobs_is_a_warning(project):
    start = now_ms()
    beat = scheduled(project, at_ms=start)
    assert project.run("cron", "pause", "hourly").code == 0
    beat.write_bytes(b"")
    result = project.run("doctor", "--json", clock=FakeClock(start + 2 * HOUR))
    assert result.code == 0, result.out
    [check] = checks(result, "scheduler")
    assert check["status"] == "warn" and str(beat) in check["message"] and check["fix"]


def test_the_heartbeat_a_pass_writes_is_trusted(project):
    start = now_ms()
    scheduled(project, at_ms=start)
    result = project.run("doctor", "--json", clock=FakeClock(start + 60_000))
    assert result.code == 0, result.out
    [check] = checks(result, "scheduler")
    assert check["status"] == "ok" and "last pass 1m0s ago" in check["message"]


def test_a_heartbeat_copied_with_the_project_is_not_a_pass_here(project):
    """`cp -a` of a project copies the original's heartbeat: the copy has no pass of its own, so
    doctor fails there (and still trusts the original's)."""
    start = now_ms()
    scheduled(project, at_ms=start)
    copy = project.root.parent / "copy"
    shutil.copytree(project.root, copy, symlinks=True)
    result = project.run("--project", str(copy), "doctor", "--json", clock=FakeClock(start + 60_000))
    assert result.code == 9, result.out
    [check] = checks(result, "scheduler")
    assert check["status"] == "fail" and check["message"] == (
        f"1 scheduled job(s) and the heartbeat was written by a pass for {os.path.realpath(project.root)} "
        "(this workspace was copied or moved from there): no pass is known to run here")
    assert check["fix"].startswith("sxctl cron export --target crontab --install")
    [original] = checks(project.run("doctor", "--json", clock=FakeClock(start + 60_000)), "scheduler")
    assert original["status"] == "ok"


def test_a_pass_keeps_its_heartbeat_within_its_size(project, monkeypatch):
    """A failed pass records its error; a long one is cut, so the heartbeat stays readable."""
    from sxctl.cron.run import heartbeat
    from sxctl.cron.store.workspace import Workspace

    (project.root / ".scheduler").mkdir()
    ws = Workspace(project.root)
    heartbeat.record_pass(ws, "failed", detail="x" * (2 * heartbeat.FILE_CAP))
    doc = heartbeat.read_heartbeat(ws)
    assert doc is not None and "invalid" not in doc and doc["outcome"] == "failed"
    assert len(doc["detail"]) < heartbeat.FILE_CAP


# --- item 6: the policy file is validated wherever the store is -----------------------------------------

@pytest.fixture
def bad_policy(project):
    start = now_ms()
    scheduled(project, at_ms=start)
    policy = project.root / ".scheduler" / "sxctl-policy.json"
    policy.write_text(json.dumps({"formatVersion": 1, "jobs": {"j": {"surprise": 1}}}))
    return policy


def test_cron_validate_checks_the_policy_file(project, bad_policy):
    before = bad_policy.read_bytes()
    result = project.run("cron", "validate", "--json")
    assert result.code == 5, result.out
    error = result.json()["error"]
    assert error["file"] == str(bad_policy) and "surprise" in error["message"]
    assert [p["file"] for p in result.json()["problems"]] == [str(bad_policy)]
    human = project.run("cron", "validate")
    assert human.code == 5 and f"{bad_policy}: invalid_data:" in human.err
    assert bad_policy.read_bytes() == before


def test_cron_status_says_which_file_is_invalid(project, bad_policy):
    doc = project.run("cron", "status", "--json").json()
    assert doc["policyValid"] is False and doc["strictAuthoritiesValid"] is True
    assert doc["policy"]["exists"] is True and doc["policy"]["bytes"] == bad_policy.stat().st_size
    assert [p["file"] for p in doc["problems"] if p["code"] == "invalid_data"] == [str(bad_policy)]
    human = project.run("cron", "status")
    assert human.code == 0 and "valid       NO (sxctl-policy.json)" in human.out, human.out


def test_status_names_the_policy_file_not_the_store(project, bad_policy):
    doc = project.run("status", "--json").json()
    [problem] = [p for p in doc["problems"] if p["code"].startswith("cron_")]
    assert problem["code"] == "cron_policy_invalid" and problem["file"] == str(bad_policy)
    assert doc["cron"]["invalid_file"] == str(bad_policy)
    human = project.run("status").out
    assert "cron     sxctl-policy.json invalid" in human and "store invalid" not in human


def test_status_names_an_invalid_ledger(project):
    start = now_ms()
    scheduled(project, at_ms=start)
    ledger = project.root / ".scheduler" / "cron-executions.jsonl"
    ledger.write_text("{broken\n")
    doc = project.run("status", "--json").json()
    [problem] = [p for p in doc["problems"] if p["code"].startswith("cron_")]
    assert problem["code"] == "cron_ledger_invalid" and problem["file"] == str(ledger)


def test_doctor_and_tick_name_the_policy_file(project, bad_policy):
    result = project.run("doctor", "--json")
    assert result.code == 9
    failed = [c for c in result.json()["checks"] if c["status"] == "fail"]
    assert failed and all(str(bad_policy) in c["message"] and c["fix"] for c in failed), failed
    tick = project.run("cron", "tick", "--json")
    assert tick.code == 5 and tick.json()["error"]["file"] == str(bad_policy)


# --- item 11: the operating system's refusals are exit 8 -----------------------------------------------

_real_open = os.open


def _refuse_reading(monkeypatch, target: Path) -> None:
    """Permission denied on `target` (chmod 000 denies nothing to root, who runs CI containers)."""
    def refusing_open(path, flags, *args, **kwargs):
        if os.fspath(path) == str(target) and not flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return _real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)


@pytest.mark.parametrize(("name", "args"), [
    ("cron-jobs.json", ["cron", "list"]),
    ("cron-jobs.json", ["cron", "validate"]),
    ("sxctl-policy.json", ["cron", "list"]),
    ("sxctl-policy.json", ["cron", "validate"]),
    ("cron-executions.jsonl", ["cron", "runs", "--all-jobs"]),
    ("cron-executions.jsonl", ["cron", "runs", "--all-jobs", "--exact"]),
    ("cron-executions.jsonl", ["cron", "validate"]),
])
def test_permission_denied_on_a_cron_file_is_exit_8(project, monkeypatch, name, args):
    start = now_ms()
    scheduled(project, at_ms=start)
    path = project.root / ".scheduler" / name
    assert project.run("cron", "update", "hourly", "--max-runs", "5").code == 0  # a policy file exists
    assert path.exists()
    _refuse_reading(monkeypatch, path)
    result = project.run(*args, "--json")
    assert result.code == 8, result.out
    error = result.json()["error"]
    assert error["code"] == "os_refused" and "Permission denied" in error["message"] and error["file"] == str(path)


def test_status_names_a_cron_file_it_may_not_read(project, monkeypatch):
    """`status` is one screen of everything: a refused file is one named problem there, not the end."""
    start = now_ms()
    scheduled(project, at_ms=start)
    assert project.run("cron", "update", "hourly", "--max-runs", "5").code == 0
    policy = project.root / ".scheduler" / "sxctl-policy.json"
    _refuse_reading(monkeypatch, policy)
    result = project.run("status", "--json")
    assert result.code == 0, result.out
    [problem] = [p for p in result.json()["problems"] if p["code"].startswith("cron_")]
    assert problem["code"] == "cron_policy_unreadable" and problem["file"] == str(policy)
    assert "Permission denied" in problem["message"]
    assert "cron     sxctl-policy.json unreadable" in project.run("status").out


def test_doctor_with_an_unreadable_sessions_folder_is_exit_9(project, monkeypatch):
    start = now_ms()
    scheduled(project, at_ms=start)
    sessions = project.root / ".scorpiox" / "sessions"
    real_scandir = os.scandir

    def scandir(path=".", *args, **kwargs):
        if os.fspath(path) == str(sessions):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    result = project.run("doctor", "--json", clock=FakeClock(start + 60_000))
    assert result.code == 9, result.out
    [check] = checks(result, "sessions")
    assert check["status"] == "fail" and str(sessions) in check["message"] and "Permission denied" in check["message"]
    assert check["fix"] and str(sessions) in check["fix"]


# --- item 12: a ledger read to its start, and a closed pipe ---------------------------------------------

@pytest.fixture
def ledger_ws(project):
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    shutil.copy(EXAMPLES / "cron-jobs.json", scheduler / "cron-jobs.json")
    return scheduler / "cron-executions.jsonl"


def test_a_tail_read_that_reaches_the_start_rejects_a_terminal_without_start(project, ledger_ws):
    """The first row is the terminal of another job's run whose start is gone: comis rejects the
    ledger, and so does every read that gets that far."""
    rows = (EXAMPLES / "cron-executions.jsonl").read_text().splitlines(keepends=True)
    ledger_ws.write_text("".join(rows[1:]))
    before = ledger_ws.read_bytes()
    for args in (["next-check-in"], ["--all-jobs"], ["stretch-reminder"]):
        result = project.run("cron", "runs", *args, "--json")
        assert result.code == 5, (args, result.out)
        error = result.json()["error"]
        assert "Cron execution terminal has no start (line 1;" in error["message"] and error["file"] == str(ledger_ws)
    assert ledger_ws.read_bytes() == before


def test_a_tail_read_of_interleaved_runs_waits_for_their_starts(project, ledger_ws):
    """Two runs whose rows interleave (start A, start B, terminal A, terminal B) are a valid
    ledger: reading its tail for one run must not take A's start, still ahead, for missing."""
    rows = [json.loads(line) for line in (EXAMPLES / "cron-executions.jsonl").read_text().splitlines()]
    first, second = rows[2:4], rows[4:6]  # two runs of next-check-in, the later one settled later
    ordered = [first[0], second[0], first[1], second[1]]
    ledger_ws.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in ordered))
    tail = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--json")
    assert tail.code == 0, tail.out
    exact = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--exact", "--json")
    assert tail.json()["runs"] == exact.json()["runs"] and len(tail.json()["runs"]) == 1
    ordered = [first[0], second[0], second[1], first[1]]  # the earlier run settled last
    ledger_ws.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in ordered))
    tail = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--json")
    exact = project.run("cron", "runs", "--all-jobs", "--limit", "1", "--exact", "--json")
    assert tail.code == 0 and tail.json()["runs"] == exact.json()["runs"], tail.out


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("flags", [["--json"], []], ids=["json", "human"])
def test_output_cut_by_a_closed_pipe_exits_141(project, unbuffered, flags):
    """`sxctl cron next … | head -c 10`: whatever the output and however Python buffers it, the
    reader going away is exit 141 and silence, never a 0 for a document cut short."""
    env = project.env()
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)  # far less than the output: the writer must block
    proc = subprocess.Popen([sys.executable, "-m", "sxctl", "cron", "next", "--cron", "* * * * *", "-n", "1000",
                             *flags], stdout=write_end, stderr=subprocess.PIPE, cwd=project.root, env=env)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb", buffering=0) as reader:
            assert len(reader.read(10)) == 10
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 141, err
        assert err == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- a clock that lies ----------------------------------------------------------------------------

def test_a_clock_set_back_before_the_last_run_stops_the_pass_and_changes_nothing(project):
    """A pass whose clock is behind what the ledger already holds would take the past for the
    future (a run again, a limit's day counted twice): it stops with clock_behind, exit 5, and
    leaves the store, the ledger and the policy file byte for byte."""
    start = now_ms()
    project.session()
    assert project.run("cron", "add", "hourly", "--every", "1h", "--payload", "heartbeat-event", "--text", "x",
                       "--max-runs-per-day", "1", clock=FakeClock(start)).code == 0
    ran = project.run("cron", "run", "hourly", "--json", clock=FakeClock(start + 60_000))
    assert ran.json()["triggered"], ran.err  # a ledger row (the run itself fails: exit 10, no live agent)
    folder = project.root / ".scheduler"
    files = {name: (folder / name).read_bytes() for name in ("cron-jobs.json", "cron-executions.jsonl",
                                                              "sxctl-policy.json")}
    behind = project.run("cron", "tick", "--json", clock=FakeClock(start - HOUR))
    assert behind.code == 5 and behind.json()["error"]["code"] == "clock_behind", behind.out + behind.err
    assert {name: (folder / name).read_bytes() for name in files} == files


# --- a scheduler that cannot run: a lock no pass gets, a pass that looks elsewhere -------------------

def test_a_lock_stamped_in_the_future_keeps_every_pass_busy_and_doctor_fails(project):
    """A lock directory with a future mtime is never stale by the 30-second rule: every pass finds
    the lock busy (exit 0 with --busy-ok). doctor fails it twice: the lock is stamped ahead of the
    clock, and the passes have found the lock busy for more than 15 minutes."""
    start = now_ms()
    scheduled(project, at_ms=start)
    lock = project.root / ".scheduler" / "cron-jobs.lock.lock"
    lock.mkdir()
    year = 365 * 24 * 3600
    os.utime(lock, (start / 1000 + year, start / 1000 + year))
    for minute in (1, 10, 17):
        busy = project.run("cron", "tick", "--busy-ok", "--json", clock=FakeClock(start + minute * 60_000))
        assert busy.code == 0 and busy.json()["skipped"], busy.out
    beat = json.loads(heartbeat_file(project.root).read_text())
    assert (beat["outcome"], beat["busySinceMs"]) == ("busy", start + 60_000)
    result = project.run("doctor", "--json", clock=FakeClock(start + 17 * 60_000))
    assert result.code == 9, result.out
    [scheduler] = checks(result, "scheduler")
    assert scheduler["status"] == "fail" and "every pass for 16m0s found the store lock busy" in \
        scheduler["message"], scheduler
    [locks] = checks(result, "locks")
    assert locks["status"] == "fail" and "ahead of this clock" in locks["message"] and str(lock) in locks["fix"]
    lock.rmdir()  # the fix; the next pass runs and the streak ends
    assert project.run("cron", "tick", clock=FakeClock(start + 18 * 60_000)).code == 0
    beat = json.loads(heartbeat_file(project.root).read_text())
    assert (beat["outcome"], beat["busySinceMs"]) == ("ok", None)
    again = project.run("doctor", "--json", clock=FakeClock(start + 18 * 60_000))
    assert [c["status"] for c in checks(again, "scheduler") + checks(again, "locks")] == ["ok", "ok"], again.out


def test_a_pass_that_found_no_store_is_a_failure_when_this_workspace_has_jobs(project):
    """The installed pass looks at another workspace (it records `no_store` every minute) while
    this one holds scheduled jobs: nothing runs them, so doctor fails instead of saying ok."""
    start = now_ms()
    beat = scheduled(project, at_ms=start)
    doc = json.loads(beat.read_text())
    beat.write_text(json.dumps({**doc, "outcome": "no_store", "lastPassMs": start + 60_000}))
    result = project.run("doctor", "--json", clock=FakeClock(start + 90_000))
    assert result.code == 9, result.out
    [check] = checks(result, "scheduler")
    assert check["status"] == "fail" and "looks at another workspace" in check["message"], check


def test_an_edit_with_the_clock_behind_the_last_run_cannot_re_arm_it(project):
    """A job ran its 08:05 occurrence; with the clock set back to 08:04:30, `cron update` would
    recompute the next run as 08:05 again and the next pass would run it a second time. The
    edit stops with clock_behind (exit 5) and changes nothing, as the pass does (the model-based
    test found it)."""
    base = (now_ms() // 300_000 + 1) * 300_000  # the next 5-minute boundary
    folder = project.session()
    (folder / "stats.json").write_text(json.dumps({"updated_ms": base, "model": "m"}))  # live at `base`
    assert project.run("cron", "add", "a", "--cron", "*/5 * * * *", "--payload", "heartbeat-event", "--text", "x",
                       clock=FakeClock(base - 60_000)).code == 0
    ran = project.run("cron", "tick", "--json", clock=FakeClock(base))
    assert [r["status"] for r in ran.json()["runs"]] == ["dispatched"], ran.out
    store = project.root / ".scheduler" / "cron-jobs.json"
    before = store.read_bytes()
    edit = project.run("cron", "update", "a", "--cron", "*/5 * * * *", "--json", clock=FakeClock(base - 30_000))
    assert edit.code == 5 and edit.json()["error"]["code"] == "clock_behind", edit.out
    assert store.read_bytes() == before
    again = project.run("cron", "tick", "--json", clock=FakeClock(base + 1_000))
    assert again.json()["runs"] == [], again.out


def test_doctor_names_a_crontab_block_left_for_a_moved_project(project):
    """`mv` of a project leaves its crontab block running a failing pass in the old folder every
    minute: doctor, run in the new folder, names it and how to remove it."""
    project.session()
    assert project.run("cron", "export", "--target", "crontab", "--install").code == 0
    assert checks(project.run("doctor", "--json"), "crontab blocks") == []
    old = os.path.realpath(project.root)
    moved = project.root.parent / "moved"
    project.root.rename(moved)
    result = project.run("doctor", "--json", cwd=moved)
    [check] = checks(result, "crontab blocks")
    assert check["status"] == "warn" and check["message"] == (
        f"your crontab runs a pass every minute in {old}, which holds no project any more (moved or deleted?); "
        "each one fails")
    assert check["fix"] == ("in the project's new folder: sxctl cron export --target crontab --install; then: "
                            f"sxctl cron export --target crontab --uninstall --project {old}")
    # the fix it names works from anywhere, though the old folder holds no project any more
    removed = project.run(*check["fix"].split("then: ")[1].split()[1:], "--json", cwd=moved)
    assert removed.code == 0 and removed.json()["action"] == "uninstalled", removed.err
    assert checks(project.run("doctor", "--json", cwd=moved), "crontab blocks") == []
    again = project.run("cron", "export", "--target", "crontab", "--uninstall", "--project", old, "--json", cwd=moved)
    assert again.code == 0 and again.json()["action"] == "unchanged"


def test_a_heartbeat_with_a_key_twice_is_not_believed(project):
    """`"outcome": "failed", "outcome": "ok"`: which one the pass wrote is unknown, so doctor
    trusts neither."""
    start = now_ms()
    beat = scheduled(project, at_ms=start)
    doc = json.loads(beat.read_text())
    doc["outcome"] = "failed"
    beat.write_text(json.dumps(doc).replace('"outcome": "failed"', '"outcome": "failed", "outcome": "ok"'))
    result = project.run("doctor", "--json", clock=FakeClock(start + 60_000))
    [check] = checks(result, "scheduler")
    assert result.code == 9 and check["status"] == "fail" and "duplicate key 'outcome'" in check["message"], check


def test_a_pass_that_cannot_record_its_heartbeat_says_so(project, tmp_path):
    start = now_ms()
    beat = scheduled(project, at_ms=start)
    beat.unlink()
    beat.symlink_to(tmp_path / "elsewhere")
    result = project.run("cron", "tick", "--json", clock=FakeClock(start + 60_000))
    assert result.code == 0 and not (tmp_path / "elsewhere").exists()
    assert result.json()["warnings"] == [
        f"this pass could not record its heartbeat (refusing to write {beat}: it is a symbolic link): "
        "`sxctl doctor` cannot show that passes run"]
    assert "warning: this pass could not record its heartbeat" in result.err


def test_doctor_fails_files_that_record_a_run_after_this_clocks_now(project):
    """A ledger written by a clock that ran ahead stops every pass (`clock_behind`); doctor says
    so even beside a fresh heartbeat, as `cron validate` does."""
    ahead = now_ms() + 2 * HOUR
    scheduled(project, at_ms=ahead)  # a clock two hours ahead ...
    assert project.run("cron", "run", "hourly", clock=FakeClock(ahead)).code == 10  # ... recorded a (failed) run
    now = ahead - HOUR
    assert project.run("cron", "validate", clock=FakeClock(now)).code == 5
    beat = heartbeat_file(project.root)
    doc = json.loads(beat.read_text())
    doc["lastPassMs"] = now
    beat.write_text(json.dumps(doc))
    result = project.run("doctor", "--json", clock=FakeClock(now))
    [check] = checks(result, "cron files")
    assert result.code == 9 and check["status"] == "fail", check
    assert "started after now: this clock is behind what cron-executions.jsonl records" in check["message"]
    assert check["fix"].startswith("sxctl cron repair --clock   #") and "timedatectl status" in check["fix"]


@pytest.mark.real_time
def test_doctor_names_stray_temps_of_the_scheduler_and_its_heartbeats_once_they_are_old(project):
    """A writer killed mid-write leaves `NAME.<uuid>.tmp`; after an hour no writer owns it and
    doctor names it — beside the store and in the per-host heartbeat folder alike."""
    now = now_ms()
    beat = scheduled(project, at_ms=now)
    fresh = beat.with_name(f"{beat.name}.sxctl-{'0' * 32}.tmp")
    old = project.root / ".scheduler" / "cron-jobs.json.0f.tmp"
    for temp in (fresh, old):
        temp.write_text("{")
    os.utime(old, ns=(0, (now - 2 * HOUR) * 1_000_000))
    [check] = checks(project.run("doctor", "--json", clock=FakeClock(now)), "temps")
    assert check["status"] == "warn" and check["message"].startswith("1 stray temp file(s)") and str(old) in check[
        "message"]
    os.utime(fresh, ns=(0, (now - 2 * HOUR) * 1_000_000))
    [check] = checks(project.run("doctor", "--json", clock=FakeClock(now)), "temps")
    assert check["message"].startswith("2 stray temp file(s)")


def test_doctor_reads_the_crontab_file_it_is_given(project, tmp_path):
    """`cron export --crontab-file F` writes a file doctor could not be pointed at (a hidden option)."""
    project.session()
    table = tmp_path / "crontab"
    assert project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(table)).code == 0
    old = os.path.realpath(project.root)
    moved = project.root.parent / "moved"
    project.root.rename(moved)
    result = project.run("doctor", "--crontab-file", str(table), "--json", cwd=moved)
    [check] = checks(result, "crontab blocks")
    assert check["status"] == "warn" and old in check["message"]
    assert "--crontab-file" in project.run("doctor", "--help", cwd=moved).out

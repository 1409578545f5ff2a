"""The execution ledger: the runs projection, tail reads, strictness, validate and evidence."""

from __future__ import annotations

import json
import os
import random
import uuid

import pytest

from sxctl.cron.run.ledger import recent_runs, scan_ledger
from sxctl.cron.run.ledger_write import append_rows
from sxctl.scratch import scratch_writes

HEARTBEAT_JOB = "e133105c-a6c1-4169-a2e1-e58c2c93357d"


def test_runs_of_a_job_from_the_examples(project, ws):
    doc = project.run("cron", "runs", "next-check-in", "--json").json()
    assert (doc["jobName"], doc["jobId"], doc["limit"], doc["exact"]) == ("next-check-in", HEARTBEAT_JOB, 20, False)
    runs = doc["runs"]
    assert [(r["status"], r["deliveryStatus"], r.get("errorKind")) for r in runs] == [
        ("unknown", "not_requested", "internal"), ("dispatched", "not_requested", None)]
    first = runs[0]
    assert first == {
        "executionId": "8a61f0d2-94c3-4b7e-a5d8-2e6f1c0b7a94", "jobId": HEARTBEAT_JOB, "agentId": "default",
        "scheduledForMs": 1789974000000, "trigger": "scheduled", "workKind": "heartbeat_event", "rootRunId": None,
        "startedAtMs": 1789974001512, "terminalAtMs": 1789974062010, "durationMs": 60498, "status": "unknown",
        "deliveryStatus": "not_requested", "errorKind": "internal",
        "outcome": {"kind": "unsettled", "reason": "owner_lost_after_start", "rootRunId": None, "errorKind": "internal"},
    }
    human = project.run("cron", "runs", "next-check-in").out
    assert "→ 2026_09_21_quiet_euler/1789972202_061734902 (queue)" in human
    all_jobs = project.run("cron", "runs", "--all-jobs", "--limit", "2", "--json").json()["runs"]
    assert [r["status"] for r in all_jobs] == ["unknown", "dispatched"]
    delivery = project.run("cron", "runs", "stretch-reminder", "--json").json()["runs"]
    assert [(r["status"], r["deliveryStatus"]) for r in delivery] == [("completed", "accepted")]


def _row(execution_id, job, record, when, *, kind="heartbeat_event", outcome=None):
    row = {"executionId": execution_id, "bootId": "sxctl-b", "jobId": job, "agentId": "default",
           "scheduledForMs": when - 100, "trigger": "scheduled", "recordType": record, "workKind": kind}
    if record == "started":
        row.update(rootRunId=None, startedAtMs=when)
    else:
        row.update(terminalAtMs=when + 10, durationMs=10,
                   outcome=outcome or {"kind": "heartbeat_event", "correlationId": "c", "queueDisposition": "accepted"})
    return row


def _write_ledger(path, groups, *, shuffle_jobs=("a", "b", "c")):
    rng = random.Random(7)
    lines = []
    when = 1_700_000_000_000
    for _ in range(groups):
        execution = str(uuid.uuid4())
        job = rng.choice(shuffle_jobs)
        lines.append(_row(execution, job, "started", when))
        lines.append(_row(execution, job, "terminal", when))
        when += 60_000
    path.write_bytes(b"".join((json.dumps(r, separators=(",", ":")) + "\n").encode() for r in lines))


def test_tail_read_equals_a_full_scan(tmp_path):
    path = tmp_path / "ledger.jsonl"
    _write_ledger(path, 3000)  # ~1.3 MB: many 64 KiB blocks, rows split across block edges
    for job in (None, "a", "c"):
        for limit in (1, 7, 20, 500):
            tail = recent_runs(path, limit, job_id=job)
            exact = recent_runs(path, limit, job_id=job, exact=True)
            assert tail == exact and len(tail) == limit


def test_open_run_at_the_end_is_started(tmp_path):
    path = tmp_path / "ledger.jsonl"
    _write_ledger(path, 3)
    with open(path, "a") as handle:
        handle.write(json.dumps(_row("open-1", "a", "started", 1_800_000_000_000), separators=(",", ":")) + "\n")
    runs = recent_runs(path, 2)
    assert runs[0]["executionId"] == "open-1" and runs[0]["status"] == "started"
    assert "terminalAtMs" not in runs[0] and "outcome" not in runs[0]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lines: lines[:-1] + [lines[-1].rstrip("\n")], "Cron execution ledger is not newline terminated"),
        (lambda lines: lines[:2] + ["\n"] + lines[2:], "Cron execution ledger contains an empty or oversized row"),
        (lambda lines: lines[:2] + ["{broken\n"] + lines[2:], "Cron execution ledger contains invalid JSON"),
        (lambda lines: lines + [lines[0]], "Cron execution ledger contains a duplicate start"),
        (lambda lines: lines + [lines[1]], "Cron execution ledger contains a duplicate terminal"),
        (lambda lines: [lines[1], lines[0]] + lines[2:], "Cron execution terminal has no start"),
        (lambda lines: [lines[0], lines[1].replace('"scheduled"', '"manual"')] + lines[2:],
         "Cron execution start and terminal identities differ"),
        (lambda lines: [lines[0].replace('"startedAtMs"', '"x":1,"startedAtMs"')] + lines[1:],
         "Cron execution ledger contains an invalid row"),
        (lambda lines: [lines[0], lines[1].replace('"delivery_only","delivery"', '"heartbeat_event","delivery"')]
         + lines[2:], "Cron execution ledger contains an invalid row"),
    ],
)
def test_corrupt_ledgers_are_exit_5_with_line_and_digest(project, ws, mutate, message):
    path = ws / "cron-executions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(mutate(lines)))
    before = path.read_bytes()
    for args in (["runs", "--all-jobs", "--exact"], ["validate"], ["runs", "stretch-reminder"]):
        result = project.run("cron", *args, "--json")
        assert result.code == 5, (args, result.out)
        error = result.json()["error"]
        assert message in error["message"] and error["file"] == str(path)
    assert path.read_bytes() == before


def test_byte_ceiling_and_reservations(project, ws):
    size = (ws / "cron-executions.jsonl").stat().st_size
    small = project.run("cron", "runs", "--all-jobs", "--max-log-bytes", str(size - 1), "--json")
    assert small.code == 5 and "exceeds its byte ceiling" in small.json()["error"]["message"]
    env = project.env(SXCTL_MAX_LOG_BYTES=str(size - 1))
    assert project.run("cron", "runs", "--all-jobs", env=env).code == 5
    with open(ws / "cron-executions.jsonl", "a") as handle:
        handle.write(json.dumps(_row("open", HEARTBEAT_JOB, "started", 1789974100000), separators=(",", ":")) + "\n")
    size = (ws / "cron-executions.jsonl").stat().st_size
    tight = project.run("cron", "validate", "--max-log-bytes", str(size + 1000), "--json")
    assert tight.code == 5
    assert any("cannot honor unmatched terminal reservations" in p["message"] for p in tight.json()["problems"])


def test_validate_lists_orphan_starts(project, ws):
    with open(ws / "cron-executions.jsonl", "a") as handle:
        handle.write(json.dumps(_row("orphan-1", HEARTBEAT_JOB, "started", 1789974100000),
                                separators=(",", ":")) + "\n")
    result = project.run("cron", "validate", "--json")
    assert result.code == 5
    problems = result.json()["problems"]
    assert [p["code"] for p in problems] == ["orphan_start"] and problems[0]["line"] == 7
    human = project.run("cron", "validate")
    assert f"{ws / 'cron-executions.jsonl'}:7: orphan_start" in human.err


def test_validate_checks_nested_outcomes_that_runs_tolerates(project, ws):
    path = ws / "cron-executions.jsonl"
    text = path.read_text().replace('"deliveredChunks":1', '"deliveredChunks":0')
    path.write_text(text)
    assert project.run("cron", "runs", "stretch-reminder").code == 0
    result = project.run("cron", "validate", "--json")
    assert result.code == 5 and "invalid row" in result.json()["error"]["message"]


def test_evidence_of_unknown_runs(project, ws):
    folder = project.session("2026_09_21_quiet_euler", live=False)
    execution = "8a61f0d2-94c3-4b7e-a5d8-2e6f1c0b7a94"
    runs = project.run("cron", "runs", "next-check-in", "--evidence", "--json").json()["runs"]
    assert runs[0]["evidence"] == {"key_record": False, "stem": None, "state": "missing", "session": None}
    assert "evidence" not in runs[1]
    sent = project.run("inbox", "send", "Review the current project risks.", "--key", execution, "--json").json()
    runs = project.run("cron", "runs", "next-check-in", "--evidence", "--json").json()["runs"]
    assert runs[0]["evidence"] == {"key_record": True, "stem": sent["stem"], "state": "pending",
                                   "session": folder.name, "copy": "none"}


def test_full_scan_groups(tmp_path):
    path = tmp_path / "l.jsonl"
    _write_ledger(path, 10)
    ledger = scan_ledger(path, full=True)
    assert len(ledger.groups) == 10 and all(g.terminal for g in ledger.groups.values())
    assert scan_ledger(tmp_path / "missing.jsonl") is None
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert scan_ledger(tmp_path / "empty.jsonl").groups == {}


def test_the_ledger_is_appended_in_place_only_in_a_scratch_copy_it_last_wrote(tmp_path):
    """A rehearsal's ledger grows by ~1,500 rows a day: in its copy, which nobody else reads,
    rows are added at the end (the same bytes a rewrite gives); everywhere else the ledger is
    rewritten and renamed, as comis's readers expect."""
    for scratch in (True, False):
        folder = tmp_path / ("scratch" if scratch else "project")
        folder.mkdir()
        path = folder / "cron-executions.jsonl"
        path.write_bytes(b"")
        cache: dict = {}
        inodes = []
        with scratch_writes(tmp_path / "scratch"):
            for n in range(3):
                execution, when = str(uuid.UUID(int=n + 1)), 1_700_000_000_000 + n * 60_000
                append_rows(path, [_row(execution, "a", "started", when), _row(execution, "a", "terminal", when)],
                            locks=[], protected=set(), cache=cache)
                inodes.append(os.stat(path).st_ino)
        assert (len(set(inodes)) == 1) is scratch, inodes  # appended in place: one file throughout
        assert len(scan_ledger(path).groups) == 3
    assert (tmp_path / "scratch" / "cron-executions.jsonl").read_bytes() == \
        (tmp_path / "project" / "cron-executions.jsonl").read_bytes()

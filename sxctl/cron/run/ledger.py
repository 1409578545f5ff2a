"""The comis execution ledger `cron-executions.jsonl`: executions paired from their rows (the
row format is cron/run/ledger_rows.py's), the runs projection, fast tail reads and full scans
(spec cron-ledger.md; a pass adds rows through cron/run/ledger_write.py).

Readers never lock: they read one open descriptor, so a concurrent atomic replace cannot mix
two versions of the file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import jsondata
from ...errors import InvalidDataError
from ...fsio import open_regular, read_refusal
from .ledger_rows import IDENTITY_KEYS, check_row

DEFAULT_MAX_LOG_BYTES = 2_000_000
MAX_MAX_LOG_BYTES = 32 * 1024 * 1024
MAX_ROW_BYTES = 65_536
BLOCK = 65_536

# --- groups and the runs projection --------------------------------------------------------------

@dataclass
class Group:
    """One execution: its started row and, once settled, its terminal row."""

    start: dict[str, Any] | None = None
    terminal: dict[str, Any] | None = None
    first_line: int = 0

    @property
    def execution_id(self) -> str:
        row = self.start or self.terminal
        assert row is not None  # a group exists because a row named it
        return row["executionId"]

    @property
    def sort_key(self) -> int:
        if self.terminal is not None:
            return self.terminal["terminalAtMs"]
        return self.start["startedAtMs"] if self.start else 0


DELIVERY_ONLY_STATUS = {"accepted": "completed", "suppressed": "skipped", "pre_send_failed": "failed",
                        "partial": "failed", "rejected": "failed", "unknown": "unknown"}


def project_run(group: Group) -> dict[str, Any]:
    """The runs projection of cron-ledger.md §4 (of a group that has its start)."""
    start = group.start
    assert start is not None
    run: dict[str, Any] = {k: start[k] for k in ("executionId", "jobId", "agentId", "scheduledForMs", "trigger",
                                                 "workKind", "rootRunId", "startedAtMs")}
    terminal = group.terminal
    if terminal is None:
        run.update(status="started", deliveryStatus="not_requested")
        return run
    run["terminalAtMs"] = terminal["terminalAtMs"]
    run["durationMs"] = terminal["durationMs"]
    outcome = terminal["outcome"]
    kind = outcome["kind"]
    status, delivery, error = "dispatched", "not_requested", None
    delivery_obj = outcome.get("delivery") if isinstance(outcome.get("delivery"), dict) else {}
    if kind == "agent_turn":
        execution = outcome.get("execution") or {}
        status = execution.get("status", "unknown")
        delivery = delivery_obj.get("status", "not_requested")
        error = execution.get("errorKind") if status != "completed" else delivery_obj.get("errorKind")
    elif kind == "wake_gate_skip":
        status, delivery, error = "skipped", delivery_obj.get("status", "not_requested"), delivery_obj.get("errorKind")
    elif kind == "agent_turn_pre_model_skip":
        status, error = "skipped", "precondition"
    elif kind == "internal_action":
        execution = outcome.get("execution") if isinstance(outcome.get("execution"), dict) else {}
        status = execution.get("status", "unknown")
        error = execution.get("errorKind") if status in ("failed", "unknown") else None
        counters = execution.get("counters")
        if isinstance(counters, list):
            run["counters"] = counters
    elif kind == "delivery_only":
        delivery = delivery_obj.get("status", "unknown")
        status, error = DELIVERY_ONLY_STATUS.get(delivery, "unknown"), delivery_obj.get("errorKind")
    elif kind == "pre_dispatch_failure":
        status, error = "failed", outcome.get("errorKind")
    elif kind == "unsettled":
        status, error = "unknown", outcome.get("errorKind")
    run["status"] = status
    run["deliveryStatus"] = delivery
    if error is not None:
        run["errorKind"] = error
    run["outcome"] = outcome
    return run


# --- reading -------------------------------------------------------------------------------------

class LedgerError(Exception):
    """The ledger cannot be read as comis writes it; `line` is the row at fault, when there is one."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def pair_row(groups: dict[str, Group], row: dict[str, Any], line: int, forward: bool) -> None:
    """Pairing rules. A forward scan meets a start before its terminal, a reverse scan after it;
    either way a terminal that comes first in the file has no start."""
    group = groups.setdefault(row["executionId"], Group(first_line=line))
    if row["recordType"] == "started":
        if group.start is not None:
            raise LedgerError("Cron execution ledger contains a duplicate start", line)
        group.start = row
    else:
        if group.terminal is not None:
            raise LedgerError("Cron execution ledger contains a duplicate terminal", line)
        if (group.start is None) == forward:
            raise LedgerError("Cron execution terminal has no start", line)
        group.terminal = row
    if group.start is not None and group.terminal is not None:
        start, terminal = group.start, group.terminal
        if any(start[k] != terminal[k] for k in IDENTITY_KEYS):
            raise LedgerError("Cron execution start and terminal identities differ", line)
        if terminal["outcome"].get("rootRunId", start["rootRunId"]) != start["rootRunId"]:
            raise LedgerError("Cron execution start and terminal roots differ", line)
        if terminal["durationMs"] != terminal["terminalAtMs"] - start["startedAtMs"]:
            raise LedgerError("Cron execution ledger contains an invalid row", line)


def _parse_line(raw: bytes, line: int, full: bool) -> dict[str, Any]:
    if not raw or len(raw) + 1 >= MAX_ROW_BYTES:
        raise LedgerError("Cron execution ledger contains an empty or oversized row", line)
    try:
        row = jsondata.strict_loads(raw)  # a key twice: which one was meant is unknown, as in the store
    except ValueError:
        raise LedgerError("Cron execution ledger contains invalid JSON", line) from None
    problem = check_row(row, full=full)
    if problem:
        raise LedgerError(problem, line)
    return row


@dataclass
class Ledger:
    """A fully scanned ledger: every group in file order, and the bytes it came from."""

    path: Path
    raw: bytes
    groups: dict[str, Group] = field(default_factory=dict)
    lines: list[tuple[str, bytes]] = field(default_factory=list)  # (executionId, row bytes with "\n")

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    def logical_size(self) -> int:
        open_starts = sum(1 for g in self.groups.values() if g.terminal is None)
        return len(self.raw) + open_starts * MAX_ROW_BYTES


def _fail(path: Path, raw_digest: str, error: LedgerError) -> InvalidDataError:
    where = f"line {error.line}; " if error.line is not None else ""
    return InvalidDataError(str(path), f"{error.message} ({where}sha256 {raw_digest})", line=error.line,
                            sha256=raw_digest)


def _check_envelope(size: int, last_byte: bytes, max_log_bytes: int) -> None:
    if size > max_log_bytes:
        raise LedgerError("Cron execution ledger exceeds its byte ceiling", None)
    if size and last_byte != b"\n":
        raise LedgerError("Cron execution ledger is not newline terminated", None)


def _open_ledger(path: Path) -> int | None:
    """The ledger's descriptor (None when it does not exist); exit 5 naming it when it is not a
    regular file (a FIFO there must not hang every pass), exit 8 when the system refuses it."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise read_refusal(path, exc) from None


def scan_ledger(path: Path, *, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES, full: bool = False) -> Ledger | None:
    """Read and check the whole ledger (None when it does not exist). `full` adds the nested
    outcome checks that only `cron validate` makes."""
    fd = _open_ledger(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        raw = handle.read(min(size, max_log_bytes) + 1)
    ledger = Ledger(path, raw)
    try:
        _check_envelope(max(size, len(raw)), raw[-1:], max_log_bytes)
        for number, line in enumerate(raw.split(b"\n")[:-1], 1):
            row = _parse_line(line, number, full)
            pair_row(ledger.groups, row, number, forward=True)
            ledger.lines.append((row["executionId"], line + b"\n"))
        if ledger.logical_size() > max_log_bytes:
            raise LedgerError("Cron execution ledger cannot honor unmatched terminal reservations", None)
    except LedgerError as error:
        raise _fail(path, ledger.digest, error) from None
    return ledger


def _reverse_lines(handle, size: int) -> Iterator[tuple[int, bytes]]:
    """Lines from the end in 64 KiB blocks, numbered -1, -2, … (the envelope check has made
    sure the file ends with a newline, which is not a line of its own)."""
    position = size - 1
    buffer = b""
    number = 0
    while position > 0:
        step = min(BLOCK, position)
        position -= step
        handle.seek(position)
        buffer = handle.read(step) + buffer
        cut = buffer.rfind(b"\n")
        while cut != -1:
            number -= 1
            yield number, buffer[cut + 1:]
            buffer = buffer[:cut]
            cut = buffer.rfind(b"\n")
        if len(buffer) >= MAX_ROW_BYTES:
            raise LedgerError("Cron execution ledger contains an empty or oversized row", number - 1)
    if size > 0:
        yield number - 1, buffer


def recent_runs(
    path: Path,
    limit: int,
    *,
    job_id: str | None = None,
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    exact: bool = False,
) -> list[dict[str, Any]]:
    """The newest `limit` runs (of one job, or all), reading only the tail that holds them."""
    matches: Callable[[Group], bool] = (lambda g: True) if job_id is None else (
        lambda g: (g.start or g.terminal or {}).get("jobId") == job_id)
    if exact:
        ledger = scan_ledger(path, max_log_bytes=max_log_bytes)
        groups = [] if ledger is None else [g for g in ledger.groups.values() if matches(g)]
    else:
        groups = _tail_groups(path, limit, matches, max_log_bytes)
    groups.sort(key=lambda g: g.sort_key, reverse=True)
    return [project_run(g) for g in groups[:limit]]


def _tail_groups(path: Path, limit: int, matches, max_log_bytes: int) -> list[Group]:
    fd = _open_ledger(path)
    if fd is None:
        return []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            handle.seek(max(0, size - 1))
            _check_envelope(size, handle.read(1), max_log_bytes)
            groups: dict[str, Group] = {}
            wanted: list[Group] = []
            for number, line in _reverse_lines(handle, size):
                row = _parse_line(line, number, False)
                pair_row(groups, row, number, forward=False)
                group = groups[row["executionId"]]
                if group.first_line == number and matches(group):
                    wanted.append(group)
                # enough runs, each with its start (one whose rows interleave with a later run's
                # may still have its start ahead)
                if len(wanted) >= limit and all(g.start is not None for g in wanted):
                    break
            else:  # read to the start of the file: every terminal there has its start, or none will
                if any(g.start is None for g in groups.values()):
                    raise LedgerError("Cron execution terminal has no start", None)
        except LedgerError as error:
            # Seen backwards, a misplaced row can look like another fault (a start repeated after
            # its terminal looks like a terminal without start): let a forward scan name it.
            scan_ledger(path, max_log_bytes=max_log_bytes)
            handle.seek(0)
            raise _fail(path, hashlib.sha256(handle.read()).hexdigest(), error) from None
    return wanted


def run_evidence(run: dict[str, Any]) -> bool:
    """Runs whose inbox message may or may not exist: unknown, of a kind sxctl dispatches."""
    return run["status"] == "unknown" and run["workKind"] in ("agent_turn", "heartbeat_event")



# --- writing (only ever a whole-file rewrite under the ledger lock) ---------------------------------

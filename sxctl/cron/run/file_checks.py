"""The store and the ledger checked as a scheduler pass reads them (runner.md §2): each file
strictly (`check_files`), then against each other (`cross_check`: orphan starts, claims whose
start differs, times recorded after this clock's now) — what `cron validate`, `status`, doctor
and every pass (which stops on them) share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...clock import Clock
from ...errors import ErrorCode, InvalidDataError, SxctlError, UsageError
from ..policy.file import read_policy
from ..policy.jitter import check_jitter
from ..store.clock_repair import REPAIR_HINT, acknowledged_in
from ..store.file import read_store
from ..store.schema_kit import readable_name, with_job
from ..store.workspace import Workspace
from .ledger import DEFAULT_MAX_LOG_BYTES, Ledger, scan_ledger


@dataclass
class Problem:
    """One thing wrong in a scheduler file, with the file and line to look at (`cron check`)."""

    file: str
    line: int | None
    code: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code, "message": self.message}


def cross_check(store: dict[str, Any], ledger: Ledger, ws: Workspace, now_ms: int | Clock,
                acknowledged: frozenset[str] | None = None) -> list[Problem]:
    """Orphan starts, claims whose start differs in identity, and times recorded in the future
    (but those a clock repair `acknowledged`: None reads them from the policy file). A view gives
    its Clock: read after the files, a row a pass wrote meanwhile is not "ahead" of it."""
    now_ms = now_ms if isinstance(now_ms, int) else now_ms.now_ms()
    if acknowledged is None:
        acknowledged = acknowledged_in(ws)
    problems: list[Problem] = []
    claims = {claim["executionId"]: claim for claim in store["activeClaims"]}
    names = {job["id"]: readable_name(job["name"]) for job in store["jobs"]}

    for execution_id, group in ledger.groups.items():
        if group.terminal is None and execution_id not in claims:
            problems.append(Problem(str(ws.ledger), group.first_line, "orphan_start",
                                    f"orphan start {execution_id}: no terminal and no active claim"))
    for claim in claims.values():
        claimed = ledger.groups.get(claim["executionId"])
        if claimed is not None and claimed.start is not None:
            start = claimed.start
            if any(start[k] != claim[k] for k in ("jobId", "agentId", "bootId", "scheduledForMs", "trigger",
                                                  "workKind")):
                problems.append(Problem(str(ws.store), None, "identity_mismatch",
                                        with_job(f"claim {claim['executionId']} differs from its ledger start",
                                                 names.get(claim["jobId"]))))
        if claim["claimedAtMs"] > now_ms and claim["executionId"] not in acknowledged:
            problems.append(Problem(str(ws.store), None, "clock_behind",
                                    with_job(f"claim {claim['executionId']} was made at {claim['claimedAtMs']}, "
                                             "after now", names.get(claim["jobId"]))))
    for group in ledger.groups.values():
        if group.start is not None and group.start["startedAtMs"] > now_ms and \
                group.start["executionId"] not in acknowledged:
            problems.append(Problem(str(ws.ledger), group.first_line, "clock_behind",
                                    f"execution {group.start['executionId']} started after now"))
    return problems


def stop_on_cross_checks(problems: list[Problem]) -> None:
    """What stops a scheduler pass (runner.md §2): a claim whose start differs in identity, a
    claim or a run recorded after this clock's now (with the way out when this clock is right)."""
    for code in ("identity_mismatch", "clock_behind"):
        found = [p for p in problems if p.code == code]
        if found:
            error = SxctlError("; ".join(p.message for p in found), code=ErrorCode(code), file=found[0].file)
            if code == "clock_behind":
                error.extra["hint"] = REPAIR_HINT
            raise error


def check_files(ws: Workspace, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES, *, full: bool = False
                ) -> tuple[dict[str, Any] | None, Ledger | None, list[Problem]]:
    """The ledger, the store, sxctl's policy file and its spend file, each read and checked as a
    scheduler pass reads them (a pass stops on any one of them; `full` adds the ledger's nested
    outcome checks): the store and the ledger (None when missing or invalid) and one problem
    naming each invalid file. A file the system refuses to read is exit 8 (SystemRefusedError),
    not a problem."""
    problems: list[Problem] = []
    store = ledger = None
    try:
        store = read_store(ws)
    except InvalidDataError as error:
        problems.append(Problem(str(ws.store), None, "invalid_data", error.message))
    try:
        read_policy(ws)
    except InvalidDataError as error:
        problems.append(Problem(str(ws.policy), None, "invalid_data", error.message))
    from ..spend.file import read_book, spend_path  # a damaged spend file stops passes

    try:
        read_book(ws.scheduler)
    except InvalidDataError as error:
        problems.append(Problem(str(spend_path(ws.scheduler)), None, "invalid_data", error.message))
    try:
        ledger = scan_ledger(ws.ledger, max_log_bytes=max_log_bytes, full=full)
    except InvalidDataError as error:
        problems.append(Problem(str(ws.ledger), error.extra.get("line"), "invalid_data", error.message))
    return store, ledger, problems


#: what a pass writing between a view's read of the store and of the ledger can make it see
RACY = ("orphan_start", "identity_mismatch")


def settled_cross_check(ws: Workspace, store: dict[str, Any], ledger: Ledger, clock: Clock,
                        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> list[Problem]:
    """`cross_check` for a view, which reads without the lock: an orphan start or a claim that
    differs from its start is confirmed by a second reading of both files (a pass that claimed
    or settled between the two reads made `cron validate` report an orphan start 1 time in 12)."""
    problems = cross_check(store, ledger, ws, clock)
    if not any(p.code in RACY for p in problems):
        return problems
    store_now, ledger_now, _ = check_files(ws, max_log_bytes)
    again = {(p.code, p.message) for p in cross_check(store_now, ledger_now, ws, clock)} \
        if store_now is not None and ledger_now is not None else set()
    return [p for p in problems if p.code not in RACY or (p.code, p.message) in again]


def history_problem(ws: Workspace) -> Problem | None:
    """A damaged run history (`sxctl-spend-runs.jsonl`): `cron runs` cannot show its runs' tokens,
    but no pass stops on it (a pass only appends; the day totals are in the spend file)."""
    from ..spend.file import history_path, read_history

    try:
        read_history(ws.scheduler)
    except InvalidDataError as error:
        return Problem(str(history_path(ws.scheduler)), None, "invalid_history",
                       f"{error.message} (passes go on; `cron runs` shows no tokens until it is removed)")
    return None


def validate_workspace(ws: Workspace, clock: Clock, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> list[Problem]:
    """Everything `cron validate` checks, as a list (empty = valid): each file in full, then
    the store and the ledger against each other."""
    store, ledger, problems = check_files(ws, max_log_bytes, full=True)
    if store is None and not any(p.file == str(ws.store) for p in problems):
        problems.insert(0, Problem(str(ws.store), None, "file_not_found", "no cron store"))
    if store is not None and ledger is not None:
        problems += settled_cross_check(ws, store, ledger, clock, max_log_bytes)
    if store is not None and not any(p.file == str(ws.policy) for p in problems):
        problems += _jitter_problems(store, read_policy(ws), ws, clock.now_ms())
    history = history_problem(ws)
    problems += [history] if history is not None else []
    return problems


def _jitter_problems(store: dict[str, Any], policy: dict[str, Any], ws: Workspace, now_ms: int) -> list[Problem]:
    """A hand-edited `jitterMs` as long as the time between two runs, which `cron update --jitter`
    refuses (it would fold the next occurrence into this one's run)."""
    found = []
    for job in store["jobs"]:
        try:
            check_jitter(job, policy["jobs"].get(job["id"], {}), now_ms)
        except UsageError as error:
            found.append(Problem(str(ws.policy), None, "invalid_jitter", error.message.replace("--jitter", "jitterMs")))
    return found

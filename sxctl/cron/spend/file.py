"""sxctl's two spend files beside the comis store (comis's strict formats get no extra key), in
the shape that keeps a pass's cost flat whatever the history (cron/spend/ledger.py keeps the rules):

- `.scheduler/sxctl-spend.json` — what a pass decides by, bounded: the runs still `open`, the
  tokens attributed per job and date of occurrence (`days`, the last `DAYS_KEPT` days) and per
  session the total up to which runs were charged (`sessions`, the newest `MAX_SESSIONS`). A
  day's and a session's totals live here, apart from the runs: they outlive the runs' retention.
  Strict and versioned (formatVersion 2; format 1, which kept the newest 2,000 runs and summed the
  day from them, is read and written back as 2; an unknown key or version is exit 5 and the file is
  never written over); replaced atomically under the store lock.
- `.scheduler/sxctl-spend-runs.jsonl` — each closed run's record, for `cron runs`: appended, never
  read by a pass; before it would pass `HISTORY_CAP` bytes its older half goes. A line torn by a
  kill is not yet a line: readers skip an unfinished last line and the next append cuts it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ... import faults
from ...errors import InvalidDataError, SystemRefusedError
from ...fsio import atomic_write, read_data_file, written_here
from ...jsondata import compact_json, strict_loads
from ..store.schema import EPOCH_MS
from ..store.schema_kit import MAX_SAFE_INT, Arr, Enum, Int, Node, Obj, SchemaError, Str, opt, read_checked_file, req

FILE_CAP = 4 * 1024 * 1024
HISTORY_CAP = 1024 * 1024
MAX_OPEN = 5000
MAX_DAYS = 20_000
MAX_SESSIONS = 1000
DAYS_KEPT = 8  # a catch-up runs an occurrence at most a few days old: its date's total is still here
V1_MAX_RUNS = 2000

_RUN_FIELDS = [
    req("executionId", Str(1, 256)), req("jobId", Str(1, 256)), req("date", Str(10, 10)),
    req("project", Str(1, 4096)), req("sessionId", Str(1, 128)), req("stem", Str(1, 256)),
    req("dispatchedAtMs", EPOCH_MS),
]
_TOKENS = Int(0, MAX_SAFE_INT)
OPEN_RUN = Obj([*_RUN_FIELDS, req("state", Enum(("open",))), req("fromTokens", _TOKENS)])
_CLOSED_FIELDS = [opt("fromTokens", _TOKENS), opt("tokens", _TOKENS), opt("toTokens", _TOKENS),
                  opt("why", Str(1, 512))]
CLOSED_RUN = Obj([*_RUN_FIELDS, req("state", Enum(("attributed", "unattributed"))), req("closedAtMs", EPOCH_MS),
                  *_CLOSED_FIELDS])
V1_RUN = Obj([*_RUN_FIELDS, req("state", Enum(("open", "attributed", "unattributed"))), opt("closedAtMs", EPOCH_MS),
              *_CLOSED_FIELDS])
DAY = Obj([req("jobId", Str(1, 256)), req("date", Str(10, 10)), req("tokens", _TOKENS)])
SESSION = Obj([req("project", Str(1, 4096)), req("sessionId", Str(1, 128)), req("toTokens", _TOKENS),
               req("atMs", EPOCH_MS)])
V2 = Obj([req("formatVersion", Enum((2,))), req("open", Arr(OPEN_RUN, max_items=MAX_OPEN)),
          req("days", Arr(DAY, max_items=MAX_DAYS)), req("sessions", Arr(SESSION, max_items=MAX_SESSIONS))])
V1 = Obj([req("formatVersion", Enum((1,))), req("runs", Arr(V1_RUN, max_items=V1_MAX_RUNS))])


class _Versioned(Node):
    """Format 2, or the format 1 an older sxctl wrote."""

    def check(self, value: Any, path: Any) -> None:
        version = value.get("formatVersion") if isinstance(value, dict) else None
        (V1 if version == 1 else V2).check(value, path)


def spend_path(scheduler: Path) -> Path:
    return scheduler / "sxctl-spend.json"


def history_path(scheduler: Path) -> Path:
    return scheduler / "sxctl-spend-runs.jsonl"


SessionKey = tuple[str, str]  # (project, session id)


@dataclass
class SpendBook:
    """The spend file in memory: `open` runs, `days` (job id -> date -> tokens attributed),
    `sessions` ((project, session id) -> (charged up to, when)), and the runs `closed` since it
    was read (appended to the history on save; a format-1 file's closed runs too)."""

    open: list[dict[str, Any]] = field(default_factory=list)
    days: dict[str, dict[str, int]] = field(default_factory=dict)
    sessions: dict[SessionKey, tuple[int, int]] = field(default_factory=dict)
    closed: list[dict[str, Any]] = field(default_factory=list)
    upgraded: bool = False
    #: the folder it was read from, while its day totals are not yet checked against the history
    unproved: Path | None = None

    def charge(self, run: dict[str, Any]) -> None:
        """A run just closed: its record goes to the history, its tokens to its day and session."""
        self.closed.append(run)
        if run["state"] == "attributed":
            dates = self.days.setdefault(run["jobId"], {})
            dates[run["date"]] = dates.get(run["date"], 0) + run["tokens"]
            key = (run["project"], run["sessionId"])
            charged, _ = self.sessions.get(key, (0, 0))
            self.sessions[key] = (max(charged, run["toTokens"]), run["closedAtMs"])

    def charged_to(self, key: SessionKey, total: int, *, forget_reset: bool = False) -> int:
        """The total up to which the session's runs were charged — 0 when its counters now stand
        below it: they were reset, and the charges were of the old count (`forget_reset`, the
        pass: the book forgets it for good)."""
        charged = self.sessions.get(key, (0, 0))[0]
        if charged <= total:
            return charged
        if forget_reset:
            del self.sessions[key]
        return 0

    def tokens_by_date(self, job_id: str) -> dict[str, int]:
        """The tokens attributed to a job's closed runs per date (in its zone) of their occurrence:
        the larger of the file's day total and what the run history proves (`prove`)."""
        self.prove()
        return dict(self.days.get(job_id, {}))

    def prove(self) -> None:
        """Raise each day total to what the runs' history proves for it, once (a hand edit of the
        spend file that lowered a capped job's day let it run again while the history held the
        runs: the larger of two counts, as the run limits take). Asked only for a job with a
        token cap; a damaged history proves nothing; a rehearsal's own files need no proof."""
        folder, self.unproved = self.unproved, None
        if folder is None or written_here(str(spend_path(folder))):
            return
        try:
            runs = read_history(folder)
        except InvalidDataError:
            return
        proved = SpendBook()  # the history charged run by run, as the pass charged it
        for run in runs.values():
            proved.charge(run)
        for job_id, totals in proved.days.items():
            dates = self.days.setdefault(job_id, {})
            for date, tokens in totals.items():
                dates[date] = max(dates.get(date, 0), tokens)


def read_book(scheduler: Path) -> SpendBook:
    """The validated spend file (an empty book when there is none); invalid: exit 5 naming it."""
    doc = read_checked_file(spend_path(scheduler), FILE_CAP, "sxctl spend file", _Versioned())
    if doc is None:
        return _rebuilt(scheduler)
    if doc["formatVersion"] == 1:
        book = SpendBook(upgraded=True)
        for run in doc["runs"]:
            if run["state"] == "open" and "fromTokens" in run:
                book.open.append(run)
            elif run["state"] != "open":
                book.charge({**run, "closedAtMs": run.get("closedAtMs", run["dispatchedAtMs"])})
        return book
    return SpendBook(open=list(doc["open"]),
                     days=_by_job(doc["days"]),
                     sessions={(s["project"], s["sessionId"]): (s["toTokens"], s["atMs"]) for s in doc["sessions"]},
                     unproved=scheduler)


def _by_job(days: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for day in days:
        found.setdefault(day["jobId"], {})[day["date"]] = day["tokens"]
    return found


def _rebuilt(scheduler: Path) -> SpendBook:
    """No spend file (a new workspace, or one deleted): the counts rebuilt from the runs' history,
    so that deleting the file does not give a capped job its day again (a damaged history counts
    nothing: it is only a record)."""
    book = SpendBook(upgraded=history_path(scheduler).exists())
    try:
        runs = read_history(scheduler)
    except InvalidDataError:
        return book
    for run in sorted(runs.values(), key=lambda run: run["closedAtMs"]):
        book.charge(run)
    book.closed = []  # already in the history
    return book


def write_book(scheduler: Path, book: SpendBook, now_ms: int) -> str | None:
    """The file replaced, bounded (the last `DAYS_KEPT` days, the newest sessions and open runs),
    then the runs closed since appended to the history: the counts a pass decides by are on disk
    first, so a kill between the two can leave a run's record out of `cron runs` (`-`), never a
    run out of its day's count or a sent run out of the open ones. A history that cannot be
    written (a link, a FIFO, a folder, a full disk) fails no pass — the runs are sent and counted:
    returned is why their records were not kept."""
    for run in book.open[:-MAX_OPEN]:  # more runs open at once than the file keeps: the oldest end unattributed
        book.charge({**run, "state": "unattributed", "closedAtMs": now_ms,
                     "why": f"more than {MAX_OPEN} runs were open at once"})
    book.open = book.open[-MAX_OPEN:]
    first_kept = (datetime.fromtimestamp(now_ms / 1000, UTC) - timedelta(days=DAYS_KEPT)).date().isoformat()
    days = sorted((date, job, tokens) for job, dates in book.days.items() for date, tokens in dates.items()
                  if date >= first_kept)[-MAX_DAYS:]
    sessions = sorted(book.sessions.items(), key=lambda item: item[1][1])[-MAX_SESSIONS:]
    doc = {"formatVersion": 2, "open": book.open,
           "days": [{"jobId": job, "date": date, "tokens": tokens} for date, job, tokens in days],
           "sessions": [{"project": project, "sessionId": sid, "toTokens": charged, "atMs": at}
                        for (project, sid), (charged, at) in sessions]}
    atomic_write(spend_path(scheduler), compact_json(doc))
    book.upgraded = False
    if not book.closed:
        return None
    faults.hit("before-spend-history")
    closed, book.closed = book.closed, []
    try:
        append_history(scheduler, closed)
    except (InvalidDataError, SystemRefusedError) as error:
        return error.message
    return None


# --- the history of closed runs -------------------------------------------------------------------

def append_history(scheduler: Path, runs: list[dict[str, Any]]) -> None:
    """Append closed runs' records (never through a link, only to a regular file): in place while
    the file is whole, of one name and under `HISTORY_CAP`; else it is replaced by its whole lines
    (an unfinished last one — a kill mid-append — cut), its newer half past the cap, and the new
    lines."""
    path = history_path(scheduler)
    data = b"".join(compact_json(run) for run in runs)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise InvalidDataError(path, "not a regular file; the run history is not written there") from None
        raise SystemRefusedError.from_os_error(error, "cannot open the run history") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise InvalidDataError(path, "not a regular file; the run history is not written there")
        size = found.st_size
        if found.st_nlink == 1 and size + len(data) <= HISTORY_CAP and (not size or os.pread(fd, 1, size - 1) == b"\n"):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            return
        # else replaced, never written in place: another name of the file (a hard link) keeps its
        # bytes, an unfinished last line goes, and past the cap only the newer half is kept
        half = HISTORY_CAP // 2
        kept = os.pread(fd, min(size, HISTORY_CAP), max(0, size - HISTORY_CAP))
        kept = kept[kept.find(b"\n") + 1 if size > HISTORY_CAP else 0:kept.rfind(b"\n") + 1]
        if len(kept) + len(data) > HISTORY_CAP:
            kept = kept[kept.find(b"\n", len(kept) - half) + 1:] if len(kept) > half else kept
        if len(data) > half:  # thousands of runs closed at once: their newest, whole lines
            data, kept = data[data.find(b"\n", len(data) - half) + 1:], b""
        atomic_write(path, kept + data, durable=False)
    finally:
        os.close(fd)


def read_history(scheduler: Path) -> dict[str, dict[str, Any]]:
    """Each closed run's record by execution id (the newest when a kill left one twice); an
    unfinished last line is skipped; any other line off the format is exit 5 naming the file
    and the line."""
    path = history_path(scheduler)
    raw = read_data_file(path, HISTORY_CAP)
    if raw is None:
        return {}
    if len(raw) > HISTORY_CAP:
        raise InvalidDataError(path, f"the run history is larger than {HISTORY_CAP} bytes")
    runs: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(raw.split(b"\n")[:-1], 1):  # the piece after the last newline is unfinished
        try:
            run = strict_loads(line)
            CLOSED_RUN.check(run, "$")
        except (ValueError, RecursionError):
            raise InvalidDataError(path, f"line {number} is not JSON; remove the file (it holds only the tokens "
                                   "`cron runs` shows)") from None
        except SchemaError as error:
            raise InvalidDataError(path, f"line {number}: {error}; remove the file (it holds only the tokens "
                                   "`cron runs` shows)") from None
        runs[run["executionId"]] = run
    return runs

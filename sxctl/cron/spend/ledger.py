"""The tokens attributed to each run — of a job with a spend guard, and of any job while the agent
publishes its token counters (kept in sxctl's spend files: cron/spend/file.py). An ATTRIBUTION
from the agent's own counters, not a bill: a run's tokens are the growth of the session's
`usage.total_tokens` from its dispatch to the first pass that finds its message read and the agent
idle again in a stats.json written after the read — whatever else the agent did meanwhile is
counted in, but never twice: runs of one session open at the same time share the growth while
they overlap, and no run is charged what an earlier one was (the session's charged total). A run
whose session rotated, whose message was never read within a day, or whose figures did not read
has no attribution (`-`).

`maxTokensPerDay` (cron/spend/rules.py) counts per date of occurrence in the job's zone the
tokens of the job's closed runs AND the growth so far of its open ones, shared as closing them now
would share it (`DayTokens`): an agent busy for hours keeps its runs open, and they count while it
works, so a day passes its cap by at most the growth of the run that reached it
(cron/timeline/fate.py skips past it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...project import SessionInfo, session_info
from ...project.layout import ProjectLayout, is_valid_session_id
from ...project.usage import read_usage
from ..run.receipts import consumption
from ..store.targets import run_target_project
from ..timeline.schedule import job_zone, local_time
from .file import SpendBook, read_book, read_history, spend_path, write_book
from .rules import is_guarded

OPEN_FOR_MS = 24 * 3_600_000  # a run whose message is not read (or agent not idle) within this: no attribution


def run_tokens(scheduler: Path) -> dict[str, dict[str, Any]]:
    """Each run's record by execution id (`cron runs`): the closed ones' history and the open ones."""
    runs = read_history(scheduler)
    runs.update((run["executionId"], run) for run in read_book(scheduler).open)
    return runs


class Figures:
    """The agents' stats.json as one pass reads them: each session once, so that the count a
    pass decides by, the runs it closes and the `fromTokens` of the runs it opens are one reading
    (a turn ending between the decision and the dispatch is not a run sent past the cap)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._read: dict[tuple[str, str], tuple[SessionInfo | None, int]] = {}

    def _reading(self, project: Path, session_id: str) -> tuple[SessionInfo | None, int]:
        key = (str(project), session_id)
        if key not in self._read:
            folder = ProjectLayout(project).sessions / session_id
            if not (is_valid_session_id(session_id) and folder.is_dir()):
                self._read[key] = (None, 0)
            else:
                try:  # the file's time first: a stats.json replaced after it only looks older
                    written = os.stat(folder / "stats.json").st_mtime_ns
                except OSError:
                    written = 0
                self._read[key] = (session_info(folder, self.clock), written)
        return self._read[key]

    def session(self, project: Path, session_id: str) -> SessionInfo | None:
        return self._reading(project, session_id)[0]

    def written_ms(self, project: Path, session_id: str) -> int:
        """When the stats.json read was written, on the file system's clock (that of a receipt)."""
        return self._reading(project, session_id)[1] // 1_000_000


def open_run(book: SpendBook, figures: Figures, *, execution_id: str, job_id: str, date: str, project: Path,
             session_id: str, stem: str, guarded: bool = True) -> bool:
    """A run was dispatched into `session_id`: note the session's tokens as `figures` read them
    (True when noted). A run of a job without a guard is noted only when the agent publishes its
    counters."""
    clock = figures.clock
    info = figures.session(project, session_id)
    total = read_usage(info.stats if info is not None else None).get("total_tokens")
    if total is None and not guarded:
        return False
    run: dict[str, Any] = {"executionId": execution_id, "jobId": job_id, "date": date, "project": str(project),
                           "sessionId": session_id, "stem": stem, "dispatchedAtMs": clock.now_ms(), "state": "open"}
    if total is None:
        book.charge({**run, "state": "unattributed", "closedAtMs": clock.now_ms(),
                     "why": "usage.total_tokens unreadable at dispatch"})
    else:
        book.charged_to((str(project), session_id), total, forget_reset=True)
        book.open.append({**run, "fromTokens": total})
    return True


def close_runs(book: SpendBook, figures: Figures) -> bool:
    """Attribute every open run whose message has been read while the agent is idle now (True
    when one changed): the growth of total_tokens since its dispatch, never counted twice — runs
    of one session closing together share the growth while several of them were open, and a run
    is charged nothing an earlier attributed run of its session was."""
    now = figures.clock.now_ms()
    closing: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = {}
    still_open, changed = [], False
    for run in book.open:
        total, why = _readiness(run, figures)
        if total is None and why is None and now - run["dispatchedAtMs"] > OPEN_FOR_MS:
            why = "its message was not read with the agent idle within a day"
        if why is not None:
            book.charge({**run, "state": "unattributed", "closedAtMs": now, "why": why})
            changed = True
        elif total is not None:
            closing.setdefault((run["project"], run["sessionId"]), []).append((run, total))
        else:
            still_open.append(run)
    for key, group in closing.items():
        total = max(found for _, found in group)
        shares = _shares([run for run, _ in group], book.charged_to(key, total, forget_reset=True), total)
        for (run, _), tokens in zip(group, shares, strict=True):
            book.charge({**run, "state": "attributed", "tokens": tokens, "toTokens": total, "closedAtMs": now})
        changed = True
    book.open = still_open
    return changed


def _shares(runs: list[dict[str, Any]], charged_to: int, total: int) -> list[int]:
    """Each run's share of one session's growth up to `total`: from its dispatch (or from what
    earlier runs were charged) on, each stretch shared equally by the runs open in it."""
    starts = [min(max(run["fromTokens"], charged_to), total) for run in runs]
    shares = [0] * len(runs)
    points = sorted(set(starts)) + [total]
    for low, high in zip(points, points[1:], strict=False):
        sharing = [i for i, start in enumerate(starts) if start <= low]
        each, rest = divmod(high - low, len(sharing))
        for n, i in enumerate(sharing):
            shares[i] += each + (n < rest)
    return shares


class DayTokens:
    """THE count of `--max-tokens-per-day` (the pass, the previews, `status` and `cron simulate`
    ask it): per job and date of occurrence, the tokens of its closed runs plus the growth so far
    of its open ones (each session's open runs sharing its growth since the charged total, as
    closing them now would), the agent's figures read once."""

    def __init__(self, book: SpendBook, figures: Figures) -> None:
        self.book = book
        self.figures = figures
        self._open: dict[str, dict[str, int]] | None = None  # job id -> date -> the open runs' growth

    def _growth(self) -> dict[str, dict[str, int]]:
        if self._open is None:
            self._open = {}
            sessions: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for run in self.book.open:
                sessions.setdefault((run["project"], run["sessionId"]), []).append(run)
            for key, runs in sessions.items():
                info = self.figures.session(Path(key[0]), key[1])
                total = read_usage(info.stats if info is not None else None).get("total_tokens")
                if info is None or info.state == "unknown" or total is None:
                    continue  # no figure to count by: its runs count once they close
                for run, tokens in zip(runs, _shares(runs, self.book.charged_to(key, total), total), strict=True):
                    dates = self._open.setdefault(run["jobId"], {})
                    dates[run["date"]] = dates.get(run["date"], 0) + tokens
        return self._open

    def by_date(self, job_id: str) -> dict[str, int]:
        days = self.book.tokens_by_date(job_id)
        for date, tokens in self._growth().get(job_id, {}).items():
            days[date] = days.get(date, 0) + tokens
        return days

    def reset(self) -> None:
        """The book changed (a run opened or closed): count again at the next question."""
        self._open = None


def day_tokens(scheduler: Path, clock: Clock) -> DayTokens:
    """A view's count of `--max-tokens-per-day`. An invalid spend file is exit 5 naming it, as
    for the pass: a view that counted nothing showed a capped job due that no pass would run."""
    return DayTokens(read_book(scheduler), Figures(clock))


def _readiness(run: dict[str, Any], figures: Figures) -> tuple[int | None, str | None]:
    """(the session's total_tokens, None) when `run` can be attributed now; (None, why) when it
    never can; (None, None) while it stays open. The agent says it is idle in a stats.json
    written after the message was read: one written before it (an agent claims a message, then
    reports the turn it starts) cannot tell that the turn for it is over. Both times are the file
    system's, so an agent's clock that lies cannot close a run early."""
    project = Path(run["project"])
    info = figures.session(project, run["sessionId"])  # one reading of the session for both
    receipt = consumption(project, run["sessionId"], run["stem"], figures.clock, info)
    if receipt["state"] in ("retracted", "expired", "lost"):
        return None, f"its message is {receipt['state']}"
    if receipt["state"] != "read" or "forwardedTo" in receipt:
        return None, "its message went to another session" if "forwardedTo" in receipt else None
    if info is None or info.state == "unknown":
        return None, "the session is gone"
    if info.state == "stale" or figures.written_ms(project, run["sessionId"]) <= receipt["readAtMs"]:
        return None, None  # its agent may come back (a stopped one wrote its last figures), or report again
    stats = info.stats or {}
    block = stats.get("sxctl")
    bash = stats.get("bash")
    busy = (isinstance(block, dict) and block.get("busy") is True) or (isinstance(bash, dict)
                                                                        and bash.get("running") is True)
    if busy:
        return None, None
    total = read_usage(stats).get("total_tokens")
    if total is None:
        return None, "usage.total_tokens unreadable when its message was read"
    if total < run["fromTokens"]:
        return None, "usage.total_tokens went down (the counters were reset)"
    return total, None


class Attribution:
    """A pass's share of the spend files: `close()` first (runs read since the last pass),
    `dispatched` after each run that sent a message, `day_tokens` for --max-tokens-per-day,
    `save()` before the store lock is released."""

    def __init__(self, scheduler: Path, clock: Clock, warn: Callable[[str], None] | None = None) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.warn = warn
        self.book: SpendBook | None = None
        self.figures = Figures(clock)
        self.counted: DayTokens | None = None
        self.changed = False

    def load(self) -> SpendBook:
        if self.book is None:
            self.book = read_book(self.scheduler)
            self.changed = self.book.upgraded  # a format-1 file is written back as format 2
        return self.book

    def day_tokens(self, job_id: str) -> dict[str, int]:
        if self.counted is None:
            self.counted = DayTokens(self.load(), self.figures)
        return self.counted.by_date(job_id)

    def close(self) -> None:
        if spend_path(self.scheduler).exists() and close_runs(self.load(), self.figures):
            self._changed()

    def dispatched(self, job: dict[str, Any], entry: dict[str, Any], budget: dict[str, Any] | None,
                   start: dict[str, Any], outcome: dict[str, Any], project: Path) -> None:
        """Open the attribution of a run that sent an inbox message: every run of a job with a
        spend guard, and the others when the agent publishes its token counters."""
        if outcome.get("kind") != "inbox_dispatch":
            return
        date = local_time(start["scheduledForMs"], job_zone(job, entry)).date().isoformat()
        if open_run(self.load(), self.figures, execution_id=start["executionId"], job_id=job["id"], date=date,
                    project=run_target_project(job, project, workspace=self.scheduler.parent),
                    session_id=outcome["sessionId"], stem=outcome["stem"], guarded=is_guarded(entry, budget)):
            self._changed()

    def _changed(self) -> None:
        self.changed = True
        if self.counted is not None:
            self.counted.reset()

    def save(self) -> None:
        if self.changed and self.book is not None:
            lost = write_book(self.scheduler, self.book, self.clock.now_ms())
            self.changed = False
            if lost is not None and self.warn is not None:
                self.warn(f"the runs' token records were not kept ({lost}); their tokens still count toward "
                          "the day, and `cron runs` shows none for them")

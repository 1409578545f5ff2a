"""The tokens attributed to each run — of a job with a spend guard, and of any job while the agent
publishes its token counters: `.scheduler/sxctl-spend.json`, sxctl's own file beside the comis
store (comis's strict formats get no extra key). An ATTRIBUTION from the agent's own counters,
not a bill: a run's tokens are the growth of the session's `usage.total_tokens` from its
dispatch to the first pass that finds its message read and the agent idle again — whatever else
the agent did meanwhile is counted in, but never twice: runs of one session open at the same time
share the growth while they overlap, and no run is charged what an earlier one was (`toTokens`,
the total it was charged up to). A run whose session rotated, whose message was never read within
a day, or whose figures did not read has no attribution (`-`).

The file is strict and versioned (formatVersion 1; an unknown key is exit 5 and it is never
written over), replaced atomically under the store lock by the pass, and keeps the newest
MAX_RUNS runs. `maxTokensPerDay` (cron/spend/rules.py) counts the attributed tokens of a job's
runs per date of their occurrence in the job's zone (cron/timeline/fate.py skips past it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...clock import Clock
from ...fsio import atomic_write
from ...jsondata import compact_json
from ...project import session_info
from ...project.layout import ProjectLayout, is_valid_session_id
from ...project.usage import read_usage
from ..run.receipts import consumption
from ..store.schema import EPOCH_MS
from ..store.schema_kit import MAX_SAFE_INT, Arr, Enum, Int, Obj, Str, opt, read_checked_file, req
from ..store.targets import run_target_project
from ..timeline.schedule import job_zone, local_time
from .rules import GUARD_KEYS, effective_guards

MAX_RUNS = 2000
FILE_CAP = 1024 * 1024
OPEN_FOR_MS = 24 * 3_600_000  # a run whose message is not read (or agent not idle) within this: no attribution
RUN = Obj([
    req("executionId", Str(1, 256)), req("jobId", Str(1, 256)), req("date", Str(10, 10)),
    req("project", Str(1, 4096)), req("sessionId", Str(1, 128)), req("stem", Str(1, 256)),
    req("dispatchedAtMs", EPOCH_MS), req("state", Enum(("open", "attributed", "unattributed"))),
    opt("fromTokens", Int(0, MAX_SAFE_INT)), opt("tokens", Int(0, MAX_SAFE_INT)), opt("toTokens", Int(0, MAX_SAFE_INT)),
    opt("closedAtMs", EPOCH_MS),
    opt("why", Str(1, 512)),
])
ROOT = Obj([req("formatVersion", Enum((1,))), req("runs", Arr(RUN, max_items=MAX_RUNS))])


def spend_path(scheduler: Path) -> Path:
    return scheduler / "sxctl-spend.json"


def read_spend(scheduler: Path) -> dict[str, Any]:
    """The validated file (an empty one when there is none); invalid: exit 5 naming it."""
    doc = read_checked_file(spend_path(scheduler), FILE_CAP, "sxctl spend file", ROOT)
    return doc if doc is not None else {"formatVersion": 1, "runs": []}


def write_spend(scheduler: Path, doc: dict[str, Any]) -> None:
    doc["runs"] = doc["runs"][-MAX_RUNS:]
    atomic_write(spend_path(scheduler), compact_json(doc))


def tokens_by_date(doc: dict[str, Any], job_id: str) -> dict[str, int]:
    """The tokens attributed to a job's runs per date (in its zone) of their occurrence."""
    days: dict[str, int] = {}
    for run in doc["runs"]:
        if run["jobId"] == job_id and run["state"] == "attributed":
            days[run["date"]] = days.get(run["date"], 0) + run["tokens"]
    return days


def tokens_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each run's record by execution id (`cron runs`)."""
    return {run["executionId"]: run for run in doc["runs"]}


def _session_stats(project: Path, session_id: str, clock: Clock):
    if not is_valid_session_id(session_id):
        return None
    folder = ProjectLayout(project).sessions / session_id
    return session_info(folder, clock) if folder.is_dir() else None


def open_run(doc: dict[str, Any], *, execution_id: str, job_id: str, date: str, project: Path, session_id: str,
             stem: str, clock: Clock, guarded: bool = True) -> bool:
    """A run was dispatched into `session_id`: note the session's tokens now (True when noted).
    A run of a job without a guard is noted only when the agent publishes its counters."""
    info = _session_stats(project, session_id, clock)
    total = read_usage(info.stats if info is not None else None).get("total_tokens")
    if total is None and not guarded:
        return False
    run: dict[str, Any] = {"executionId": execution_id, "jobId": job_id, "date": date, "project": str(project),
                           "sessionId": session_id, "stem": stem, "dispatchedAtMs": clock.now_ms(), "state": "open"}
    if total is None:
        run.update(state="unattributed", closedAtMs=clock.now_ms(), why="usage.total_tokens unreadable at dispatch")
    else:
        run["fromTokens"] = total
    doc["runs"].append(run)
    return True


def close_runs(doc: dict[str, Any], clock: Clock) -> bool:
    """Attribute every open run whose message has been read while the agent is idle now (True
    when one changed): the growth of total_tokens since its dispatch, never counted twice — runs
    of one session closing together share the growth while several of them were open, and a run
    is charged nothing an earlier attributed run of its session was charged (`toTokens`)."""
    now = clock.now_ms()
    charged: dict[tuple[str, str], int] = {}  # per session: the total up to which runs were charged
    for run in doc["runs"]:
        if run["state"] == "attributed" and "toTokens" in run:
            key = (run["project"], run["sessionId"])
            charged[key] = max(charged.get(key, 0), run["toTokens"])
    closing: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = {}
    changed = False
    for run in doc["runs"]:
        if run["state"] != "open":
            continue
        total, why = _readiness(run, clock)
        if total is None and why is None and now - run["dispatchedAtMs"] > OPEN_FOR_MS:
            why = "its message was not read with the agent idle within a day"
        if why is not None:
            run.update(state="unattributed", closedAtMs=now, why=why)
            changed = True
        elif total is not None:
            closing.setdefault((run["project"], run["sessionId"]), []).append((run, total))
    for key, group in closing.items():
        _share(group, charged.get(key, 0), now)
        changed = True
    return changed


def _share(group: list[tuple[dict[str, Any], int]], charged_to: int, now: int) -> None:
    """Attribute the runs of one session that close now: the growth from each one's dispatch (or
    from what earlier runs were charged) to now, each stretch shared equally by the runs open in it."""
    total = max(found for _, found in group)
    starts = [min(max(run["fromTokens"], charged_to), total) for run, _ in group]
    shares = [0] * len(group)
    points = sorted(set(starts)) + [total]
    for low, high in zip(points, points[1:], strict=False):
        sharing = [i for i, start in enumerate(starts) if start <= low]
        each, rest = divmod(high - low, len(sharing))
        for n, i in enumerate(sharing):
            shares[i] += each + (n < rest)
    for (run, _), tokens in zip(group, shares, strict=True):
        run.update(state="attributed", tokens=tokens, toTokens=total, closedAtMs=now)


def _readiness(run: dict[str, Any], clock: Clock) -> tuple[int | None, str | None]:
    """(the session's total_tokens, None) when `run` can be attributed now; (None, why) when it
    never can; (None, None) while it stays open."""
    project = Path(run["project"])
    receipt = consumption(project, run["sessionId"], run["stem"], clock)
    if receipt["state"] in ("retracted", "lost"):
        return None, f"its message is {receipt['state']}"
    if receipt["state"] != "read" or "forwardedTo" in receipt:
        return None, "its message went to another session" if "forwardedTo" in receipt else None
    info = _session_stats(project, run["sessionId"], clock)
    if info is None or info.state == "unknown":
        return None, "the session is gone"
    if info.state == "stale":
        return None, None  # its agent may come back: a stopped one wrote its last figures
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
    """A pass's share of the file: `close()` first (runs read since the last pass), `dispatched`
    after each run of a guarded job, `save()` before the store lock is released."""

    def __init__(self, scheduler: Path, clock: Clock) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.doc: dict[str, Any] | None = None
        self.changed = False

    def load(self) -> dict[str, Any]:
        if self.doc is None:
            self.doc = read_spend(self.scheduler)
        return self.doc

    def close(self) -> None:
        if spend_path(self.scheduler).exists() and close_runs(self.load(), self.clock):
            self.changed = True

    def dispatched(self, job: dict[str, Any], entry: dict[str, Any], budget: dict[str, Any] | None,
                   start: dict[str, Any], outcome: dict[str, Any], project: Path) -> None:
        """Open the attribution of a run that sent an inbox message: every run of a job with a
        spend guard, and the others when the agent publishes its token counters."""
        if outcome.get("kind") != "inbox_dispatch":
            return
        guarded = any(effective_guards(entry, budget).get(key) is not None for key in GUARD_KEYS[:3])
        date = local_time(start["scheduledForMs"], job_zone(job, entry)).date().isoformat()
        if open_run(self.load(), execution_id=start["executionId"], job_id=job["id"], date=date,
                    project=run_target_project(job, project, workspace=self.scheduler.parent),
                    session_id=outcome["sessionId"], stem=outcome["stem"], clock=self.clock, guarded=guarded):
            self.changed = True

    def save(self) -> None:
        if self.changed and self.doc is not None:
            write_spend(self.scheduler, self.doc)
            self.changed = False

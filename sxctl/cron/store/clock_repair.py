"""`sxctl cron repair --clock`: the way out after passes ran under a clock that was ahead.

Claims and runs recorded after this clock's now stop every pass and edit (`clock_behind`, exit 5):
a schedule computed from an earlier now would re-arm an occurrence that already ran. When this
clock is the right one, the repair says so once, under the store lock, and lets passes and edits
go on from now without running any of those occurrences again:

- the ledger is never rewritten (cron-ledger.md §5: sxctl never repairs a ledger), nor is a claim
  or a row's time: comis's rules hold as they are (a terminal's `durationMs` is `terminalAtMs -
  startedAtMs`, never negative: the next pass settles a dead claim recorded ahead at that start's
  own time, `tick._terminal`);
- the records ahead of the clock are acknowledged by their execution ids in sxctl's policy file
  (`clockRepair`), so `clock_behind` passes them over and still stops on any other;
- each recurring job the clock ahead moved far into the future gets back the first occurrence
  after now that did not run (comis's `nextRunAtMs`, the one store field a repair rewrites), and
  keeps the occurrences it ran ahead (`ranAheadMs` in its policy entry): the timeline skips each
  (reason `ran_ahead`) when its time comes, and an edit that re-arms one cannot run it again.

Both are forgotten once the clock has passed the last record (`forget_passed`). The policy file is
written before the store: a repair killed between the two leaves the jobs where they were, which
is safe, and the next repair finishes it.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import ErrorCode, InvalidDataError, NotFoundError, SystemRefusedError
from ...report import Reporter
from ..policy.file import read_policy, write_policy
from ..run.ledger import DEFAULT_MAX_LOG_BYTES, Ledger, scan_ledger
from ..timeline.schedule import next_run
from .file import LOCK_WAIT_S, read_store, refuse_if_daemon_owns, refuse_if_reset_pending, store_lock, write_store
from .workspace import Workspace

REPAIR_KEY = "clockRepair"
RAN_AHEAD_KEY = "ranAheadMs"
#: what ends a `clock_behind` when this clock is the right one (a clock that ran ahead wrote the records)
REPAIR_HINT = "if this clock is right and those records came from a clock that ran ahead: sxctl cron repair --clock"


def acknowledged(policy: Mapping[str, Any]) -> frozenset[str]:
    """The execution ids a clock repair acknowledged as recorded by a clock that ran ahead."""
    return frozenset(policy.get(REPAIR_KEY, {}).get("executionIds", ()))


def acknowledged_in(ws: Workspace) -> frozenset[str]:
    """`acknowledged` from the workspace's policy file; none when it cannot be read (the check
    that reads it names why)."""
    try:
        return acknowledged(read_policy(ws))
    except (InvalidDataError, SystemRefusedError):
        return frozenset()


def forget_passed(policy: dict[str, Any], now_ms: int) -> bool:
    """Drop a repair the clock has passed (every record it acknowledged now lies behind the
    clock) with the occurrences it kept from running again; True when something was dropped."""
    repair = policy.get(REPAIR_KEY)
    if repair is None or now_ms <= repair["throughMs"]:
        return False
    del policy[REPAIR_KEY]
    for entry in policy["jobs"].values():
        entry.pop(RAN_AHEAD_KEY, None)
    return True


@dataclass
class ClockRepair:
    """What `repair_clock` found and did: the records ahead of the clock (`ahead`, the newest at
    `through_ms`; `acknowledged`: how many were not acknowledged before), and each job re-armed
    or kept from running an occurrence again (`jobs`)."""

    now_ms: int
    ahead: int = 0
    acknowledged: int = 0
    through_ms: int | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.acknowledged or any(job["nextRunAtMs"]["before"] != job["nextRunAtMs"]["after"]
                                             for job in self.jobs))

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "action": "repair", "clock": True, "now_ms": self.now_ms, "repaired": self.changed,
                "ahead": self.ahead, "acknowledged": self.acknowledged, "throughMs": self.through_ms,
                "jobs": self.jobs}


def repair_clock(ws: Workspace, *, environ: Mapping[str, str] = os.environ, clock: Clock = SYSTEM_CLOCK,
                 report: Reporter | None = None, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
                 lock_wait_s: float = LOCK_WAIT_S) -> ClockRepair:
    """Take this clock as the right one (see the module): acknowledge the claims and runs recorded
    after its now, re-arm each recurring job at its first occurrence after now that did not run,
    and keep the ones it ran from running again. Nothing ahead: nothing is written. Run again, it
    changes nothing more (or finishes a repair that was killed)."""
    report = report or Reporter()
    refuse_if_daemon_owns(ws, environ, report)
    refuse_if_reset_pending(ws)
    ws.refuse_symlinks()
    if not os.path.lexists(ws.store):
        raise NotFoundError(f"no cron store at {ws.store}", code=ErrorCode.FILE_NOT_FOUND, file=ws.store)
    with store_lock(ws, f"sxctl-{uuid.uuid4()}", lock_wait_s) as lock:
        store = read_store(ws)
        if store is None:
            raise NotFoundError(f"no cron store at {ws.store}", code=ErrorCode.FILE_NOT_FOUND, file=ws.store)
        ledger = scan_ledger(ws.ledger, max_log_bytes=max_log_bytes) or Ledger(ws.ledger, b"")
        policy = read_policy(ws)
        now = clock.now_ms()
        outcome = ClockRepair(now)
        times = _ahead(store, ledger, now)
        if not times:
            return outcome
        known = acknowledged(policy)
        outcome.ahead, outcome.acknowledged = len(times), len(set(times) - known)
        outcome.through_ms = max(times.values())
        working = copy.deepcopy(store)
        ran = _ran_ahead(store, ledger, policy, now)
        for job in working["jobs"]:
            _rearm(job, ran.get(job["id"], []), policy, now, outcome)
        if not outcome.changed:
            return outcome  # repaired already
        before = policy.get(REPAIR_KEY, {})
        policy[REPAIR_KEY] = {"atMs": now, "throughMs": max(outcome.through_ms, before.get("throughMs", 0)),
                              "executionIds": sorted(known | set(times))}
        write_policy(ws, policy, working, lock)  # first: a job re-armed is never without its ran occurrences
        if working != store:
            write_store(ws, working, lock)
    return outcome


def _ahead(store: dict[str, Any], ledger: Ledger, now: int) -> dict[str, int]:
    """The claims and run starts recorded after `now` (what `clock_behind` judges), by execution
    id, with their times."""
    found = {claim["executionId"]: claim["claimedAtMs"] for claim in store["activeClaims"]
             if claim["claimedAtMs"] > now}
    for execution_id, group in ledger.groups.items():
        if group.start is not None and group.start["startedAtMs"] > now:
            found[execution_id] = group.start["startedAtMs"]
    return found


def _ran_ahead(store: dict[str, Any], ledger: Ledger, policy: dict[str, Any], now: int) -> dict[str, list[int]]:
    """The occurrences after `now` each job claimed or started (a manual run is no occurrence),
    with those an earlier repair kept: sorted, by job id."""
    found: dict[str, set[int]] = {}
    records = [*store["activeClaims"], *(g.start for g in ledger.groups.values() if g.start is not None)]
    for record in records:
        if record["trigger"] != "manual" and record["scheduledForMs"] > now:
            found.setdefault(record["jobId"], set()).add(record["scheduledForMs"])
    for job_id, entry in policy["jobs"].items():
        found.setdefault(job_id, set()).update(t for t in entry.get(RAN_AHEAD_KEY, ()) if t > now)
    return {job_id: sorted(occurrences) for job_id, occurrences in found.items() if occurrences}


def _rearm(job: dict[str, Any], ran: list[int], policy: dict[str, Any], now: int, outcome: ClockRepair) -> None:
    """A recurring job, scheduled or paused: its next run becomes the first occurrence after `now`
    it did not run, when that is earlier; the occurrences it ran ahead are kept in its entry."""
    life = job["lifecycle"]
    if job["source"] == "built_in" or job["schedule"]["kind"] == "at" or life["status"] not in ("scheduled", "paused"):
        return
    found = next_run(job["schedule"], now)
    while found is not None and found[0] in ran:
        found = next_run(job["schedule"], found[0])
    before = life["nextRunAtMs"]
    if found is not None and found[0] < before:
        life["nextRunAtMs"] = found[0]
    if ran:
        policy["jobs"].setdefault(job["id"], {})[RAN_AHEAD_KEY] = ran
    if ran or life["nextRunAtMs"] != before:
        outcome.jobs.append({"jobId": job["id"], "name": job["name"], "ranAhead": len(ran),
                             "nextRunAtMs": {"before": before, "after": life["nextRunAtMs"]}})

"""The one transaction that changes the comis store and sxctl's policy file together (cron-store.md
§9): lock, strict re-read, prune, change both, validate, write — the policy first, so a limit or a
pause reason is never missing behind its store change. It sits above cron/store/file.py and
cron/policy/file.py, which know nothing of each other; `job_change` is the policy half of a job edit.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import ErrorCode, NotFoundError, SxctlError
from ...report import Reporter
from ...timeparse import format_ms
from ..policy.file import LIFETIME_KEYS, PolicyOptions, apply_options, read_policy, write_policy
from ..policy.jitter import check_jitter
from ..policy.message_lifetime import check_lifetime_payload
from ..run.ledger import recent_runs
from ..timeline.schedule import honoured_zone_name
from .authoring import JobSpec
from .clock_repair import REPAIR_HINT, acknowledged_in
from .file import (
    LOCK_WAIT_S,
    find_job,
    init_workspace,
    prune_terminal_one_shots,
    read_store,
    refuse_if_daemon_owns,
    refuse_if_reset_pending,
    store_lock,
    write_store,
)
from .workspace import Workspace

PolicyChange = Callable[[dict[str, Any], dict[str, Any], int], None]


@dataclass
class Mutation:
    """What a mutation left: the store as written and the change's outcome."""

    store: dict[str, Any]
    outcome: Any


def mutate_store(
    ws: Workspace,
    change: Callable[[dict[str, Any], int], Any],
    *,
    environ: Mapping[str, str] = os.environ,
    lock_wait_s: float = LOCK_WAIT_S,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    create: bool = False,
    policy_change: PolicyChange | None = None,
    removing: Collection[str] = (),
) -> Mutation:
    """The mutation procedure of cron-store.md §9: lock, strict re-read, prune, change, validate,
    write (not when nothing changed). `change(store, now_ms)` edits the store in place and
    returns the command's outcome;
    `policy_change(policy, store, now_ms)` edits sxctl's policy file, written (first) under the
    same lock, keeping the entries of the jobs `removing` (ids; filled in by `change` at the
    latest) that the store written after it removes."""
    report = report or Reporter()
    refuse_if_daemon_owns(ws, environ, report)
    refuse_if_reset_pending(ws)
    ws.refuse_symlinks()
    if create:
        init_workspace(ws)
    if not ws.scheduler.is_dir() or not os.path.lexists(ws.store):
        raise NotFoundError(f"no cron store at {ws.store}; run `sxctl cron init`", code=ErrorCode.FILE_NOT_FOUND,
                            file=ws.store)
    with store_lock(ws, f"sxctl-{uuid.uuid4()}", lock_wait_s) as lock:
        store = read_store(ws)
        if store is None:
            raise NotFoundError(f"no cron store at {ws.store}", code=ErrorCode.FILE_NOT_FOUND, file=ws.store)
        now = clock.now_ms()
        refuse_clock_behind(ws, store, now)
        working = copy.deepcopy(store)
        pruned = prune_terminal_one_shots(working, now)
        if pruned:
            report.note(f"pruned finished one-shot job(s) older than 7 days: {', '.join(pruned)}")
        policy = read_policy(ws)  # an invalid policy file stops the command before anything is written
        outcome = change(working, now)
        if policy_change is not None:
            policy_change(policy, working, now)
            write_policy(ws, policy, working, lock, removing)
        if working != store:  # an edit that changes nothing (an adopting apply) leaves the file as it is
            write_store(ws, working, lock)
    return Mutation(working, outcome)


def clock_behind(store: dict[str, Any], runs: list[dict[str, Any]], now_ms: int,
                 acknowledged: frozenset[str] = frozenset()) -> int | None:
    """THE rule for a clock set back: the newest claim, or run start among `runs` (the ledger's
    tail), when it is after `now_ms` — a schedule recomputed from such a "now" re-arms an occurrence
    that already ran, and the next pass would run it twice. None when the clock is not behind.
    The records a clock repair `acknowledged` (store/clock_repair.py) do not count."""
    latest = max([claim["claimedAtMs"] for claim in store["activeClaims"] if claim["executionId"] not in acknowledged]
                 + [run["startedAtMs"] for run in runs
                    if run.get("startedAtMs") is not None and run["executionId"] not in acknowledged], default=0)
    return latest if latest > now_ms else None


def clock_behind_error(ws: Workspace, now_ms: int, latest: int) -> SxctlError:
    return SxctlError(f"this clock ({format_ms(now_ms)}) is behind the last run recorded in {ws.ledger} "
                      f"({format_ms(latest)}): an edit now could schedule an occurrence that already ran; "
                      "fix the clock, or wait until then", code=ErrorCode.CLOCK_BEHIND, file=ws.ledger,
                      hint=REPAIR_HINT)


def refuse_clock_behind(ws: Workspace, store: dict[str, Any], now_ms: int | Clock) -> None:
    """An edit, like a pass, stops (exit 5 `clock_behind`) while this clock is behind (`clock_behind`).
    Only the ledger's tail is read; a ledger that cannot be read is left to the pass and `cron
    validate` to name. `now_ms` a Clock (a check made without the lock, `cron plan`): its time is
    taken after the ledger is read, so a pass that wrote a row meanwhile is not "ahead"."""
    try:
        runs = recent_runs(ws.ledger, 20)
    except SxctlError:
        runs = []
    now = now_ms if isinstance(now_ms, int) else now_ms.now_ms()
    latest = clock_behind(store, runs, now, acknowledged_in(ws))
    if latest is not None:
        raise clock_behind_error(ws, now, latest)


def job_change(name: str, spec: JobSpec, *, resumed: bool = False, notes: list[str] | None = None,
               effective: dict[str, Any] | None = None) -> PolicyChange | None:
    """The policy edit of a job change (None when there is none): its policy flags applied
    (checked against the job as written), on a resume a fresh start for the limits that paused
    it — `limitsFromMs` reset, and `runs` dropped once --max-runs was reached — and on a new
    schedule what no longer applies dropped (a one-shot has no --max-runs or --until; a job no
    longer paused keeps no pause reason). `notes` collects what was dropped, for the user."""
    options = spec.policy
    tz = spec.schedule.tz
    if not resumed and not (options and options.given) and not spec.schedule.given and tz is None:
        return None

    def change(policy: dict[str, Any], store: dict[str, Any], now: int) -> None:
        tz = (effective or {}).get("tz", spec.schedule.tz)  # the job's zone kept by `cron update`
        job = find_job(store, spec.new_name or name)
        before = policy["jobs"].get(job["id"], {})
        zoned = tz is not None and job["schedule"]["kind"] != "cron"
        if not before and not (options and options.given) and not resumed and not zoned:
            return  # nothing to keep for a job without settings
        recurring = job["schedule"]["kind"] != "at"
        entry = apply_options(dict(before), options or PolicyOptions(),
                              tz=tz or job["schedule"].get("tz") or before.get("tz"), now_ms=now, recurring=recurring)
        check_jitter(job, entry, now)
        check_lifetime_payload(job, entry)
        if job["schedule"]["kind"] == "cron":
            entry.pop("tz", None)  # a cron schedule keeps its own zone in the store
        elif zoned and tz is not None:
            entry["tz"] = honoured_zone_name(tz)  # comis's every/at schedule has no zone: kept here
        dropped = [key for key in LIFETIME_KEYS if key in before and key not in entry]
        if dropped and notes is not None:
            flags = {"maxRuns": "--max-runs", "untilMs": "--until"}
            notes.append(f"dropped {' and '.join(flags[k] for k in dropped)}: a one-shot runs once")
        if job["lifecycle"]["status"] != "paused":
            entry.pop("paused", None)  # sxctl's reason lives only while the job is paused
        if resumed:
            entry.pop("maintenance", None)  # `cron resume NAME` ends its maintenance window
        if resumed and job["lifecycle"]["status"] == "scheduled":
            entry["limitsFromMs"] = now  # unread messages from before the resume no longer count
            if entry.get("maxRuns") is not None and entry.get("runs", 0) >= entry["maxRuns"]:
                entry.pop("runs")  # resumed after --max-runs: a new budget
        policy["jobs"][job["id"]] = entry

    return change

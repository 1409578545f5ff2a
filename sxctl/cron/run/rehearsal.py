"""`cron simulate`: the REAL scheduler pass (runner.SchedulerPass, its admission and fate rules) run
over a copy of the store, the policy file, the ledger and the sessions (the project's and those of
every project in the workspace a job targets), in a temporary folder, with a simulated clock and a
simulated agent that reads every message at once (none while it is down, none while the machine is).
Nothing in the project is written; nothing is delivered, no wake gate runs.

A pass in which nothing can happen is counted, not run (`_quiet_until`): no job comes due in it,
none is held or deferred, no claim is open, no open run's tokens would be attributed otherwise
than by a later pass, and the agent did not just come back. The copy is scratch: nobody else
reads or writes it (scratch.scratch_writes), so its writes are not fsynced and its locks are not
taken on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ...clock import FakeClock
from ...errors import ErrorCode, SxctlError, SystemRefusedError, UsageError
from ...interrupts import sigterm_interrupts
from ...project import ProjectLayout
from ...report import Unheard
from ...scratch import scratch_writes
from ...timeparse import LATEST_SCHEDULABLE_MS, format_ms
from ..policy.hosts import pinned_elsewhere
from ..policy.job import due_no_sooner_than
from ..spend.ledger import OPEN_FOR_MS
from ..store.file import read_store
from ..store.targets import run_target_project
from ..store.workspace import Workspace
from ..timeline.catchup import skipped_count
from ..timeline.schedule import schedule_computable
from .dispatch import Dispatcher, DispatchFailure, Occurrence
from .pings import RecordingPinger
from .rehearsal_copy import copy_folder, copy_workspace, real_paths, refuse_what_a_pass_refuses
from .tick import PassReport, SchedulerPass, TickOptions

MAX_PASSES = 10_081  # a week of minute passes, both ends: the most one rehearsal runs (it says where it stopped)
SIM_MODEL = "sxctl-simulate"


@dataclass
class Rehearsal:
    """What `cron simulate` saw: every occurrence's fate in every pass (`events`), the passes run,
    and whether the span was cut at MAX_PASSES (`truncated`, `stopped_at_ms`)."""

    from_ms: int
    until_ms: int
    pass_every_ms: int
    agent_down: list[tuple[int, int]]
    machine_down: list[tuple[int, int]] = field(default_factory=list)  # the machine is off: no pass, no agent
    passes: int = 0
    truncated: bool = False
    stopped_at_ms: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the pings the passes would have sent (--ping-url; recorded, never sent: cron/run/pings.py)
    pings: list[dict[str, Any]] = field(default_factory=list)


class SimulatedDispatcher(Dispatcher):
    """Dispatch inside the copy only: inbox messages go to the copied sessions; a delivery is
    accepted without running SXCTL_DELIVER_CMD; a target outside the copy is not reached."""

    @cached_property
    def copy_root(self) -> str:
        return os.path.realpath(self.workspace.parent)

    def dispatch(self, job: dict[str, Any], occurrence: Occurrence) -> dict[str, Any]:
        if job["payload"]["kind"] == "delivery":
            if not self.environ.get("SXCTL_DELIVER_CMD"):  # the real pass fails it: so does the rehearsal
                failure = DispatchFailure("executor_not_bound", "precondition", "SXCTL_DELIVER_CMD is not set")
                self.reasons[occurrence.execution_id] = str(failure)
                return failure.outcome
            return {"kind": "delivery_only", "delivery": {"status": "accepted", "deliveredChunks": 1,
                                                          "settledAtMs": self.clock.now_ms()}}
        where = run_target_project(job, self.project, workspace=self.workspace)
        if not Path(os.path.realpath(where)).is_relative_to(self.copy_root):
            failure = DispatchFailure("executor_precondition", "precondition",
                                      f"its target {where} is outside the project: not rehearsed")
            self.reasons[occurrence.execution_id] = str(failure)
            return failure.outcome
        return super().dispatch(job, occurrence)


def rehearse(ws: Workspace, project: Path, *, from_ms: int, until_ms: int, pass_every_ms: int,
             agent_down: list[tuple[int, int]], environ: Mapping[str, str], max_per_pass: int = 3,
             max_catchup: int | None = None, usage: list[tuple[int, Any]] | None = None,
             machine_down: list[tuple[int, int]] | None = None, every_pass: bool = False) -> Rehearsal:
    """Run a pass every `pass_every_ms` from `from_ms` to `until_ms` over a copy of the workspace,
    `project` and the workspace's target projects (rehearsal_copy.copy_workspace); none in
    `machine_down` ([from, to) spans: the machine is off, the pass after one sees all that came
    due meanwhile). The simulated
    agent is live in each copied project except in `agent_down` and `machine_down`, and reports
    `usage` (`(from_ms, block)` steps, the last one begun in force; None: no block). A pass in
    which nothing can happen is counted, not run, unless `every_pass` (the reference the tests
    hold the skipping to)."""
    off = list(machine_down or [])
    result = Rehearsal(from_ms, until_ms, pass_every_ms, agent_down, off)
    refuse_what_a_pass_refuses(ws, environ)
    # SIGTERM (a CI cancel) and SIGHUP end it as Ctrl-C does: the copy is removed
    with sigterm_interrupts(hangup=True), copy_folder(ws, project) as temp, scratch_writes(temp):
        copies = {temp: str(ws.root)}  # the copy's folders -> the user's own (`real_paths`)
        try:  # an error names the user's own file, not the throw-away copy
            sim_ws, sim_project, homes = copy_workspace(ws, project, Path(temp), from_ms, copies)
            held: set[tuple[Any, ...]] = set()
            told: dict[tuple[str, str], dict[str, Any]] = {}  # (session folder, stem) -> the run event that sent it
            sends = _sessions_of(sim_ws, sim_project)
            own_writes: dict[str, Any] = {}  # the copy's store and ledger as its last pass wrote them
            read: dict[Path, int] = {}  # each agent's newest read, on the file system's clock
            at, quiet_until, was_up = from_ms, from_ms, False
            unread = True  # a message may wait for the agents (the copied inboxes, or sent while they were away)
            # when the agent's figures change (a usage step, the agent or the machine going away):
            # an open run's tokens are attributed alike by any pass before the next change
            changes = sorted({start for start, _ in usage or []} | {start for start, _ in agent_down + off})
            while at <= until_ms:
                back = next((end for start, end in off if start <= at < end), None)
                if back is not None:  # the machine is off: no pass, no agent; the pass grid goes on
                    at += -(-(back - at) // pass_every_ms) * pass_every_ms
                    was_up = False
                    continue
                if result.passes >= MAX_PASSES:
                    result.truncated, result.stopped_at_ms = True, at
                    break
                up = not any(start <= at < end for start, end in agent_down)
                if at < quiet_until and not (up and not was_up) and not every_pass:
                    result.passes += 1  # nothing can happen in it (`_quiet_until`): counted, not run
                    at += pass_every_ms
                    continue
                was_up = up
                for home in homes if up else ():
                    _write_stats(home, at, _usage_at(usage, at), read.get(home, 0))
                change = next((instant for instant in changes if instant > at), None)
                settle_by = (LATEST_SCHEDULABLE_MS if change is None  # the last pass before it
                             else at + (change - 1 - at) // pass_every_ms * pass_every_ms)
                report, quiet_until = _one_pass(sim_ws, sim_project, at, environ, max_per_pass, max_catchup,
                                                result.pings, own_writes, max(at + 1, settle_by))
                result.passes += 1
                result.events += [real_paths(event, copies) for event in _events(report, at, held, told, sends)]
                unread = unread or bool(report.runs)
                for home in homes if up and unread else ():
                    read[home] = max(read.get(home, 0), _read_all(home, at, told))
                unread = unread and not up
                at += pass_every_ms
        except SxctlError as error:
            if error.code == ErrorCode.INTERRUPTED:  # a send in the copy named the message it wrote there
                raise SxctlError("interrupted (nothing was written in the project)", code=ErrorCode.INTERRUPTED) \
                    from None
            error.message = real_paths({"m": error.message}, copies)["m"]
            error.file = real_paths({"f": error.file}, copies)["f"]
            raise
        except OSError as error:  # a full or failing disk under the copy: named, as every refusal is
            raise SystemRefusedError(f"cannot write the rehearsal's copy in {temp}: {error.strerror or error}"
                                     " (TMPDIR chooses where it goes)", file=error.filename or temp) from None
    return result


def passes_needed(from_ms: int, until_ms: int, every_ms: int, machine_down: list[tuple[int, int]]) -> int:
    """How many passes `rehearse` runs uncapped: one every `every_ms` from `from_ms` to
    `until_ms`, less those in a `machine_down` span."""
    grid = (until_ms - from_ms) // every_ms + 1 if until_ms >= from_ms else 0
    merged: list[list[int]] = []
    for start, end in sorted(machine_down):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in merged:  # the grid's steps k with start <= from + k * every < end
        first, stop = (min(grid, max(0, -(-(edge - from_ms) // every_ms))) for edge in (start, end))
        grid -= stop - first
    return grid


def _usage_at(steps: list[tuple[int, Any]] | None, at: int) -> Any:
    begun = [block for start, block in steps or [] if start <= at]
    return begun[-1] if begun else None


def _write_stats(session_dir: Path, at: int, usage: Any = None, read_ns: int = 0) -> None:
    """The simulated agent's own stats.json, in the copy (a link the copy kept in its place goes:
    it pointed into the copy, and this agent is not the one that made it). It is written after
    the agent read its messages, and its file time says so: at least a millisecond after its
    newest read (`read_ns`, `_read_all`; the file system's clock is coarse, and a tie would leave
    a run's tokens to a later pass: the rehearsal would tell one story or another by chance)."""
    stats: dict[str, Any] = {"updated_ms": at, "model": SIM_MODEL}
    if usage is not None:
        stats["usage"] = usage
    path = session_dir / "stats.json"
    if path.is_symlink():
        path.unlink()
    path.write_text(json.dumps(stats), encoding="utf-8")
    if path.stat().st_mtime_ns // 1_000_000 <= read_ns // 1_000_000:
        later = (read_ns // 1_000_000 + 1) * 1_000_000
        os.utime(path, ns=(later, later))


def _one_pass(ws: Workspace, project: Path, at: int, environ: Mapping[str, str], max_per_pass: int,
              max_catchup: int | None, pings: list[dict[str, Any]],
              own_writes: dict[str, Any], settle_by: int) -> tuple[PassReport, int]:
    """The real pass at `at`, and the first instant at which a later one has anything to do
    (`settle_by`: the latest at which a pass attributes the open runs as the next one would)."""
    clock = FakeClock(at)
    report = Unheard()  # the passes' warnings are not shown: a check that can only warn is skipped
    options = TickOptions(project=project, max_per_pass=max_per_pass, max_catchup=max_catchup,
                          terminalize_orphans=True, no_gates=True)
    scheduler = SchedulerPass(ws, options, environ=environ, clock=clock, report=report, own_writes=own_writes)
    scheduler.pinger = RecordingPinger(clock.now_ms, pings)  # a rehearsal sends no ping: it records them
    scheduler.dispatcher = SimulatedDispatcher(options.project, options.to, ws.root, options.turn_mode,
                                               options.deliver_timeout, True, environ, clock, report)
    try:
        return scheduler.run(), _quiet_until(scheduler, at, settle_by)
    except SxctlError as error:
        if error.code == ErrorCode.CLOCK_BEHIND:
            raise UsageError(f"--from {format_ms(at, '%Y-%m-%d %H:%M UTC')} is before a run the ledger "
                             "records: rehearse from later") from None
        raise


def _quiet_until(scheduler: SchedulerPass, at: int, settle_by: int) -> int:
    """After the pass at `at`: the first instant at which a pass has anything to decide — the
    earliest time a job comes due; at once (`at + 1`) while one is due (held, deferred) or a
    claim is open. While a run's tokens wait to be attributed, no later than `settle_by` (the
    agent's figures are the same until then) nor than the first instant the run is a day open
    (spend/ledger.OPEN_FOR_MS). A due job pinned to another host was told as such by this pass
    (or an earlier one) and changes nothing after."""
    book = scheduler.attribution.book
    if scheduler.store.get("activeClaims"):
        return at + 1
    first = LATEST_SCHEDULABLE_MS
    if book is not None and book.open:
        first = min(settle_by, min(run["dispatchedAtMs"] for run in book.open) + OPEN_FOR_MS + 1)
    for job, record in scheduler.scheduled(due_by=at) if scheduler.store else ():
        assert job.due_ms is not None  # `scheduled` yields only jobs with a due time
        if not schedule_computable(record["schedule"]):
            continue  # never run: a warning each pass, nothing else
        if job.due_ms > at:  # jittered past `at`
            first = min(first, job.due_ms)
        elif pinned_elsewhere(job.host, scheduler.host) is None:
            return at + 1
    # the others: none comes due before its stored next run (a jittered one: at worst a pass too early)
    later = [soonest for record in scheduler.store.get("jobs", ())
             if (soonest := due_no_sooner_than(record)) is not None and soonest > at]
    return min([first, *later])


def _sessions_of(sim_ws: Workspace, sim_project: Path) -> dict[str, Path]:
    """Each job's sessions folder in the copy (job id -> folder), where its messages are read."""
    jobs = (read_store(sim_ws) or {"jobs": []})["jobs"]
    return {job["id"]: ProjectLayout(run_target_project(job, sim_project, workspace=sim_ws.root)).sessions
            for job in jobs}


def _events(report: PassReport, at: int, held: set[tuple[Any, ...]], told: dict[tuple[str, str], dict[str, Any]],
            sends: dict[str, Path]) -> list[dict[str, Any]]:
    """Each occurrence's fate in one pass: one event per occurrence (or per run of skipped ones)."""
    events: list[dict[str, Any]] = []

    def event(name: str, fate: str, occurrence: int | None, **extra: Any) -> dict[str, Any]:
        row = {"pass_ms": at, "job": name, "fate": fate, "occurrence_ms": occurrence, "count": 1,
               "reason": None, "told": None, **extra}
        events.append(row)
        return row

    for skip in report.admission.skipped:
        event(skip["name"], "skipped", skip["firstMs"], count=skip["count"], reason=skip["reason"],
              last_ms=skip["lastMs"], detail=skip["detail"])
    for wait in report.admission.waiting:
        if (wait["jobId"], wait["dueSinceMs"]) not in held:
            held.add((wait["jobId"], wait["dueSinceMs"]))
            event(wait["name"], "held", wait["dueSinceMs"], reason=wait["reason"], until_ms=wait["giveUpAtMs"],
                  hold_max_ms=wait["holdMaxMs"],
                  **({"detail": wait["detail"]} if "detail" in wait else {}))  # a spend guard says why
    for paused in report.admission.paused:
        event(paused["name"], "paused", None, reason=paused["reason"], detail=paused["message"])
    given_up = {row["jobId"] for row in report.admission.given_up}
    for run in report.runs:
        stands_for = 1 + skipped_count(run)
        fate = ("given_up" if run["jobId"] in given_up else "failed" if run.get("reason")
                else "catch_up" if run["trigger"] == "catchup" else "dispatched")
        row = event(run["name"], fate, run["scheduledForMs"], count=stands_for, reason=run.get("reason"))
        outcome = run.get("outcome") or {}
        if outcome.get("stem") and run["jobId"] in sends:  # stems are unique in a session, not across projects
            told[(os.path.normpath(sends[run["jobId"]] / outcome["sessionId"]), outcome["stem"])] = row
    for deferred in report.deferred:
        event(deferred["name"], "deferred", deferred["nextRunAtMs"],
              reason="--max-catchup" if deferred.get("reason") == "max_catchup" else "--max-per-pass")
    for pinned in report.elsewhere:  # told once per occurrence, as a held one
        if (pinned["jobId"], pinned["nextRunAtMs"], "host") not in held:
            held.add((pinned["jobId"], pinned["nextRunAtMs"], "host"))
            event(pinned["name"], "elsewhere", pinned["nextRunAtMs"],
                  reason=f"pinned to host {pinned['host']}, not {report.host}")
    return events


def _read_all(session_dir: Path, at: int, told: dict[tuple[str, str], dict[str, Any]]) -> int:
    """The simulated agent reads every pending message at once: moved to done/, its text kept
    on the run event that sent it. Returned: when the last was read, on the file system's clock
    (0: none was)."""
    inbox = os.path.join(session_dir, "inbox")  # strings: a day's rehearsal reads thousands of messages
    done = os.path.join(inbox, "done")
    read_ns = 0
    if not os.path.isdir(inbox):
        return read_ns
    os.makedirs(done, exist_ok=True)
    folder = os.path.normpath(session_dir)
    for name in sorted(os.listdir(inbox)):
        if not name.endswith(".json"):
            continue
        stem = name[:-len(".json")]
        try:
            with open(os.path.join(inbox, name), encoding="utf-8") as handle:
                text = json.load(handle).get("text")
        except (OSError, ValueError, AttributeError):
            text = None
        os.rename(os.path.join(inbox, name), os.path.join(done, name))
        read_ns = max(read_ns, os.lstat(os.path.join(done, name)).st_ctime_ns)
        if (folder, stem) in told:
            told[(folder, stem)].update(told=text, read_ms=at)
    return read_ns

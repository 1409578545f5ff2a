"""`sxctl cron tick` and `cron run`: one serverless scheduler pass, at most once per occurrence
(spec runner.md).

Order for each occurrence, each step its own atomic write: claim (store) -> started row (ledger)
-> dispatch -> terminal row (ledger) -> settle (store). The store lock is held for the whole
pass, so every claim found at the start belongs to a dead pass and is reconciled, never replayed."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import faults
from ...clock import SYSTEM_CLOCK, Clock
from ...errors import ConflictError, ErrorCode, InvalidDataError, SxctlError
from ...locks import MkdirLock
from ...report import Reporter
from ..policy.file import read_policy, write_policy
from ..policy.hosts import pinned_elsewhere, this_host
from ..policy.job import Job, due_no_sooner_than
from ..policy.maintenance import prune_windows
from ..policy.overlap import record_replaced, replace_previous
from ..spend.ledger import Attribution
from ..store.clock_repair import acknowledged, forget_passed
from ..store.file import check_ownership, find_job, refuse_if_handed_off, store_lock
from ..store.schema import root_run_id_for, work_kind_of
from ..store.workspace import Workspace
from ..timeline.admission import Admission
from ..timeline.burst import CatchupBudget, budget_of, defer
from ..timeline.catchup import missed_note
from ..timeline.hold import stands_for
from ..timeline.schedule import next_run, schedule_computable
from .dispatch import Dispatcher, Occurrence, dry_run_failure
from .failures import FAILED_STATUSES, apply_dependency_rule, failure_reason
from .file_checks import cross_check, stop_on_cross_checks
from .ledger import DEFAULT_MAX_LOG_BYTES, Group, Ledger, project_run
from .ledger_rows import start_row, unsettled_outcome
from .lifetime_sweep import sweep_for_pass
from .pass_files import PassFiles
from .pass_report import PassReport
from .pings import DEFAULT_TIMEOUT_S, Pinger


@dataclass
class TickOptions:
    """The options of one scheduler pass (`cron tick`, `cron run`), durations in seconds."""

    project: Path
    max_per_pass: int = 3  # due jobs run at most; the rest are deferred to the next pass
    max_catchup: int | None = None  # catch-up runs at most (0: none; None: the workspace's, timeline/burst.py)
    to: str = "live"
    turn_mode: str = "queue"
    catchup_after: float = 90.0  # seconds, as every duration the API takes
    deliver_timeout: float = 60.0
    no_gates: bool = False
    force: bool = False
    lock_wait: float = 0.0
    busy_ok: bool = False
    terminalize_orphans: bool = False
    retain_executions: int = 1000
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
    dry_run: bool = False
    ping_url: str | None = None  # the pass's own pings (api/scheduler.py); a job's are in its policy
    ping_timeout: float = DEFAULT_TIMEOUT_S


class SchedulerPass:
    """One pass over a workspace. `run()` does tick; `run_forced(name)` does `cron run --mode force`."""

    def __init__(self, ws: Workspace, options: TickOptions, *, environ: Mapping[str, str] = os.environ,
                 clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None,
                 own_writes: dict[str, Any] | None = None) -> None:
        """`own_writes`: the only writer of a workspace (`cron simulate`'s copy) keeps there the
        store and the ledger as its last pass wrote them (cron/run/pass_files.py)."""
        self.ws = ws
        self.options = options
        self.environ = environ
        self.clock = clock
        self.report = report or Reporter()
        self.boot_id = f"sxctl-{uuid.uuid4()}"
        self.host = this_host(environ)  # a job pinned to another host is left alone (cron/policy/hosts.py)
        self.result = PassReport(self.boot_id, clock.now_ms(), ws.root, host=self.host)
        self.pinger = Pinger(timeout=options.ping_timeout, now_ms=clock.now_ms)  # --ping-url (cron/run/pings.py)
        self.stopping: Callable[[], bool] = lambda: False  # SIGTERM or Ctrl-C came: claim no further run
        self.lock: MkdirLock | None = None
        self.store: dict[str, Any] = {}
        self.ledger = Ledger(ws.ledger, b"")
        self.orphans: list = []
        self.policy: dict[str, Any] = {"formatVersion": 1, "jobs": {}}
        self.files = PassFiles(ws, self.boot_id, own_writes)
        self.admission = Admission(self.policy, self.ledger, project=options.project, to=options.to, clock=clock,
                                   report=self.report, workspace=ws.root)
        self.dispatcher = Dispatcher(options.project, options.to, ws.root, options.turn_mode, options.deliver_timeout,
                                     options.no_gates, environ, clock, self.report)
        self.attribution = Attribution(ws.scheduler, clock, self.report.warn)  # tokens of runs (cron/spend/ledger.py)

    # --- the pass ----------------------------------------------------------------------------------

    def run(self) -> PassReport:
        return self._locked(self._tick)

    def run_forced(self, name: str) -> PassReport:
        return self._locked(lambda: self._force(name))

    def _locked(self, body) -> PassReport:
        self.ws.refuse_symlinks()
        store = self.files.read_store()
        if not self.files.sole_writer:  # the sole writer's workspace is a copy the rehearsal checked first
            check_ownership(self.ws, store, self.environ, self.options.force, self.report)
        if store is None:
            self.result.store_exists = False
            return self.result
        if self.options.dry_run:
            self.store = store
            self._load_and_check(store)
            body()
            return self.result
        self.lock = store_lock(self.ws, self.boot_id, self.options.lock_wait)
        try:
            self.lock.acquire()
        except ConflictError as error:
            if error.code == "lock_busy" and self.options.busy_ok:
                self.result.skipped = "lock_busy"
                return self.result
            raise
        try:
            refuse_if_handed_off(self.ws)  # under the lock: a hand-off that held it first left its mark
            self.store = self.files.locked_store(store)  # validated
            self._load_and_check(self.store)
            body()
        finally:
            self.lock.release()
        if self.result.no_future:
            raise InvalidDataError(str(self.ws.store), "Recurring schedule has no safe future occurrence: "
                                   + ", ".join(self.result.no_future), details=self.result.to_json([]))
        return self.result

    def _load_and_check(self, store: dict[str, Any]) -> None:
        self.ledger = self.files.read_ledger(self.options.max_log_bytes)
        now = self.clock.now_ms()
        self.policy = read_policy(self.ws)
        problems = cross_check(store, self.ledger, self.ws, now, acknowledged(self.policy))
        stop_on_cross_checks(problems)
        orphans = [p for p in problems if p.code == "orphan_start"]
        if orphans and not self.options.terminalize_orphans:
            raise SxctlError(
                f"{len(orphans)} orphan start(s) in {self.ws.ledger} (no terminal, no claim): "
                + ", ".join(p.message.split()[2].rstrip(":") for p in orphans)
                + "; pass --terminalize-orphans to record them as unknown",
                code=ErrorCode.ORPHAN_START, file=str(self.ws.ledger))
        self.orphans = [g for eid, g in self.ledger.groups.items()
                        if g.terminal is None and eid not in {c["executionId"] for c in store["activeClaims"]}]
        self.admission = Admission(self.policy, self.ledger, project=self.options.project, to=self.options.to,
                                   clock=self.clock, report=self.report, workspace=self.ws.root, store=store)
        self.admission.policy_changed = forget_passed(self.policy, now)  # a clock repair now behind the clock
        self.admission.spend = self.attribution
        self.result.admission = self.admission.done
        self.result.see(store, self.policy)

    def _tick(self) -> None:
        self._terminalize_orphans()
        self._reconcile()
        if not self.files.sole_writer:  # first: an expired message is no unread one (--overlap, limits)
            self.result.lifetimes = sweep_for_pass(self.store, self.policy, self.ledger.groups, self.options.project,
                                                   self.ws.root, self.clock, self.pinger, self.report,
                                                   dry_run=self.options.dry_run)  # a rehearsal's copy: no inbox
        if not self.options.dry_run:
            self.attribution.close()
        ran = 0
        budget = CatchupBudget(budget_of(self.options.max_catchup, self.policy))
        for job in self._due():
            if self.stopping():
                break
            if not self.admission.admit(job):  # skipped, held, paused: told as such, never "deferred"
                continue
            if ran >= self.options.max_per_pass:
                defer(self.result.deferred, self.admission.done, job, "max_per_pass")
            elif not budget.admits(self._due_at(job), self.clock.now_ms(), self.options.catchup_after * 1000):
                defer(self.result.deferred, self.admission.done, job, "max_catchup", budget.limit)
            else:
                self._run_occurrence(job, manual=False)
                ran += 1
        self.admission.policy_changed |= prune_windows(self.policy, self.store, self.clock.now_ms())
        if self.admission.store_changed or self.admission.policy_changed:
            self._write_store()
        self.attribution.save()

    def _force(self, name: str) -> None:
        self._reconcile()
        job = find_job(self.store, name)
        if job["source"] == "built_in":
            raise ConflictError("Config-owned cron jobs cannot be run through cron.run", code=ErrorCode.CONFIG_OWNED)
        if any(claim["jobId"] == job["id"] for claim in self.store["activeClaims"]):
            raise ConflictError("Cron job has an active execution", code=ErrorCode.ACTIVE_CLAIM)
        self._run_occurrence(job, manual=True)

    def scheduled(self, *, due_by: int | None = None) -> Iterator[tuple[Job, dict[str, Any]]]:
        """The jobs a pass runs when they are due (`Job.due_ms`, comis's next run plus --jitter);
        `due_by`: only those that may be due by then (`due_no_sooner_than`)."""
        for record in self.store["jobs"]:
            soonest = due_no_sooner_than(record)
            if due_by is not None and (soonest is None or soonest > due_by):
                continue
            job = self.admission.job(record)
            if not (job.built_in or job.status != "scheduled" or job.due_ms is None):
                yield job, record

    def _due(self) -> list[dict[str, Any]]:
        now = self.clock.now_ms()
        due = []
        for job, record in self.scheduled(due_by=now):
            if job.due_ms is None or job.due_ms > now:
                continue
            pinned = pinned_elsewhere(job.host, self.host)
            if pinned is not None:
                self.result.elsewhere.append({"jobId": job.id, "name": job.name, "host": pinned,
                                              "nextRunAtMs": job.next_run_ms})
                continue
            if not schedule_computable(record["schedule"]):
                self.report.warn(f"{job.name}: schedule {record['schedule'].get('expr')!r} cannot be computed; skipped")
                continue
            due.append((job.due_ms, record))
        # longest waiting first (store order among equals; runner.md §6 says store order:
        # docs/protocol-amendments.md): a job deferred by --max-per-pass is never starved
        return [record for _, record in sorted(due, key=lambda pair: pair[0])]

    def _due_at(self, record: dict[str, Any]) -> int:  # comis's next run plus its --jitter
        return self.admission.job(record).due_ms or 0

    # --- writes ------------------------------------------------------------------------------------

    def _write_store(self) -> None:
        """The policy first, then the store: a limit or a pause reason never misses its store change."""
        if self.options.dry_run:
            return
        assert self.lock is not None  # a pass writes only while it holds the store lock
        if self.admission.policy_changed:
            write_policy(self.ws, self.policy, self.store, self.lock)
            self.admission.policy_changed = False
        self.files.write_store(self.store, self.lock, self.admission.touched)
        self.admission.store_changed = False

    def _append(self, *rows: dict[str, Any]) -> None:
        if self.options.dry_run:
            return
        assert self.lock is not None  # a pass writes only while it holds the store lock
        self.files.append(list(rows), self.lock, {claim["executionId"] for claim in self.store["activeClaims"]},
                          max_log_bytes=self.options.max_log_bytes, retain=self.options.retain_executions)

    # --- reconciliation (runner.md §3) ---------------------------------------------------------------

    def _terminalize_orphans(self) -> None:
        for group in self.orphans:
            start = group.start
            assert start is not None  # an orphan is a start without a terminal
            self._append(self._terminal(start, unsettled_outcome(start["rootRunId"])))
            self._ping_lost(start)
            self.result.reconciled["ownerLostAfterStart"] += 1
            self.result.reconciled["executionIds"].append(start["executionId"])

    def _reconcile(self) -> None:
        for claim in list(self.store["activeClaims"]):
            group = self.ledger.groups.get(claim["executionId"])
            opened = group.start if group is not None else None  # the dead pass's start row, if it wrote one
            if group is None:
                start = start_row(claim, started_at=claim["claimedAtMs"])
                terminal = self._terminal(start, {"kind": "pre_dispatch_failure", "stage": "start_record_recovery",
                                                  "errorKind": "internal"})
                self._append(start, terminal)
                counter = "recoveredBeforeStart"
            elif group.terminal is None:
                assert opened is not None  # a group without its terminal was opened by its start
                terminal = self._terminal(opened, unsettled_outcome(opened["rootRunId"]))
                self._append(terminal)
                self._ping_lost(opened)
                counter = "ownerLostAfterStart"
            else:
                terminal = group.terminal
                counter = "settledFromTerminal"
            if opened is not None:  # the dead pass's run counts against its job's limits if it dispatched
                #                     (in the policy file, written before the store write that drops the claim)
                job = next(j for j in self.store["jobs"] if j["id"] == claim["jobId"])
                self.admission.count(job, opened, terminal["outcome"])
            self._settle(claim, terminal)
            self.result.reconciled[counter] += 1
            self.result.reconciled["executionIds"].append(claim["executionId"])

    def _ping_lost(self, start: dict[str, Any]) -> None:
        """The end its monitor never got of a run whose pass died after its start (unknown)."""
        if url := self.policy["jobs"].get(start["jobId"], {}).get("pingUrl"):
            self.pinger.ping(url, "fail", start["executionId"], "unknown: the pass running it ended before it did")

    def _terminal(self, start: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
        now = max(self.clock.now_ms(), start["startedAtMs"])
        row = {k: start[k] for k in ("executionId", "bootId", "jobId", "agentId", "scheduledForMs", "trigger")}
        row.update(recordType="terminal", workKind=start["workKind"], terminalAtMs=now,
                   durationMs=now - start["startedAtMs"], outcome=outcome)
        return row

    def _settle(self, claim: dict[str, Any], terminal: dict[str, Any], *, deferred: bool = False) -> None:
        """Remove the claim; a scheduled one-shot becomes terminal; counters follow comis's rule.
        `deferred`: the settle rides on the pass's next store write (the next claim, or the last
        write of the pass) — a pass that dies first leaves a claim whose terminal is in the
        ledger, which the next pass settles from it (runner.md §3), so nothing runs twice and
        a pass of 50 runs over a big store writes it 51 times instead of 100."""
        self.store["activeClaims"] = [c for c in self.store["activeClaims"] if c["executionId"] != claim["executionId"]]
        job = next(j for j in self.store["jobs"] if j["id"] == claim["jobId"])
        self.admission.touched.add(job["id"])
        if claim["trigger"] != "manual" and job["schedule"]["kind"] == "at":
            job["lifecycle"] = {"status": "one_shot_terminal", "terminalExecutionId": claim["executionId"],
                                "terminalAtMs": terminal["terminalAtMs"]}
        elif claim["trigger"] != "manual" and "consecutiveDependencyErrors" in job["lifecycle"]:
            apply_dependency_rule(job, terminal["outcome"])
        if deferred:
            self.admission.store_changed = True
        else:
            self._write_store()

    # --- one occurrence (runner.md §4-§6) ---------------------------------------------------------

    def _run_occurrence(self, job: dict[str, Any], *, manual: bool) -> None:
        self.admission.touched.add(job["id"])
        now = self.clock.now_ms()
        scheduled_for = now if manual else job["lifecycle"]["nextRunAtMs"]
        if not manual and job["lifecycle"]["status"] != "scheduled":
            self.report.warn(f"{job['name']}: Scheduled occurrence no longer matches persisted eligibility")
            return
        late = now - (scheduled_for if manual else self._due_at(job))  # counted from its jittered time
        trigger = "manual" if manual else ("scheduled" if late <= self.options.catchup_after * 1000 else "catchup")
        execution_id = str(uuid.uuid4())
        work_kind = work_kind_of(job)
        claim = {"executionId": execution_id, "bootId": self.boot_id, "jobId": job["id"], "agentId": job["agentId"],
                 "rootRunId": root_run_id_for(work_kind, execution_id), "scheduledForMs": scheduled_for,
                 "claimedAtMs": now, "trigger": trigger, "workKind": work_kind}
        entry: dict[str, Any] = {"jobId": job["id"], "name": job["name"], "executionId": execution_id,
                                 "trigger": trigger, "scheduledForMs": scheduled_for}
        bound = now if manual else stands_for(self.admission.job(job), scheduled_for, now)  # the latest due now
        if self.options.dry_run:  # report what would run; claim, write and dispatch nothing
            if not manual and job["schedule"]["kind"] != "at":
                self.admission.count_skipped(job, scheduled_for, bound, entry)
            self.result.runs.append({**entry, "executionId": None, "status": "would_run",
                                     **dry_run_failure(job, self.environ)})
            return
        if not manual:
            if job["schedule"]["kind"] == "at":
                job["lifecycle"] = {"status": "one_shot_claimed", "executionId": execution_id,
                                    "scheduledForMs": scheduled_for, "claimedAtMs": now}
            else:
                found = next_run(job["schedule"], bound)  # runner.md §4 claims up to now: docs/protocol-amendments.md
                if found is None:
                    self.report.warn(f"{job['name']}: Recurring schedule has no safe future occurrence")
                    self.result.no_future.append(job["name"])
                    return
                job["lifecycle"]["nextRunAtMs"] = found[0]
                folded = self.admission.count_skipped(job, scheduled_for, bound, entry)
                self.admission.record_folded(job, folded, now)
        self.store["activeClaims"].append(claim)
        self._write_store()
        faults.hit("after-claim")
        start = start_row(claim, started_at=self.clock.now_ms())
        self._append(start)
        faults.hit("after-start")
        note = missed_note(self.admission.job(job), entry) if trigger == "catchup" else None
        policy = self.policy["jobs"].get(job["id"], {})
        ping_url = policy.get("pingUrl")
        if ping_url:
            self.pinger.ping(ping_url, "start", execution_id, f"{job['name']} started ({trigger})")
        outcome = self.dispatcher.dispatch(job, Occurrence(job, execution_id, scheduled_for, trigger, note, policy))
        # on disk at once: a pass killed later must not leave a sent run out of --max-tokens-per-day
        self.attribution.dispatched(job, self.policy["jobs"].get(job["id"], {}), self.policy.get("budget"),
                                    start, outcome, self.options.project)
        self.attribution.save()
        faults.hit("after-dispatch")
        if not manual and outcome["kind"] == "inbox_dispatch":
            record_replaced(replace_previous(job, self.policy["jobs"].get(job["id"], {}), self.ledger,
                                             project=self.options.project, clock=self.clock, workspace=self.ws.root,
                                             sent=execution_id), entry, outcome)
        terminal = self._terminal(start, outcome)
        self._append(terminal)
        faults.hit("after-terminal")
        if not manual:
            self.admission.after_run(job, start, outcome)
        self._settle(claim, terminal, deferred=not manual)
        projected = project_run(Group(start, terminal))
        entry.update(status=projected["status"], deliveryStatus=projected["deliveryStatus"], outcome=outcome)
        if "errorKind" in projected:
            entry["errorKind"] = projected["errorKind"]
        if projected["status"] in FAILED_STATUSES:  # the run line always says why (cli/cron/tick.py)
            reason = self.dispatcher.reasons.get(execution_id)
            head = f"{projected['status']} {projected.get('errorKind') or ''}".rstrip()
            entry["reason"] = f"{head}: {reason}" if reason else failure_reason(job, projected)
        if ping_url and not (policy.get("pingOn") == "read" and outcome["kind"] == "inbox_dispatch"):  # else: read
            failed = projected["status"] in FAILED_STATUSES
            self.pinger.ping(ping_url, "fail" if failed else "success", execution_id,
                             f"{job['name']}: {entry.get('reason') if failed else projected['status']}")
        self.result.runs.append(entry)

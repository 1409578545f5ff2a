"""Admission: what a scheduler pass does with a due job before it claims it, by the job's sxctl
policy (cron/policy/file.py): expire it (lifetime), skip occurrences (stale catch-up, inactive hours,
the daily limit), hold it while no agent is live, or pause it when nobody reads what it sends.
(A *wake gate* is something else: comis's per-job script, run at dispatch.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...project import last_seen, list_sessions
from ...report import Reporter
from ..policy.file import record_skip
from ..policy.job import Job, job_of
from ..run.ledger import Group, Ledger
from .catchup import count_skipped
from .fate import NOT_DUE, RUN, Fate, expiry, skip_text, skipped_words, timeline
from .hold import Agents
from .limits import LEDGER_LIMITS, LimitUsage, count_dispatch, job_history, limit_usage, limited_jobs

#: occurrences judged one by one in a pass (an every-second job after a long outage has more):
#: beyond this the rest are skipped together
OCCURRENCE_BUDGET = 10_000


@dataclass
class AdmissionReport:
    """What admission did in one pass (held, skipped, paused), for the pass's JSON report."""

    waiting: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    paused: list[dict[str, Any]] = field(default_factory=list)
    #: occurrences run past their --hold-max with no live agent (their run fails `precondition`)
    given_up: list[dict[str, Any]] = field(default_factory=list)


class Admission:
    """A pass's admission of due jobs: `admit` decides, `count`/`after_run` spend the limits; what
    changed (`policy_changed`, `store_changed`, `touched`) the pass writes."""

    def __init__(self, policy: dict[str, Any], ledger: Ledger, *, project: Path, to: str, clock: Clock,
                 report: Reporter, workspace: Path, store: dict[str, Any] | None = None) -> None:
        self.policy = policy
        self.ledger = ledger
        self.store = store if store is not None else {"activeClaims": []}
        self.project = project
        self.workspace = workspace  # the folder of the store: jobs' targets are relative to it
        self.to = to
        self.clock = clock
        self.report = report
        self.done = AdmissionReport()
        self.policy_changed = False
        self.store_changed = False
        self.touched: set[str] = set()  # ids of the jobs this pass changed (the store checks just those)
        self.sessions: dict[Path, list] = {}  # session lists of the projects searched for an unknown run's message
        self._history: dict[str, list[Group]] | None = None  # the ledger by job (job_history), built when first asked
        self.spend: Any = None  # the pass's token attribution (spend_ledger.Attribution), for --max-tokens-per-day
        # the agents as this pass finds them: each project's live session looked up once a pass
        self.agents = Agents(project, to, clock, workspace)

    def entry(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.policy["jobs"].setdefault(job["id"], {})

    def job(self, record: dict[str, Any]) -> Job:
        """The stored record as the timeline decides about it (cron/policy/job.py)."""
        return job_of(record, self.policy, self.workspace)

    # --- the decision ---------------------------------------------------------------------------

    def usage(self, job: Job, *, unread: bool = True) -> LimitUsage:
        if self._history is None and any(job.entry.get(key) for key in LEDGER_LIMITS):
            # once per pass, for the jobs with a limit: counting never walks the whole ledger per job
            self._history = job_history(self.ledger, limited_jobs(self.policy))
        return limit_usage(job, claims=self.store["activeClaims"], ledger=self.ledger, project=self.project,
                           clock=self.clock, workspace=self.workspace, unread=unread, sessions=self.sessions,
                           history=self._history)

    def limits_of(self, job: Job) -> LimitUsage:
        """What the job has used of its limits, its tokens of the day included."""
        usage = self.usage(job) if job.has_policy else LimitUsage(0, None)
        if job.token_cap is not None and self.spend is not None:  # --max-tokens-per-day (cron/spend/ledger.py)
            usage.token_cap, usage.tokens = job.token_cap, self.spend.day_tokens(job.id)
        return usage

    def count_skipped(self, record: dict[str, Any], scheduled_for: int, bound: int,
                      entry: dict[str, Any]) -> dict[str, list[Any]]:
        """What a late run folds (`catchup.count_skipped`), counted with the job's limits as used."""
        job = self.job(record)
        return count_skipped(job, scheduled_for, bound, entry, self.limits_of(job))

    def admit(self, record: dict[str, Any]) -> bool:
        """True: claim and run the job's due occurrence now. False: admission dealt with it (the
        job and the policy in memory say how; the pass writes them). Each occurrence's fate is
        the job's timeline, which the previews show too (`fate.timeline`)."""
        job = self.job(record)
        usage = self.limits_of(job)
        self._fold_proven(job, usage)
        fate = self._skip_occurrences(job, self.clock.now_ms(), usage)
        if fate.action in ("expire", "pause"):
            self.pause(record, "expired" if fate.action == "expire" else "max_unconsumed", fate.detail)
            return False
        if fate.hold is not None:  # the pass tells it once, with when the agent was last seen (cron/run/pass_report.py)
            seen = last_seen(list_sessions(job.target_project or self.project, self.clock))
            row = {"jobId": job.id, "name": job.name, **fate.hold.to_json(), "agentLastSeenMs": seen}
            if fate.action == "hold":
                self.done.waiting.append(row)
                return False
            self.done.given_up.append(row)
        if fate.action == "run":  # a guard that could not read its figure lets it run: said, not silent
            verdict = self.agents.verdict(job)
            if verdict is not None and verdict.reason is None and verdict.unreadable:
                self.report.warn(f"{job.name}: its spend guard {verdict.detail}")
        return fate.action == "run"

    def count(self, job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any] | None) -> None:
        """Count a settled scheduled run against the job's limits (`count_dispatch`)."""
        entry = self.policy["jobs"].get(job["id"])
        if entry and count_dispatch(entry, job, start, outcome, project=self.project, clock=self.clock,
                                    workspace=self.workspace, sessions=self.sessions):
            self.policy_changed = True

    def after_run(self, record: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any]) -> None:
        """Count a scheduled run against the job's limits; expire the job when it reached them."""
        self.count(record, start, outcome)
        job = self.job(record)
        if job.has_policy and not job.one_shot and job.status == "scheduled" and job.next_run_ms is not None:
            expired = expiry(job, job.next_run_ms, self.usage(job, unread=False), job.run_at(job.next_run_ms))
            if expired is not None:
                self.pause(record, "expired", expired.detail)

    def _fold_proven(self, job: Job, usage: LimitUsage) -> None:
        """Raise the policy file's counts to what the ledger proves, and drop a day stamped later
        than today in the job's zone (an edit, or a clock that ran ahead; its runs were never
        counted): the policy file is the half of every count that outlives the ledger's
        retention, so it counts on from the truth. Done when the job is admitted, after the pass
        has settled and counted every claim, so that the run this pass adds is counted once."""
        if usage.proven is None:
            return
        entry = job.entry
        before = {key: entry.get(key) for key in ("runs", "day")}
        if usage.proven > entry.get("runs", 0):
            entry["runs"] = usage.proven
        if job.max_runs_per_day:
            today = job.date_of(self.clock.now_ms())
            day = entry.get("day")
            if day is not None and day["date"] > today:
                entry.pop("day")
                day = None
            dates = [date for date in usage.days if date <= today]
            newest = max(dates) if dates else None
            if newest is not None and (day is None or day["date"] < newest
                                       or (day["date"] == newest and day["runs"] < usage.days[newest])):
                entry["day"] = {"date": newest, "runs": usage.days[newest]}
        if {key: entry.get(key) for key in ("runs", "day")} != before:
            self.policy_changed = True

    # --- the rules ------------------------------------------------------------------------------

    def _skip_occurrences(self, job: Job, now: int, usage: LimitUsage) -> Fate:
        """Walk the job's timeline over its due occurrences: record the skipped ones and move the
        store's next run past them; the fate of the first one it does not skip (`not_due` when
        the next one is not due yet)."""
        skipped: dict[str, list[int]] = {}
        details: dict[str, str] = {}  # per reason, the words of its last skip
        fate, at = NOT_DUE, job.next_run_ms
        for step in timeline(job, usage, now, agents=self.agents, budget=OCCURRENCE_BUDGET, due_only=True):
            fate, at = step.fate, step.occurrence_ms
            if fate.action != "skip":
                break
            assert fate.reason is not None  # a skip has its reason
            skipped.setdefault(fate.reason, []).append(at)
            details[fate.reason] = fate.detail
        else:
            if fate.action == "skip" and at is not None:  # the timeline ended on a skip
                later = job.next_after(at)
                if later is None:
                    fate = RUN  # no future occurrence: the pass runs this one and reports it
                else:  # still due after the budget: the rest go together, up to now, for the same reason
                    assert fate.reason is not None
                    if job.run_at(later[0]) <= now:
                        skipped[fate.reason].append(later[0])
                    found = job.next_after(now) or later
                    at = found[0]
                    after = next(timeline(job, usage, now, first=found, budget=1, due_only=True), None)
                    fate = after.fate if after is not None else NOT_DUE
        if at is not None:
            job.record["lifecycle"]["nextRunAtMs"] = at
        if skipped:
            self.policy["jobs"].setdefault(job.id, job.entry)  # no settings: in a window, or a budget's guard
            self.touched.add(job.id)
            self.policy_changed = self.store_changed = True
        for reason, times in skipped.items():
            record_skip(job.entry, times[0], times[-1], len(times), reason, now)
            self.done.skipped.append({"jobId": job.id, "name": job.name, "reason": reason,
                                      "detail": skipped_words(reason, details[reason]),
                                      "count": len(times), "firstMs": times[0], "lastMs": times[-1]})
        return fate

    def record_folded(self, record: dict[str, Any], left_out: dict[str, list[Any]], now: int) -> None:
        """The occurrences a catch-up folded in that its policy would not have run (outside its
        active hours, past its daily limit: `catchup.count_skipped`), recorded as skipped."""
        for reason, (count, first, last) in left_out.items():
            record_skip(self.entry(record), first, last, count, reason, now)
            self.done.skipped.append({"jobId": record["id"], "name": record["name"], "reason": reason,
                                      "detail": skipped_words(reason, skip_text(reason, self.job(record))),
                                      "count": count, "firstMs": first, "lastMs": last})
            self.policy_changed = True

    def pause(self, job: dict[str, Any], reason: str, why: str) -> None:
        """comis's own pause (reason `operator`), with sxctl's reason kept in the policy."""
        self.touched.add(job["id"])
        life = job["lifecycle"]
        job["lifecycle"] = {"status": "paused", "nextRunAtMs": life["nextRunAtMs"],
                            "consecutiveDependencyErrors": life.get("consecutiveDependencyErrors", 0),
                            "reason": "operator"}
        now = self.clock.now_ms()
        message = f"paused by sxctl: {why}; `sxctl cron resume {job['name']}` resumes it"
        self.entry(job)["paused"] = {"reason": reason, "atMs": now, "message": message}
        self.done.paused.append({"jobId": job["id"], "name": job["name"], "reason": reason, "message": message})
        self.report.warn(f"{job['name']}: {message}")
        self.policy_changed = self.store_changed = True

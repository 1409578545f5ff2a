"""Admission: what a scheduler pass does with a due job before it claims it, by the job's sxctl
policy (cron/policy/file.py): expire it (lifetime), skip occurrences (stale catch-up, inactive hours,
the daily limit), hold it while no agent is live, or pause it when nobody reads what it sends.
(A *wake gate* is something else: comis's per-job script, run at dispatch.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import Clock
from ...project import freshest_live, last_seen, list_sessions
from ...report import Reporter
from ..policy.file import DEFAULT_HOLD_MAX_MS, record_skip
from ..policy.jitter import run_at
from ..policy.maintenance import windows_for
from ..run.ledger import Group, Ledger
from ..spend.guards import spend_verdict
from ..spend.ledger import tokens_by_date
from ..spend.rules import effective_guards
from ..store.targets import agent_target, holds_project, run_target_project
from .fate import Fate, expiry, occurrence_fate
from .limits import LEDGER_LIMITS, LimitUsage, count_dispatch, job_history, limit_usage, limited_jobs
from .schedule import job_zone, local_time, next_run

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


def waits_for_agent(job: dict[str, Any], project: Path, to: str, clock: Clock, *, workspace: Path,
                    seen: dict[Path, bool] | None = None) -> bool:
    """The one rule for a job that waits: it sends to the `live` session of a project (its own
    target resolved against `workspace`, else `project` with `to`) in which no session is live now.
    `seen`: each project's answer, for a caller judging many jobs at one instant (a preview)."""
    target = agent_target(job, project, to, workspace=workspace)
    if target is None:
        return False
    where, conversation = target
    if conversation != "live":
        return False
    if seen is not None and where in seen:
        return seen[where]
    waits = holds_project(where) and freshest_live(list_sessions(where, clock)) is None
    if seen is not None:
        seen[where] = waits
    return waits


def hold_state(job: dict[str, Any], entry: dict[str, Any], now: int, *, project: Path, to: str,
               clock: Clock, workspace: Path, budget: dict[str, Any] | None = None,
               seen: dict[Path, bool] | None = None) -> dict[str, Any] | None:
    """What the pass does with a due job for want of a live agent, or because a spend guard
    stops its dispatch (cron/spend/guards.py; `budget`: the workspace's) — the one rule the pass and
    `cron next` share: None when it need not wait; `status` `waiting` (held, not claimed) until
    `giveUpAtMs`, then `given_up` (no live agent: the pass runs it, and its dispatch fails; a
    guard: the occurrence is skipped with the guard's `reason`). A one-shot held by a guard has
    no other occurrence to skip to: it waits (`giveUpAtMs` None) until the guard lets it go. A
    job not yet due is judged as the pass at its time will (`--hold-max 0`: given up at once)."""
    due_at = run_at(job, entry, job["lifecycle"]["nextRunAtMs"])  # with its --jitter
    give_up_at = due_at + entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS)
    if not waits_for_agent(job, project, to, clock, workspace=workspace, seen=seen):
        verdict = spend_verdict(job, entry, budget, project=project, to=to, clock=clock, workspace=workspace)
        if verdict is None or verdict.reason is None:
            return None
        if job["schedule"]["kind"] == "at":
            return {"status": "waiting", "reason": verdict.reason, "detail": verdict.detail, "dueSinceMs": due_at,
                    "giveUpAtMs": None}
        return {"status": "waiting" if max(now, due_at) < give_up_at else "given_up", "reason": verdict.reason,
                "detail": verdict.detail, "dueSinceMs": due_at, "giveUpAtMs": give_up_at}
    return {"status": "waiting" if max(now, due_at) < give_up_at else "given_up", "reason": "no_live_session",
            "dueSinceMs": due_at, "giveUpAtMs": give_up_at}


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

    def entry(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.policy["jobs"].setdefault(job["id"], {})

    # --- the decision ---------------------------------------------------------------------------

    def usage(self, job: dict[str, Any], entry: dict[str, Any], *, unread: bool = True) -> LimitUsage:
        if self._history is None and any(entry.get(key) for key in LEDGER_LIMITS):
            # once per pass, for the jobs with a limit: counting never walks the whole ledger per job
            self._history = job_history(self.ledger, limited_jobs(self.policy))
        return limit_usage(job, entry, claims=self.store["activeClaims"], ledger=self.ledger, project=self.project,
                           clock=self.clock, workspace=self.workspace, unread=unread, sessions=self.sessions,
                           history=self._history)

    def admit(self, job: dict[str, Any]) -> bool:
        """True: claim and run the job's due occurrence now. False: admission dealt with it (the
        job and the policy in memory say how; the pass writes them). Each occurrence's fate is
        the one rule the previews show too (`fate.occurrence_fate`)."""
        entry = self.policy["jobs"].get(job["id"], {})
        usage = self.usage(job, entry) if entry else LimitUsage(0, None)
        cap = effective_guards(entry, self.policy.get("budget")).get("maxTokensPerDay")
        if cap is not None and self.spend is not None:  # --max-tokens-per-day (cron/spend/ledger.py)
            usage.token_cap, usage.tokens = cap, tokens_by_date(self.spend.load(), job["id"])
        self._fold_proven(job, entry, usage)
        fate = self._skip_occurrences(job, entry, self.clock.now_ms(), usage)
        if fate.action in ("expire", "pause"):
            self.pause(job, "expired" if fate.action == "expire" else "max_unconsumed", fate.detail)
            return False
        if fate.hold is not None:  # the pass tells it once, with when the agent was last seen (cron/run/pass_report.py)
            held = fate.hold
            seen = last_seen(list_sessions(run_target_project(job, self.project, workspace=self.workspace), self.clock))
            row = {"jobId": job["id"], "name": job["name"], "status": held["status"], "reason": held["reason"],
                   "dueSinceMs": held["dueSinceMs"], "giveUpAtMs": held["giveUpAtMs"], "agentLastSeenMs": seen}
            if "detail" in held:  # held by a spend guard (cron/spend/guards.py): why, in words
                row["detail"] = held["detail"]
            if fate.action == "hold":
                self.done.waiting.append(row)
                return False
            self.done.given_up.append(row)
        if fate.action == "run":  # a guard that could not read its figure lets it run: said, not silent
            verdict = spend_verdict(job, entry, self.policy.get("budget"), project=self.project, to=self.to,
                                    clock=self.clock, workspace=self.workspace)
            if verdict is not None and verdict.reason is None and verdict.unreadable:
                self.report.warn(f"{job['name']}: its spend guard {verdict.detail}")
        return fate.action == "run"

    def count(self, job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any] | None) -> None:
        """Count a settled scheduled run against the job's limits (`count_dispatch`)."""
        entry = self.policy["jobs"].get(job["id"])
        if entry and count_dispatch(entry, job, start, outcome, project=self.project, clock=self.clock,
                                    workspace=self.workspace, sessions=self.sessions):
            self.policy_changed = True

    def after_run(self, job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any]) -> None:
        """Count a scheduled run against the job's limits; expire the job when it reached them."""
        self.count(job, start, outcome)
        entry = self.policy["jobs"].get(job["id"])
        if entry and job["schedule"]["kind"] != "at" and job["lifecycle"]["status"] == "scheduled":
            self._expired(job, entry, job["lifecycle"]["nextRunAtMs"], self.usage(job, entry, unread=False))

    def _fold_proven(self, job: dict[str, Any], entry: dict[str, Any], usage: LimitUsage) -> None:
        """Raise the policy file's counts to what the ledger proves, and drop a day stamped later
        than today in the job's zone (an edit, or a clock that ran ahead; its runs were never
        counted): the policy file is the half of every count that outlives the ledger's
        retention, so it counts on from the truth. Done when the job is admitted, after the pass
        has settled and counted every claim, so that the run this pass adds is counted once."""
        if usage.proven is None:
            return
        before = {key: entry.get(key) for key in ("runs", "day")}
        if usage.proven > entry.get("runs", 0):
            entry["runs"] = usage.proven
        if entry.get("maxRunsPerDay"):
            today = local_time(self.clock.now_ms(), job_zone(job, entry)).date().isoformat()
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

    def _expired(self, job: dict[str, Any], entry: dict[str, Any], next_at: int, usage: LimitUsage) -> bool:
        expired = expiry(job, entry, next_at, usage)
        if expired is not None:
            self.pause(job, "expired", expired.detail)
        return expired is not None

    def _skip_occurrences(self, job: dict[str, Any], entry: dict[str, Any], now: int, usage: LimitUsage) -> Fate:
        """Skip due occurrences the policy does not run, one by one, recording them; the fate of
        the first one it does not skip."""
        life = job["lifecycle"]

        def held() -> dict[str, Any] | None:
            return hold_state(job, entry, now, project=self.project, to=self.to, clock=self.clock,
                              workspace=self.workspace, budget=self.policy.get("budget"))

        skipped: dict[str, list[int]] = {}
        windows = windows_for(self.policy, job["id"])
        fate = occurrence_fate(job, entry, life["nextRunAtMs"], now, usage, held=held, windows=windows)
        for _ in range(OCCURRENCE_BUDGET):
            if fate.action != "skip":
                break
            assert fate.reason is not None  # a skip has its reason
            found = next_run(job["schedule"], life["nextRunAtMs"])
            skipped.setdefault(fate.reason, []).append(life["nextRunAtMs"])
            if found is None:
                fate = Fate("run")  # no future occurrence: the pass runs this one and reports it
                break
            life["nextRunAtMs"] = found[0]
            fate = occurrence_fate(job, entry, life["nextRunAtMs"], now, usage, held=held, windows=windows)
        else:  # still due after the budget: the rest go together, up to now, for the same reason
            found = next_run(job["schedule"], now)
            if found is not None and fate.reason is not None:
                skipped.setdefault(fate.reason, []).append(life["nextRunAtMs"])
                life["nextRunAtMs"] = found[0]
                fate = occurrence_fate(job, entry, life["nextRunAtMs"], now, usage, held=held, windows=windows)
        if skipped:
            entry = self.policy["jobs"].setdefault(job["id"], entry)  # no settings: in a window, or a budget's guard
            self.touched.add(job["id"])
            self.policy_changed = self.store_changed = True
        for reason, times in skipped.items():
            record_skip(entry, times[0], times[-1], len(times), reason, now)
            self.done.skipped.append({"jobId": job["id"], "name": job["name"], "reason": reason,
                                      "count": len(times), "firstMs": times[0], "lastMs": times[-1]})
        return fate

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

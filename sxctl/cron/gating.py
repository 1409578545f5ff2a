"""What a scheduler pass does with a due job before it claims it, by the job's sxctl policy
(cron/policy.py): expire it (lifetime), skip occurrences (stale catch-up, inactive hours, the
daily limit), hold it while no agent is live, or pause it when nobody reads what it sends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..report import Reporter
from .ledger import Ledger
from .policy import DEFAULT_HOLD_MAX_MS, is_active_time, record_skip
from .receipts import consumption, execution_dispatch, run_target_project
from .schedule import next_run

#: occurrences judged one by one in a pass (an every-second job after a long outage has more):
#: beyond this the rest are skipped together
OCCURRENCE_BUDGET = 10_000


@dataclass
class GateReport:
    """What the gates did in one pass, for the pass's JSON report."""

    waiting: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    paused: list[dict[str, Any]] = field(default_factory=list)


def job_zone(job: dict[str, Any]):
    """The zone a job's days and hours are counted in: its cron zone, else UTC."""
    from .schedule import load_cron_zone

    return load_cron_zone(job["schedule"].get("tz") or "UTC") if job["schedule"]["kind"] == "cron" \
        else load_cron_zone("UTC")


def local_time(ms: int, zone):
    from ..timeparse import datetime_of_ms

    return datetime_of_ms(ms, zone)


def waits_for_agent(job: dict[str, Any], project: Path, to: str, clock: Clock) -> bool:
    """The one rule for a job that waits: it sends to the `live` session of a project (its own
    target, else `project` with `to`) in which no session is live now."""
    from ..project import freshest_live, list_sessions

    if job["payload"]["kind"] not in ("agent_turn", "heartbeat_event"):
        return False
    target = job.get("deliveryTarget")
    if target is None:
        conversation = to
    elif target["destinationEndpoint"]["channelType"] == "scorpiox-inbox":
        conversation = target["destinationEndpoint"]["conversationId"]
    else:
        return False
    where = run_target_project(job, project)
    if conversation != "live" or not (where / ".scorpiox").is_dir():
        return False
    return freshest_live(list_sessions(where, clock)) is None


def hold_state(job: dict[str, Any], entry: dict[str, Any], now: int, *, project: Path, to: str,
               clock: Clock) -> dict[str, Any] | None:
    """What the pass does with a due job for want of a live agent (the one rule the pass and
    `cron next` share): None when it need not wait; `status` `waiting` (held, not claimed) until
    `giveUpAtMs`, then `given_up` (the pass runs it, and its dispatch fails)."""
    if not waits_for_agent(job, project, to, clock):
        return None
    due_at = job["lifecycle"]["nextRunAtMs"]
    give_up_at = due_at + entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS)
    return {"status": "waiting" if now <= give_up_at else "given_up", "reason": "no_live_session",
            "dueSinceMs": due_at, "giveUpAtMs": give_up_at}


# --- counting runs against the limits ---------------------------------------------------------------

@dataclass
class LimitUsage:
    """How much of its limits a job has used: `runs` toward --max-runs, `day` (`{date, runs}`,
    the newest day counted, in the job's zone) toward --max-runs-per-day, and `unread` (its
    newest messages all still unread, up to its --max-unconsumed; None without that limit)."""

    runs: int
    day: dict[str, Any] | None
    unread: int | None = None

    def runs_on(self, date: str) -> int:
        return self.day["runs"] if self.day is not None and self.day["date"] == date else 0


def count_dispatch(entry: dict[str, Any], job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any] | None,
                   *, project: Path, clock: Clock, sessions: dict[Path, list] | None = None) -> bool:
    """Fold one scheduled execution into the entry's counts when it dispatched
    (`execution_dispatch`); True when it was counted now. `countedId` remembers the last one
    counted, so an execution is counted once: a pass counts its run in the policy file, written
    before the store write that drops the run's claim, and a pass killed before that leaves the
    claim, which the next pass settles and counts (or finds counted). Manual runs spend no limit."""
    if start["trigger"] == "manual" or entry.get("countedId") == start["executionId"]:
        return False
    if execution_dispatch(start, outcome, job, project, clock, sessions) is None:
        return False
    entry["runs"] = entry.get("runs", 0) + 1
    date = local_time(start["scheduledForMs"], job_zone(job)).date().isoformat()
    day = entry.get("day")
    if day is None or day["date"] < date:
        entry["day"] = {"date": date, "runs": 1}
    elif day["date"] == date:
        entry["day"] = {"date": date, "runs": day["runs"] + 1}
    entry["countedId"] = start["executionId"]
    return True


def limit_usage(job: dict[str, Any], entry: dict[str, Any], *, claims: list[dict[str, Any]], ledger: Ledger | None,
                project: Path, clock: Clock, unread: bool = True,
                sessions: dict[Path, list] | None = None) -> LimitUsage:
    """THE counting rule of every run limit, from durable facts only — used by the pass before it
    admits a job and by the views (`cron list/show`):

    - runs and runs per day: the counts folded into the policy file (`count_dispatch`), plus each
      of the job's claims not yet folded — a pass killed after it dispatched — whose execution
      dispatched by the ledger and the inbox (`execution_dispatch`: a claim without a start row
      sent nothing; an unsettled one, whose message is in the inbox, did);
    - unread: the job's newest dispatched inbox messages since its limits were last reset, an
      `unknown` run whose message is in the inbox included, counted while they are still pending.
    A run that dispatched nothing (failed before sending, a held occurrence given up past
    --hold-max) spends nothing."""
    counted: dict[str, Any] = {key: entry[key] for key in ("runs", "day", "countedId") if key in entry}
    for claim in claims:
        if claim["jobId"] != job["id"]:
            continue
        group = ledger.groups.get(claim["executionId"]) if ledger is not None else None
        start = group.start if group is not None else None
        outcome = group.terminal["outcome"] if group is not None and group.terminal is not None else None
        if start is not None:  # a claim without its start row dispatched nothing
            count_dispatch(counted, job, start, outcome, project=project, clock=clock, sessions=sessions)
    usage = LimitUsage(counted.get("runs", 0), counted.get("day"))
    limit = entry.get("maxUnconsumed")
    if unread and limit and ledger is not None:
        usage.unread = _unread_streak(job, entry, limit, ledger, project, clock, sessions)
    return usage


def _unread_streak(job: dict[str, Any], entry: dict[str, Any], limit: int, ledger: Ledger, project: Path,
                   clock: Clock, sessions: dict[Path, list] | None) -> int:
    """How many of the job's newest inbox messages (since its limits were last reset), up to
    `limit`, are still unread."""
    since = entry.get("limitsFromMs", 0)
    groups = [g for g in ledger.groups.values()
              if g.start is not None and g.start["jobId"] == job["id"] and g.start["startedAtMs"] >= since]
    groups.sort(key=lambda g: g.start["startedAtMs"], reverse=True)  # type: ignore[index]
    where = run_target_project(job, project)
    streak = 0
    for group in groups:
        outcome = group.terminal["outcome"] if group.terminal is not None else None
        dispatch = execution_dispatch(group.start, outcome, job, project, clock, sessions)
        if dispatch is None or dispatch.stem is None or dispatch.session_id is None:
            continue  # sent no message: neither read nor unread
        if consumption(where, dispatch.session_id, dispatch.stem, clock)["state"] != "pending":
            break
        streak += 1
        if streak >= limit:
            break
    return streak


class Gates:
    def __init__(self, policy: dict[str, Any], ledger: Ledger, *, project: Path, to: str, clock: Clock,
                 report: Reporter, store: dict[str, Any] | None = None) -> None:
        self.policy = policy
        self.ledger = ledger
        self.store = store if store is not None else {"activeClaims": []}
        self.project = project
        self.to = to
        self.clock = clock
        self.report = report
        self.done = GateReport()
        self.policy_changed = False
        self.store_changed = False
        self.touched: set[str] = set()  # ids of the jobs this pass changed (the store checks just those)
        self.sessions: dict[Path, list] = {}  # session lists of the projects searched for an unknown run's message

    def entry(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.policy["jobs"].setdefault(job["id"], {})

    # --- the decision ---------------------------------------------------------------------------

    def usage(self, job: dict[str, Any], entry: dict[str, Any], *, unread: bool = True) -> LimitUsage:
        return limit_usage(job, entry, claims=self.store["activeClaims"], ledger=self.ledger, project=self.project,
                           clock=self.clock, unread=unread, sessions=self.sessions)

    def admit(self, job: dict[str, Any]) -> bool:
        """True: claim and run the job's due occurrence now. False: the gates dealt with it (the
        job and the policy in memory say how; the pass writes them)."""
        entry = self.policy["jobs"].get(job["id"], {})
        now = self.clock.now_ms()
        recurring = job["schedule"]["kind"] != "at"
        usage = self.usage(job, entry) if entry else LimitUsage(0, None)
        if recurring and self._expired(job, entry, job["lifecycle"]["nextRunAtMs"], usage):
            return False
        if recurring and entry and not self._skip_occurrences(job, entry, now, usage):
            return False
        held = hold_state(job, entry, now, project=self.project, to=self.to, clock=self.clock)
        if held is not None and held["status"] == "waiting":
            self.done.waiting.append({"jobId": job["id"], "name": job["name"], "status": "waiting",
                                      "reason": held["reason"], "dueSinceMs": held["dueSinceMs"],
                                      "giveUpAtMs": held["giveUpAtMs"]})
            return False
        if held is not None:
            self.report.warn(f"{job['name']}: no live agent since {_clock_text(held['dueSinceMs'])}, longer than its "
                             f"hold limit; this occurrence is given up")
        limit = entry.get("maxUnconsumed")
        if limit and usage.unread is not None and usage.unread >= limit:
            self.pause(job, "max_unconsumed", f"its last {limit} message(s) are all unread")
            return False
        return True

    def count(self, job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any] | None) -> None:
        """Count a settled scheduled run against the job's limits (`count_dispatch`)."""
        entry = self.policy["jobs"].get(job["id"])
        if entry and count_dispatch(entry, job, start, outcome, project=self.project, clock=self.clock,
                                    sessions=self.sessions):
            self.policy_changed = True

    def after_run(self, job: dict[str, Any], start: dict[str, Any], outcome: dict[str, Any]) -> None:
        """Count a scheduled run against the job's limits; expire the job when it reached them."""
        self.count(job, start, outcome)
        entry = self.policy["jobs"].get(job["id"])
        if entry and job["schedule"]["kind"] != "at" and job["lifecycle"]["status"] == "scheduled":
            self._expired(job, entry, job["lifecycle"]["nextRunAtMs"], self.usage(job, entry, unread=False))

    # --- the gates ------------------------------------------------------------------------------

    def _expired(self, job: dict[str, Any], entry: dict[str, Any], next_at: int, usage: LimitUsage) -> bool:
        until, most = entry.get("untilMs"), entry.get("maxRuns")
        if until is not None and next_at > until:
            self.pause(job, "expired", f"its next run would be after --until {_clock_text(until)}")
            return True
        if most is not None and usage.runs >= most:
            self.pause(job, "expired", f"it has run {usage.runs} time(s) (--max-runs {most})")
            return True
        return False

    def _skip_occurrences(self, job: dict[str, Any], entry: dict[str, Any], now: int, usage: LimitUsage) -> bool:
        """Skip due occurrences the policy does not run, one by one, recording them; True when
        one is still due to run."""
        zone = job_zone(job)
        life = job["lifecycle"]
        skipped: dict[str, list[int]] = {}
        for _ in range(OCCURRENCE_BUDGET):
            due_at = life["nextRunAtMs"]
            if due_at > now:
                break
            reason = self._skip_reason(entry, due_at, now, zone, usage)
            if reason is None:
                break
            skipped.setdefault(reason, []).append(due_at)
            found = next_run(job["schedule"], due_at)
            if found is None:
                break
            life["nextRunAtMs"] = found[0]
        else:  # still due after the budget: the rest go together, up to now, for the same reason
            found = next_run(job["schedule"], now)
            if found is not None and reason is not None:
                skipped.setdefault(reason, []).append(life["nextRunAtMs"])
                life["nextRunAtMs"] = found[0]
        if skipped:
            self.touched.add(job["id"])
        for reason, times in skipped.items():
            record_skip(entry, times[0], times[-1], len(times), reason, now)
            self.done.skipped.append({"jobId": job["id"], "name": job["name"], "reason": reason,
                                      "count": len(times), "firstMs": times[0], "lastMs": times[-1]})
            self.report.note(f"{job['name']}: skipped {len(times)} occurrence(s) ({reason.replace('_', ' ')})")
        if skipped:
            self.policy_changed = self.store_changed = True
            if job["schedule"]["kind"] != "at" and self._expired(job, entry, life["nextRunAtMs"], usage):
                return False
        return life["nextRunAtMs"] <= now

    def _skip_reason(self, entry: dict[str, Any], due_at: int, now: int, zone, usage: LimitUsage) -> str | None:
        if entry.get("catchUp") == "skip" and now - due_at > entry["staleAfterMs"]:
            return "stale"
        local = local_time(due_at, zone)
        if not is_active_time(entry, local):
            return "inactive_hours"
        most = entry.get("maxRunsPerDay")
        if most is not None and usage.runs_on(local.date().isoformat()) >= most:
            return "max_runs_per_day"
        return None

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


def _clock_text(ms: int) -> str:
    from ..timeparse import format_ms

    return format_ms(ms, "%Y-%m-%d %H:%M UTC")

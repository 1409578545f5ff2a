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
from .receipts import consumption, run_target_project
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


class Gates:
    def __init__(self, policy: dict[str, Any], ledger: Ledger, *, project: Path, to: str, clock: Clock,
                 report: Reporter) -> None:
        self.policy = policy
        self.ledger = ledger
        self.project = project
        self.to = to
        self.clock = clock
        self.report = report
        self.done = GateReport()
        self.policy_changed = False
        self.store_changed = False
        self.touched: set[str] = set()  # ids of the jobs this pass changed (the store checks just those)

    def entry(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.policy["jobs"].setdefault(job["id"], {})

    # --- the decision ---------------------------------------------------------------------------

    def admit(self, job: dict[str, Any]) -> bool:
        """True: claim and run the job's due occurrence now. False: the gates dealt with it (the
        job and the policy in memory say how; the pass writes them)."""
        entry = self.policy["jobs"].get(job["id"], {})
        now = self.clock.now_ms()
        recurring = job["schedule"]["kind"] != "at"
        if recurring and self._expired(job, entry, job["lifecycle"]["nextRunAtMs"]):
            return False
        if recurring and entry and not self._skip_occurrences(job, entry, now):
            return False
        due_at = job["lifecycle"]["nextRunAtMs"]
        if waits_for_agent(job, self.project, self.to, self.clock):
            hold_max = entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS)
            if now - due_at <= hold_max:
                self.done.waiting.append({"jobId": job["id"], "name": job["name"], "status": "waiting",
                                          "reason": "no_live_session", "dueSinceMs": due_at,
                                          "giveUpAtMs": due_at + hold_max})
                return False
            self.report.warn(f"{job['name']}: no live agent since {_clock_text(due_at)}, longer than its hold "
                             f"limit; this occurrence is given up")
        limit = entry.get("maxUnconsumed")
        if limit and self._unread_streak(job, entry, limit) >= limit:
            self.pause(job, "max_unconsumed", f"its last {limit} message(s) are all unread")
            return False
        return True

    def after_run(self, job: dict[str, Any], scheduled_for: int) -> None:
        """Count a scheduled run against the job's limits; expire the job when it reached them."""
        entry = self.policy["jobs"].get(job["id"])
        if not entry:
            return
        entry["runs"] = entry.get("runs", 0) + 1
        date = local_time(scheduled_for, job_zone(job)).date().isoformat()
        day = entry.get("day") if entry.get("day", {}).get("date") == date else {"date": date, "runs": 0}
        entry["day"] = {"date": date, "runs": day["runs"] + 1}
        self.policy_changed = True
        if job["schedule"]["kind"] != "at" and job["lifecycle"]["status"] == "scheduled":
            self._expired(job, entry, job["lifecycle"]["nextRunAtMs"])

    # --- the gates ------------------------------------------------------------------------------

    def _expired(self, job: dict[str, Any], entry: dict[str, Any], next_at: int) -> bool:
        until, most = entry.get("untilMs"), entry.get("maxRuns")
        if until is not None and next_at > until:
            self.pause(job, "expired", f"its next run would be after --until {_clock_text(until)}")
            return True
        if most is not None and entry.get("runs", 0) >= most:
            self.pause(job, "expired", f"it has run {most} time(s) (--max-runs)")
            return True
        return False

    def _skip_occurrences(self, job: dict[str, Any], entry: dict[str, Any], now: int) -> bool:
        """Skip due occurrences the policy does not run, one by one, recording them; True when
        one is still due to run."""
        zone = job_zone(job)
        life = job["lifecycle"]
        skipped: dict[str, list[int]] = {}
        for _ in range(OCCURRENCE_BUDGET):
            due_at = life["nextRunAtMs"]
            if due_at > now:
                break
            reason = self._skip_reason(job, entry, due_at, now, zone)
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
            if job["schedule"]["kind"] != "at" and self._expired(job, entry, life["nextRunAtMs"]):
                return False
        return life["nextRunAtMs"] <= now

    def _skip_reason(self, job: dict[str, Any], entry: dict[str, Any], due_at: int, now: int, zone) -> str | None:
        if entry.get("catchUp") == "skip" and now - due_at > entry["staleAfterMs"]:
            return "stale"
        local = local_time(due_at, zone)
        if not is_active_time(entry, local):
            return "inactive_hours"
        most = entry.get("maxRunsPerDay")
        if most is not None:
            day = entry.get("day") or {}
            if day.get("date") == local.date().isoformat() and day.get("runs", 0) >= most:
                return "max_runs_per_day"
        return None

    def _unread_streak(self, job: dict[str, Any], entry: dict[str, Any], limit: int) -> int:
        """How many of the job's newest dispatched messages (since its limits were last reset),
        up to `limit`, are still unread."""
        since = entry.get("limitsFromMs", 0)
        groups = [g for g in self.ledger.groups.values()
                  if g.start is not None and g.start["jobId"] == job["id"] and g.start["startedAtMs"] >= since
                  and g.terminal is not None and g.terminal["outcome"].get("kind") == "inbox_dispatch"]
        groups.sort(key=lambda g: g.start["startedAtMs"], reverse=True)  # type: ignore[index]
        streak = 0
        project = run_target_project(job, self.project)
        for group in groups[:limit]:
            outcome = group.terminal["outcome"]  # type: ignore[index]
            if consumption(project, outcome["sessionId"], outcome["stem"], self.clock)["state"] != "pending":
                break
            streak += 1
        return streak

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

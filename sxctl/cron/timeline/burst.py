"""The catch-up budget (`cron tick --max-catchup N`, or the workspace's `cron defaults
--max-catchup N`): after an outage, at most N catch-up runs per pass; the other overdue jobs are
deferred to the next passes, which take them in due order (a deferred job keeps its past due
time, and the pass takes the longest waiting first) — a 12-hour outage does not fire every job
in one minute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CATCHUP_AFTER_MS = 90_000  # `cron tick --catchup-after`'s default: what the previews assume


def budget_of(option: int | None, policy: dict[str, Any]) -> int | None:
    """The pass's budget: its own `--max-catchup` (0: none), else the workspace default, else none."""
    if option is not None:
        return option or None
    return policy.get("defaults", {}).get("maxCatchup")


def is_catchup(due_at: int, now: int, catchup_after_ms: float) -> bool:
    """Would the pass run an occurrence due (with its --jitter) at `due_at` as a catch-up (later
    than --catchup-after)?"""
    return now - due_at > catchup_after_ms


@dataclass
class CatchupBudget:
    """The catch-up runs one pass may still make (`limit` None: no budget)."""

    limit: int | None
    spent: int = 0

    def admits(self, due_at: int, now: int, catchup_after_ms: float) -> bool:
        """May the pass run an admitted job due at `due_at` now? On-time runs always may; a
        catch-up spends one of the budget, or — spent — is deferred."""
        if self.limit is None or not is_catchup(due_at, now, catchup_after_ms):
            return True
        if self.spent >= self.limit:
            return False
        self.spent += 1
        return True


def defer(deferred: list[dict[str, Any]], admission: Any, job: dict[str, Any], reason: str,
          limit: int | None = None) -> None:
    """Leave a due job to the next pass (`reason` max_per_pass or max_catchup; its past due time
    puts it first there), in the pass's `deferred` rows; a job admission had given up on is not
    given up now (its row in `admission`, the pass's AdmissionReport, goes)."""
    admission.given_up = [row for row in admission.given_up if row["jobId"] != job["id"]]
    deferred.append({"jobId": job["id"], "name": job["name"], "reason": reason,
                     "nextRunAtMs": job["lifecycle"]["nextRunAtMs"], **({"maxCatchup": limit} if limit else {})})


def budget_notes(previews: dict[str, Any], budget: int | None, now: int, catchup_after_ms: float) -> None:
    """What the previews say of the overdue jobs past the workspace's catch-up budget: in due
    order, the first `budget` run in the next pass, the rest a pass later per `budget` (each
    first run's `note`; `previews`: job id -> `fate.Preview`)."""
    if not budget:
        return
    overdue = sorted(((p.runs[0]["at_ms"], job_id) for job_id, p in previews.items()  # in store order, as the
                      if p.runs and p.runs[0]["fate"].action == "run"                  # pass: ties keep it
                      and now - p.runs[0]["at_ms"] > catchup_after_ms), key=lambda pair: pair[0])
    for index, (_, job_id) in enumerate(overdue[budget:], start=budget):
        run = previews[job_id].runs[0]
        said = f"catch-up budget {budget} a pass: deferred {index // budget} pass(es)"
        run["note"] = f"{run['note']}; {said}" if run["note"] else said

"""Holding a due run: the one rule for what the pass does with a due job for want of a live agent,
or because a spend guard stops its dispatch (cron/spend/guards.py) — it waits, unclaimed, up to
the job's --hold-max, then is given up. The hold is measured from the occurrence a run would
stand for: the latest one due (a catch-up folds the earlier ones into it), so a machine that was
off for a weekend does not give up work that is still inside --hold-max."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ...clock import Clock
from ...project import freshest_live, list_sessions
from ..policy.job import Job
from ..spend.guards import GuardVerdict, spend_verdict
from ..store.targets import agent_target, holds_project


class Hold(NamedTuple):
    """A held (`waiting`, until `give_up_at_ms`) or given-up (`given_up`) due run. `reason`:
    `no_live_session`, or a spend guard's (rate_limit, token_budget, usage_unreadable; `detail`
    says why in words). `due_since_ms`: when its first unrun occurrence was due; the hold runs
    from the occurrence it stands for (`give_up_at_ms` less `hold_max_ms`). A one-shot held by a
    guard has no other occurrence to skip to: it waits (`give_up_at_ms` None) until the guard
    lets it go. (A named tuple: immutable, and made for each job of a listing at a tuple's cost.)"""

    status: str
    reason: str
    due_since_ms: int
    give_up_at_ms: int | None
    hold_max_ms: int
    detail: str | None = None

    @property
    def by_guard(self) -> bool:
        return self.reason != "no_live_session"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"status": self.status, "reason": self.reason, "dueSinceMs": self.due_since_ms,
                               "giveUpAtMs": self.give_up_at_ms, "holdMaxMs": self.hold_max_ms}
        if self.detail is not None:
            doc["detail"] = self.detail
        return doc


@dataclass
class Agents:
    """What the timeline asks of the agents at one instant: whether a job's target has a live
    session (each project asked once, `seen`) and the spend guards' verdict. `project` and `to`
    are where a job without a target of its own sends (the pass's --project and --to)."""

    project: Path
    to: str
    clock: Clock
    workspace: Path
    seen: dict[Path, bool] = field(default_factory=dict)

    def waits(self, job: Job) -> bool:
        """The one rule for a job that waits: it sends to the `live` session of a project
        (`targets.agent_target`) in which no session is live now."""
        target = agent_target(job.record, self.project, self.to, workspace=self.workspace)
        if target is None or target[1] != "live":
            return False
        where = target[0]
        if where not in self.seen:
            self.seen[where] = holds_project(where) and freshest_live(list_sessions(where, self.clock)) is None
        return self.seen[where]

    def verdict(self, job: Job) -> GuardVerdict | None:
        """The spend guards' verdict on the job now (None: it has none)."""
        if not job.guarded:  # most jobs: no figures to judge (a list of 10,000 asks for each)
            return None
        return spend_verdict(job.record, job.guards, project=self.project, to=self.to, clock=self.clock,
                             workspace=self.workspace)


def stands_for(job: Job, occurrence: int, now: int) -> int:
    """The occurrence a run of the job at `now` stands for, `occurrence` being its first unrun
    one: its latest due occurrence (a catch-up folds the earlier ones into it), or `occurrence`
    itself while it is not yet due."""
    if job.one_shot or job.run_at(occurrence) > now:
        return occurrence
    latest = job.last_at_or_before(now)
    while latest is not None and latest > occurrence and job.run_at(latest) > now:  # not due yet with its jitter
        latest = job.last_at_or_before(latest - 1)
    return occurrence if latest is None or latest < occurrence else latest


def hold_for(job: Job, occurrence: int, now: int, agents: Agents) -> Hold | None:
    """Whether the pass at `now` holds the job's run of `occurrence` (its first unrun one): None
    when it need not wait; `waiting` until the give-up time, then `given_up` (no live agent: the
    pass runs it, and its dispatch fails; a guard: the occurrence is skipped with the guard's
    reason). A job not yet due is judged as the pass at its time will (`--hold-max 0`: given up
    at once)."""
    reason, detail = "no_live_session", None
    if not agents.waits(job):
        verdict = agents.verdict(job)
        if verdict is None or verdict.reason is None:
            return None
        reason, detail = verdict.reason, verdict.detail
    due_at = job.run_at(occurrence)
    if reason != "no_live_session" and job.one_shot:
        return Hold("waiting", reason, due_at, None, job.hold_max_ms, detail)
    standing = stands_for(job, occurrence, now)
    give_up_at = job.run_at(standing) + job.hold_max_ms
    end = None if job.one_shot else job.span_end_ms(max(now, due_at))  # a late run is skipped once its hours end
    if end is not None:
        give_up_at = min(give_up_at, end)
    if max(now, due_at) >= give_up_at:
        return Hold("given_up", reason, due_at, give_up_at, job.hold_max_ms, detail)
    return Hold("waiting", reason, due_at, renewed_until(job, standing, give_up_at, end), job.hold_max_ms, detail)


#: how many occurrences ahead a hold's end is looked for before it is said to last while the agent is away
RENEWALS = 64


def renewed_until(job: Job, standing: int, give_up_at: int, end: int | None) -> int | None:
    """When the pass gives a held run up if the agent stays away: the hold on the occurrence it
    stands for ends at `give_up_at`, unless the next occurrence comes due by then — the catch-up
    then stands for that one and its hold starts again — until the active span's `end`. None: a
    new occurrence always comes first (`--hold-max` at least the job's period), so it waits as
    long as the agent is away (what `cron next`, the pass and `cron simulate` say; views that
    printed the first give-up time promised a time the pass never kept)."""
    if job.one_shot or job.hold_max_ms <= 0:
        return give_up_at
    if job.schedule["kind"] == "every":  # every gap is the period: arithmetic
        return end if job.schedule["everyMs"] <= job.hold_max_ms else give_up_at
    for _ in range(RENEWALS):
        found = job.next_after(standing)
        if found is None or job.run_at(found[0]) > give_up_at:
            return give_up_at
        standing = found[0]
        renewed = job.run_at(standing) + job.hold_max_ms
        if end is not None and renewed >= end:
            return end
        give_up_at = renewed
    return end

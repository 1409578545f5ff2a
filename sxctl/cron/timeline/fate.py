"""A job's timeline: its occurrences, each with the fate THE rule gives it — run it (on time or as
a catch-up), skip it (why), expire or pause the job (why), hold it for a live agent or a spend
guard (and give it up past --hold-max). The scheduler pass decides with `timeline`
(cron/timeline/admission.py) and every view shows it (`cron list/show/next`, `next`, `status`,
`watch`, doctor, metrics, `upcoming()`, through cron/timeline/previews.py); `cron simulate` runs
the pass itself. Nothing else computes when a job runs. docs/timeline.md tells the order in which
a fate is decided."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any, NamedTuple

from ...timeparse import LATEST_SCHEDULABLE_MS, chosen_display_zone, display_zone, duration_text, shown_time
from ..policy.job import Job
from ..policy.maintenance import window_at, window_text
from .hold import Agents, Hold, hold_for, stands_for
from .limits import LimitUsage

#: occurrences a preview judges per job before it stops looking (an every-minute cron job outside
#: its active hours skips ~1,000 before the next run; a month of them stays under this)
PREVIEW_BUDGET = 50_000


@dataclass(frozen=True)
class Fate:
    """What the pass does with one occurrence. `action`: `run` (claim and dispatch it; `reason`
    `given_up` when no live agent came within --hold-max: its dispatch fails), `skip` (`reason`
    stale, inactive_hours, max_runs_per_day, overlap, maintenance, max_tokens_per_day, ran_ahead, or a
    spend guard's reason past --hold-max), `expire` (the job is paused; `reason` until or max_runs),
    `pause` (`reason` max_unconsumed), `hold` (`reason` no_live_session, or a spend guard's —
    rate_limit, token_budget, usage_unreadable: waits, unclaimed, until `hold.give_up_at_ms`;
    maintenance: a one-shot waits for the window's end) or `not_due` (its time has not come).
    `detail`: why, in words (`words`, or what makes them when first asked: a hold's give-up time
    in words cost a listing of 10,000 jobs a formatted time each, and a listing shows none)."""

    action: str
    reason: str | None = None
    words: str | Callable[[], str] = ""
    hold: Hold | None = None

    @property
    def detail(self) -> str:
        if callable(self.words):
            object.__setattr__(self, "words", self.words())  # made once, then kept: still immutable
        words: str = self.words  # type: ignore[assignment]  # made above
        return words

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "detail": self.detail or None}


#: the two fates most occurrences get, made once (a Fate is immutable): a listing of 10,000 jobs
#: judged each one's next occurrence with a new one
RUN = Fate("run")
NOT_DUE = Fate("not_due")


def clock_text(ms: int, zone=None) -> str:
    """A time in a fate's words: in the display zone (`zone`: the one a view chose when the fate
    was made, `chosen_display_zone`, for words made later), labelled."""
    return _clock_text(ms, display_zone() if zone is None else zone)


@lru_cache(maxsize=4096)
def _clock_text(ms: int, zone) -> str:
    return shown_time(ms, zone, "%Y-%m-%d %H:%M")  # jobs of one expression share their times


def expiry(job: Job, occurrence: int, usage: LimitUsage, sent_at: int) -> Fate | None:
    """A recurring job's lifetime: the `expire` fate when `occurrence`, or the time a pass would
    send it (`sent_at`: nothing is sent after --until, not a catch-up either), lies past its
    --until, or it has spent its --max-runs; None while it lives."""
    if job.one_shot:
        return None
    if job.until_ms is not None and max(occurrence, sent_at) > job.until_ms:
        return Fate("expire", "until", f"its next run would be after --until {clock_text(job.until_ms)}")
    if job.max_runs is not None and usage.runs >= job.max_runs:
        return Fate("expire", "max_runs", f"it has run {usage.runs} time(s) (--max-runs {job.max_runs})")
    return None


def skip_reason(job: Job, occurrence: int, late: int, usage: LimitUsage, sent_at: int) -> str | None:
    """Why a recurring job's policy does not run `occurrence` in a pass that sends it at `sent_at`
    (lateness counted from its jittered time: `late` is `sent_at` less the job's --jitter offset)."""
    if job.catch_up == "skip" and late - occurrence > job.stale_after_ms:
        return "stale"
    if job.active is None and job.max_runs_per_day is None and usage.token_cap is None:
        return None  # nothing below applies: its wall time is not needed
    local = job.local(occurrence)
    if job.active is not None and not (job.active.allows(local) and job.active.allows(job.local(sent_at))):
        return "inactive_hours"  # its occurrence, or the pass that would send it, is outside them
    day = local.date().isoformat()
    if job.max_runs_per_day is not None and usage.runs_on(day) >= job.max_runs_per_day:
        return "max_runs_per_day"
    if usage.token_cap is not None and usage.tokens.get(day, 0) >= usage.token_cap:
        return "max_tokens_per_day"
    return None


def occurrence_fate(job: Job, occurrence: int, now: int, usage: LimitUsage, *,
                    held: Callable[[], Hold | None] | None = None) -> Fate:
    """THE fate of the job's `occurrence` in a pass at `now`, with its limits' `usage`
    (limits.limit_usage), in the order the pass decides (docs/timeline.md): lifetime, due time
    (with --jitter), an occurrence that ran while the clock was ahead, maintenance window, the
    policy's skips, the hold (`held`: hold.hold_for, asked only when it matters),
    --max-unconsumed, --overlap."""
    expired = expiry(job, occurrence, usage, now)
    if expired is not None:
        return expired
    late = now - (job.run_at(occurrence) - occurrence)  # due at its jittered time: as late as now - offset
    if occurrence > late:
        return NOT_DUE
    if occurrence in job.ran_ahead and not job.one_shot:  # cron/store/clock_repair.py
        return Fate("skip", "ran_ahead", "it ran already, while the clock was ahead (`cron repair --clock`)")
    window = window_at(job.windows, now if job.one_shot else occurrence, now)  # a one-shot waits; recurring skips
    if window is not None:
        return Fate("hold" if job.one_shot else "skip", "maintenance", window_text(window))
    if not job.one_shot:
        reason = skip_reason(job, occurrence, late, usage, sent_at=now)
        if reason is not None:
            late_pass = reason == "inactive_hours" and job.active is not None and job.active.allows(
                job.local(occurrence))  # its time was inside them: the pass that would send it is not
            return Fate("skip", reason, skip_text(reason, job, late_pass=late_pass))
    state = held() if held is not None else None
    if state is not None and state.by_guard:  # a spend guard (cron/spend/guards.py)
        if state.status == "waiting":
            return Fate("hold", state.reason, partial(_guard_hold_words, state, chosen_display_zone(), job.one_shot),
                        hold=state)
        return Fate("skip", state.reason, f"{state.detail}, past its --hold-max")
    if state is not None and state.status == "waiting":
        zone = chosen_display_zone()
        return Fate("hold", "no_live_session", lambda: f"waits for a live agent {hold_end_words(state, zone)}",
                    hold=state)
    if job.max_unconsumed and usage.unread is not None and usage.unread >= job.max_unconsumed:
        return Fate("pause", "max_unconsumed", f"its last {job.max_unconsumed} message(s) are all unread")
    if usage.pending is not None and not job.one_shot:  # --overlap skip/replace (cron/policy/overlap.py)
        if job.overlap == "skip":
            return Fate("skip", "overlap", skip_text("overlap", job))
        if job.overlap == "replace" and state is None:
            return Fate("run", words=f"its unread message {usage.pending['stem']}, which it replaces")
    if state is not None:
        since, zone = state.due_since_ms, chosen_display_zone()
        return Fate("run", "given_up", lambda: f"no live agent since {clock_text(since, zone)}, longer than its "
                    "hold limit; this occurrence is given up", hold=state)
    return RUN


def _guard_hold_words(state: Hold, zone, one_shot: bool) -> str:
    """Why a spend guard holds a run, and until when (in `zone`; a one-shot: until it lets go)."""
    return (state.detail or "") if one_shot else f"{state.detail}; waits {hold_end_words(state, zone)}"


def hold_end_words(state: Hold, zone) -> str:
    """How long a held recurring run waits (in `zone`): until its give-up time, or, when each new
    occurrence comes due before the hold ends (`hold.renewed_until`), for as long as it is held."""
    if state.give_up_at_ms is not None:
        return f"until {clock_text(state.give_up_at_ms, zone)}"
    return f"as long as it takes (each occurrence renews its --hold-max {duration_text(state.hold_max_ms)})"


def skipped_words(reason: str, detail: str) -> str:
    """What a pass's report and `cron simulate` say of skipped occurrences: the skip's words
    (`skip_text`, a window's or a guard's), outside active hours or days said so."""
    return f"outside its {detail}" if reason == "inactive_hours" else detail


def skip_text(reason: str, job: Job, *, late_pass: bool = False) -> str:
    """A skip reason in words, with the job's own window and zone (`late_pass`: the occurrence
    was inside its active hours, the pass that would send it is not)."""
    if reason == "inactive_hours" and job.active is not None:
        return job.active.describe(job.zone_name) + (" (the pass came after them)" if late_pass else "")
    if reason == "max_runs_per_day":
        return f"--max-runs-per-day {job.max_runs_per_day} ({job.zone_name} days)"
    if reason == "max_tokens_per_day":
        return f"--max-tokens-per-day reached: tokens attributed to today's runs ({job.zone_name} days)"
    if reason == "overlap":
        return "--overlap skip: its previous message is still unread"
    return f"stale: more than --stale-after {duration_text(job.stale_after_ms)} late"


# --- the timeline ----------------------------------------------------------------------------------

class Step(NamedTuple):
    """One occurrence of a job's timeline and its fate: due at `occurrence_ms`, run (with the
    job's --jitter) at `run_ms`; `occurrences` > 1 when a stretch of occurrences outside the
    active hours is skipped alike in one step. (A named tuple: immutable, and made for each job of a
    10,000-job listing at a tuple's cost.)"""

    occurrence_ms: int
    run_ms: int
    dst: bool
    fate: Fate
    occurrences: int = 1


def timeline(job: Job, usage: LimitUsage, now: int, *, agents: Agents | None = None,
             first: tuple[int, bool] | None = None, budget: int = PREVIEW_BUDGET,
             due_only: bool = False) -> Iterator[Step]:
    """THE timeline of a scheduled job from its next unrun occurrence (or `first`): each
    occurrence judged by `occurrence_fate` as the pass at its time will judge it (a due one: the
    pass at `now`), the runs before it spent against its limits, the agent reading what it is sent
    (unread messages count for the first run only), and — until its first run or hold — the
    agents as they are now (`agents`; None: never held). Ends at an expiry or a pause, past what
    sxctl can schedule, or after `budget` occurrences; with `due_only` (the pass), at the first
    occurrence not yet due, judged as the pass at `now` judges it (`not_due`, or its expiry)."""
    spent, own = usage, False  # copied when first changed: a preview of one run changes nothing
    at, dst = first if first is not None else (job.next_run_ms, False)
    if at is None or at >= LATEST_SCHEDULABLE_MS:
        return
    decided = False  # a run or a hold came: the occurrences after it assume a live agent
    judged = 0
    while judged < budget:
        run = job.run_at(at)
        if due_only and run > now:
            yield Step(at, run, dst, occurrence_fate(job, at, now, spent))
            return
        held: Callable[[], Hold | None] | None = None
        if agents is not None and not decided:
            held = partial(hold_for, job, at, now, agents)
        fate = occurrence_fate(job, at, max(run, now), spent, held=held)
        if spent.unread is not None or spent.pending is not None:  # the agent reads what the runs before send
            spent, own = (spent, own) if own else (usage.copy(), True)
            spent.unread = spent.pending = None
        judged += 1
        if fate.action == "skip" and fate.reason in SKIPPED_TO_A_START and at >= now and not due_only:
            ahead = _skip_ahead(job, at, fate.reason)
            if ahead is not None:  # the occurrences up to the next window (or day) are skipped alike
                yield Step(at, run, dst, fate, 1 + ahead[1])
                at, dst = ahead[0], False
                continue
        yield Step(at, run, dst, fate)
        if fate.action in ("expire", "pause"):
            return
        if fate.action != "skip":
            decided = True
            if fate.reason is None or fate.action == "hold":  # a held run is assumed to go, as what follows is
                spent, own = (spent, own) if own else (usage.copy(), True)
                _spend(spent, job, at)
            if not job.one_shot and run <= now:  # a late run stands for every occurrence due now
                at = stands_for(job, at, now)
        found = job.next_after(at)
        if found is None or found[0] >= LATEST_SCHEDULABLE_MS:  # past what sxctl can schedule
            return
        at, dst = found


#: the skips that hold for every occurrence until a start: the next active window, the next day
SKIPPED_TO_A_START = ("inactive_hours", "max_runs_per_day", "max_tokens_per_day")


def _skip_ahead(job: Job, at: int, reason: str) -> tuple[int, int] | None:
    """For a job whose occurrence at `at` is skipped outside its active hours (or, `reason` a
    daily limit, once the day's runs or tokens are spent): the first occurrence from its next
    active window (the next day in its zone; or from a clock change before it) and how many lie
    between (skipped alike) — found by arithmetic, where walking an every-second job to
    tomorrow would judge 80,000 occurrences (and a cron job's, one croniter step each). None:
    no window, or no gain."""
    if job.one_shot:
        return None
    local = job.local(at).replace(tzinfo=None)
    if reason != "inactive_hours":
        start: datetime | None = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
    elif job.active is not None:
        start = job.active.next_start(local)
    else:
        return None
    if start is None:
        return None
    land = int(start.replace(tzinfo=job.zone).timestamp() * 1000)
    if reason == "inactive_hours":  # a window left as clocks fall back comes round again (a date does not)
        land = _first_clock_change(job, at, land)
    found = job.next_after(land - 1)
    if found is None:
        return None
    between = job.count_between(at, found[0] - 1, cap=PREVIEW_BUDGET * 1000, budget_s=0.5)
    return None if between == 0 else (found[0], between)


def _first_clock_change(job: Job, at: int, land: int) -> int:
    """`land`, or the first instant after `at` and before it where the zone's offset changes
    (found by halving): when clocks fall back, a window just left comes round again, and a
    window's start in a spring-forward gap has no instant of its own."""
    offset = job.local(at).utcoffset()
    if land <= at or job.local(land).utcoffset() == offset:
        return land
    low, high = at, land  # the offset at `low` is the first one, at `high` another
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if job.local(middle).utcoffset() == offset else (low, middle)
    return high


def _spend(usage: LimitUsage, job: Job, at: int) -> None:
    """One more run of the job, as the pass counts it (limits.count_dispatch)."""
    usage.runs += 1
    if job.max_runs_per_day:
        date = job.date_of(at)
        usage.days[date] = usage.runs_on(date) + 1


# --- previews ------------------------------------------------------------------------------------

@dataclass
class Preview:
    """A job's coming runs as the pass will decide them (`preview_runs`): each `{at_ms, dst,
    fate, skipped, note, mark}` (`at_ms` with the job's --jitter; `skipped` occurrences before it
    were skipped, `note` says why; `mark`: `run_mark`), and `end`, the fate that stops the series
    (expire or pause), if any."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    end: Fate | None = None

    @property
    def first(self) -> dict[str, Any] | None:
        return self.runs[0] if self.runs else None


def preview_runs(job: Job, usage: LimitUsage, now: int, count: int, *, agents: Agents | None = None,
                 budget: int = PREVIEW_BUDGET, start: int | None = None) -> Preview:
    """The next `count` runs of a scheduled job on its `timeline` (skipped occurrences are not
    runs; a hold is). `start` (`cron next --from`): only the runs from then on — those before it
    still spend the job's lifetime and daily limits."""
    preview = Preview()
    if job.status != "scheduled" or job.next_run_ms is None:
        return preview
    if job.active is not None and job.active.never_meets(job.schedule, job.zone_name, now):
        preview.end = Fate("never", "inactive_hours", f"none of its times falls in its "
                                                      f"{job.active.describe(job.zone_name)}")
        return preview
    first = None
    if start is not None and start > job.run_at(job.next_run_ms) and not (
            job.max_runs or job.max_runs_per_day or usage.token_cap):
        first = job.next_after(start - job.jitter_offset_ms - 1)  # nothing before `start` changes what follows
        if first is None:
            return preview
        agents = None  # the agents now say nothing of a run after `start`
        usage = replace(usage, pending=None)  # nor does the message unread now
    skipped = 0  # occurrences skipped before the next run, and why (`notes`, in order)
    notes: dict[str, None] = {}
    for step in timeline(job, usage, now, agents=agents, first=first, budget=budget):
        fate = step.fate
        if fate.action in ("expire", "pause"):
            preview.end = fate
            return preview
        if fate.action == "skip":
            skipped, notes[fate.detail] = skipped + step.occurrences, None
            continue
        if (fate.action, fate.reason) in (("run", None), ("hold", "maintenance")) and fate.detail:
            notes[fate.detail] = None  # what the run does besides (--overlap replace), a one-shot's window
        if start is None or step.run_ms >= start:
            preview.runs.append({"at_ms": step.run_ms, "dst": step.dst, "fate": fate, "skipped": skipped,
                                 "note": "; ".join(notes) or None, "mark": run_mark(fate, step.run_ms, now)})
        skipped, notes = 0, {}
        if len(preview.runs) >= count:
            return preview
    if not preview.runs and skipped:  # every occurrence it judged is skipped: say why, not just "-"
        preview.end = Fate("none", "skipped", f"{skipped} occurrence(s) ahead all skipped: {'; '.join(notes)}")
    return preview


def run_mark(fate: Fate, run_ms: int, now: int) -> str | None:
    """THE mark every view shows beside a coming run (`cron list`, `cron next`, `next`, `status`,
    docs/timeline.md): `waiting for agent` (due, held for a live agent; `will wait for agent` when
    it is not due yet and no agent is live now), `held: <guard>` (a spend guard holds it; `will be
    held: <guard>`), `maintenance` (a one-shot waits for its window's end), `given up` (past
    --hold-max: the next pass gives it up; `will be given up`: no agent is live now and its
    --hold-max is 0), `due` (the next pass runs it; `JobPreviews` makes it `overdue` when the
    passes missed it), or None."""
    due = run_ms <= now
    if fate.action == "hold" and fate.hold is not None:
        if fate.hold.by_guard:
            return f"{'held' if due else 'will be held'}: {(fate.reason or '').replace('_', ' ')}"
        return "waiting for agent" if due else "will wait for agent"
    if fate.action == "hold":
        return "maintenance"
    if fate.reason == "given_up":
        return "given up" if due else "will be given up"
    return "due" if due else None


def end_mark(preview: Preview) -> str | None:
    """The mark of a job with no run ahead: `never runs` (no time of its schedule falls in its
    active hours), `no run ahead` (every occurrence judged is skipped), None otherwise."""
    end = preview.end
    return {"never": "never runs", "none": "no run ahead"}.get(end.action) if end is not None else None


def next_text(preview: Preview) -> str | None:
    """What waits before the job's next run, or why it has none, in words (`cron list/show`)."""
    if preview.runs:
        return preview.runs[0]["note"]
    if preview.end is not None:
        words = {"expire": "expires", "pause": "pauses", "never": "never runs", "none": "no run ahead"}
        return f"{words[preview.end.action]}: {preview.end.detail}"
    return None

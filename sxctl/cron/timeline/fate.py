"""The fate of one occurrence of a job: THE rule the scheduler pass acts on (cron/timeline/admission.py)
and every preview shows (`cron list/show/next`, `next`, `watch`, `upcoming()`) — run it (on
time or as a catch-up), skip it (why), expire or pause the job (why), or hold it for a live agent
(and give it up past --hold-max). `cron simulate` runs the pass itself (cron/run/rehearsal.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...timeparse import LATEST_SCHEDULABLE_MS, shown_time
from ..policy.file import DAYS, is_active_time, parse_active_hours
from ..policy.jitter import offset_of
from ..policy.maintenance import window_at, window_text
from .burst import CATCHUP_AFTER_MS
from .limits import LimitUsage
from .schedule import job_zone, job_zone_name, local_time, next_run

#: occurrences a preview judges per job before it stops looking (an every-minute cron job outside
#: its active hours skips ~1,000 before the next run; a month of them stays under this)
PREVIEW_BUDGET = 50_000


@dataclass(frozen=True)
class Fate:
    """What the pass does with one occurrence. `action`: `run` (claim and dispatch it; `reason`
    `given_up` when no live agent came within --hold-max: its dispatch fails), `skip` (`reason`
    stale, inactive_hours, max_runs_per_day, overlap, maintenance, max_tokens_per_day, or a spend
    guard's reason past --hold-max), `expire` (the job is paused; `reason` until or max_runs),
    `pause` (`reason` max_unconsumed), `hold` (`reason` no_live_session, or a spend guard's —
    rate_limit, token_budget, usage_unreadable: waits, unclaimed, until `hold["giveUpAtMs"]`;
    maintenance: a one-shot waits for the window's end) or `not_due` (its time has not come).
    `detail`: why, in words."""

    action: str
    reason: str | None = None
    detail: str = ""
    hold: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "detail": self.detail or None}


def clock_text(ms: int) -> str:
    return shown_time(ms, None, "%Y-%m-%d %H:%M")  # in the display zone, labelled


def expiry(job: dict[str, Any], entry: dict[str, Any], due_at: int, usage: LimitUsage) -> Fate | None:
    """A recurring job's lifetime: the `expire` fate when the occurrence at `due_at` lies past
    its --until or it has spent its --max-runs; None while it lives."""
    if job["schedule"]["kind"] == "at":
        return None
    until, most = entry.get("untilMs"), entry.get("maxRuns")
    if until is not None and due_at > until:
        return Fate("expire", "until", f"its next run would be after --until {clock_text(until)}")
    if most is not None and usage.runs >= most:
        return Fate("expire", "max_runs", f"it has run {usage.runs} time(s) (--max-runs {most})")
    return None


def skip_reason(entry: dict[str, Any], due_at: int, now: int, zone, usage: LimitUsage,
                sent_at: int | None = None) -> str | None:
    """Why a recurring job's policy does not run the occurrence at `due_at` in a pass at `now`
    (lateness counted from its jittered time: `now` less the job's --jitter offset; `sent_at`:
    when the pass would send it, `now` itself without jitter)."""
    if entry.get("catchUp") == "skip" and now - due_at > entry["staleAfterMs"]:
        return "stale"
    local = local_time(due_at, zone)
    if not is_active_time(entry, local):
        return "inactive_hours"
    if now - due_at > CATCHUP_AFTER_MS and not is_active_time(entry, local_time(sent_at or now, zone)):
        return "inactive_hours"  # a catch-up is sent now: at night too, it would be waste
    most = entry.get("maxRunsPerDay")
    if most is not None and usage.runs_on(local.date().isoformat()) >= most:
        return "max_runs_per_day"
    if usage.token_cap is not None and usage.tokens.get(local.date().isoformat(), 0) >= usage.token_cap:
        return "max_tokens_per_day"
    return None


def occurrence_fate(job: dict[str, Any], entry: dict[str, Any], due_at: int, now: int, usage: LimitUsage, *,
                    held: Callable[[], dict[str, Any] | None] | None = None,
                    windows: tuple[dict[str, Any], ...] = ()) -> Fate:
    """THE fate of the occurrence of `job` due at `due_at`, in a pass at `now`, with the job's
    policy `entry` and its limits' `usage` (limits.limit_usage). `held` says whether the pass
    holds a due job for want of a live agent (admission.hold_state; asked only when it matters).
    `windows`: the maintenance windows that apply to the job (maintenance.windows_for). A job's
    --jitter delays when the occurrence is due (`jitter.offset_of`): lateness counts from then."""
    expired = expiry(job, entry, due_at, usage)
    if expired is not None:
        return expired
    late = now - offset_of(job, entry)  # due at due_at + the --jitter offset: as late as now - offset
    if due_at > late:
        return Fate("not_due")
    one_shot = job["schedule"]["kind"] == "at"  # it waits for the end of the window; a recurring job skips
    window = window_at(windows, now if one_shot else due_at, now)
    if window is not None:
        return Fate("hold" if one_shot else "skip", "maintenance", window_text(window))
    if job["schedule"]["kind"] != "at" and (entry or usage.token_cap is not None):
        reason = skip_reason(entry, due_at, late, job_zone(job, entry), usage, sent_at=now)
        if reason is not None:
            return Fate("skip", reason, skip_text(reason, job, entry))
    state = held() if held is not None else None
    if state is not None and state["reason"] != "no_live_session":  # a spend guard (cron/spend/guards.py)
        if state["status"] == "waiting":
            until = f"; waits until {clock_text(state['giveUpAtMs'])}" if state["giveUpAtMs"] is not None else ""
            return Fate("hold", state["reason"], f"{state['detail']}{until}", hold=state)
        return Fate("skip", state["reason"], f"{state['detail']}, past its --hold-max")
    if state is not None and state["status"] == "waiting":
        return Fate("hold", "no_live_session", f"waits for a live agent until {clock_text(state['giveUpAtMs'])}",
                    hold=state)
    limit = entry.get("maxUnconsumed")
    if limit and usage.unread is not None and usage.unread >= limit:
        return Fate("pause", "max_unconsumed", f"its last {limit} message(s) are all unread")
    if usage.pending is not None and job["schedule"]["kind"] != "at":  # --overlap skip/replace (cron/policy/overlap.py)
        if entry.get("overlap") == "skip":
            return Fate("skip", "overlap", skip_text("overlap", job, entry))
        if entry.get("overlap") == "replace" and state is None:
            return Fate("run", detail=f"its unread message {usage.pending['stem']}, which it replaces")
    if state is not None:
        return Fate("run", "given_up", f"no live agent since {clock_text(state['dueSinceMs'])}, longer than its "
                    "hold limit; this occurrence is given up", hold=state)
    return Fate("run")


def skip_text(reason: str, job: dict[str, Any], entry: dict[str, Any]) -> str:
    """A skip reason in words, with the job's own window and zone."""
    zone = job_zone_name(job, entry)
    if reason == "inactive_hours":
        days = f" {','.join(entry['activeDays'])}" if entry.get("activeDays") else ""
        return f"active hours {entry['activeHours']}{days} {zone}"
    if reason == "max_runs_per_day":
        return f"--max-runs-per-day {entry['maxRunsPerDay']} ({zone} days)"
    if reason == "max_tokens_per_day":
        return f"--max-tokens-per-day reached: tokens attributed to today's runs ({zone} days)"
    if reason == "overlap":
        return "--overlap skip: its previous message is still unread"
    return f"stale: more than --stale-after {entry.get('staleAfterMs', 0) // 1000}s late"


# --- previews --------------------------------------------------------------------------------------

@dataclass
class Preview:
    """A job's coming runs as the pass will decide them (`preview_runs`): each `{at_ms, dst,
    fate, skipped, note}` (`at_ms` with the job's --jitter; `skipped` occurrences before it were
    skipped, `note` says why), and
    `end`, the fate that stops the series (expire or pause), if any."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    end: Fate | None = None


def preview_runs(job: dict[str, Any], entry: dict[str, Any], usage: LimitUsage, now: int, count: int, *,
                 held: Callable[[], dict[str, Any] | None] | None = None, budget: int = PREVIEW_BUDGET,
                 start: int | None = None, windows: tuple[dict[str, Any], ...] = ()) -> Preview:
    """The next `count` occurrences of a scheduled job that will run, each judged by
    `occurrence_fate` as if a pass ran at its time (an overdue one: now, with `held`), the runs
    before it spent against its limits, and the agent reading what it is sent (unread messages
    count only for the occurrence due now). `start` (`cron next --from`): only the runs from
    then on — those before it still spend the job's lifetime and daily limits."""
    preview = Preview()
    life = job["lifecycle"]
    if life["status"] != "scheduled":
        return preview
    spent = LimitUsage(usage.runs, dict(usage.day) if usage.day else None, usage.unread, dict(usage.days),
                       pending=usage.pending, token_cap=usage.token_cap, tokens=dict(usage.tokens))
    at, dst = life["nextRunAtMs"], False
    offset = offset_of(job, entry)  # --jitter: each run is this much after its occurrence
    if start is not None and start > at + offset and not (entry.get("maxRuns") or entry.get("maxRunsPerDay")
                                                          or usage.token_cap):
        found = next_run(job["schedule"], start - offset - 1)  # nothing before `start` changes what follows
        if found is None or found[0] >= LATEST_SCHEDULABLE_MS:
            return preview
        (at, dst), held = found, None
        spent.pending = None  # the message unread now says nothing of a run after `start`
    skipped, notes = 0, dict[str, None]()  # occurrences skipped before the next run, and why
    for step in range(budget):
        fate = occurrence_fate(job, entry, at, max(at + offset, now), spent, held=held if step == 0 else None,
                               windows=windows)
        spent.unread = spent.pending = None  # the agent reads what the runs before send
        if fate.action in ("expire", "pause"):
            preview.end = fate
            return preview
        if fate.action == "skip":
            skipped, notes[fate.detail] = skipped + 1, None
            ahead = _skip_ahead(job, entry, at) if fate.reason == "inactive_hours" and at >= now else None
            if ahead is not None:  # the `every` occurrences up to the next window are skipped alike
                skipped += ahead[1]
                at, dst = ahead[0], False
                continue
        else:
            if fate.detail and (fate.action, fate.reason) in (("run", None), ("hold", "maintenance")):
                notes[fate.detail] = None  # what the run does besides (--overlap replace), a one-shot's window
            if start is None or at + offset >= start:
                preview.runs.append({"at_ms": at + offset, "dst": dst, "fate": fate, "skipped": skipped,
                                     "note": "; ".join(notes) or None})
            skipped, notes = 0, {}
            if fate.action == "run" and fate.reason is None:
                _spend(spent, job, entry, at)
            if len(preview.runs) >= count:
                return preview
        found = next_run(job["schedule"], at)
        if found is None or found[0] >= LATEST_SCHEDULABLE_MS:  # past what sxctl can schedule
            return preview
        at, dst = found
    return preview


def _skip_ahead(job: dict[str, Any], entry: dict[str, Any], at: int) -> tuple[int, int] | None:
    """For an `every` job whose occurrence at `at` falls outside its active hours: the first
    occurrence from its next active window (or from a clock change before it) and how many lie
    between (all outside the window, skipped alike) — arithmetic, where walking an every-second
    job to tomorrow's window would judge 80,000 occurrences. None: no window, or no gain."""
    schedule = job["schedule"]
    if schedule["kind"] != "every":
        return None
    zone = job_zone(job, entry)
    start = _next_window_start(entry, local_time(at, zone).replace(tzinfo=None))
    if start is None:
        return None
    land = _first_clock_change(at, int(start.replace(tzinfo=zone).timestamp() * 1000), zone)
    found = next_run(schedule, land - 1)
    if found is None or found[0] <= at + schedule["everyMs"]:
        return None
    return found[0], (found[0] - at) // schedule["everyMs"] - 1


def _first_clock_change(at: int, land: int, zone) -> int:
    """`land`, or the first instant after `at` and before it where the zone's offset changes
    (found by halving): when clocks fall back, a window just left comes round again, and a
    window's start in a spring-forward gap has no instant of its own."""
    offset = local_time(at, zone).utcoffset()
    if land <= at or local_time(land, zone).utcoffset() == offset:
        return land
    low, high = at, land  # the offset at `low` is the first one, at `high` another
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if local_time(middle, zone).utcoffset() == offset else (low, middle)
    return high


def _next_window_start(entry: dict[str, Any], local):
    """The wall time (naive) at which the next active span after `local` begins: the active
    hours' start on an active day, or midnight on one when the window wraps past it."""
    from datetime import datetime, time, timedelta  # the start-up path never previews

    first, last = parse_active_hours(entry["activeHours"])
    days = entry.get("activeDays", DAYS)
    starts = [first, 0] if first > last else [first]
    found = [datetime.combine(local.date() + timedelta(days=ahead), time(minute // 60, minute % 60))
             for ahead in range(8) for minute in starts
             if DAYS[(local.weekday() + ahead) % 7] in days]
    return min((start for start in found if start > local), default=None)


def _spend(usage: LimitUsage, job: dict[str, Any], entry: dict[str, Any], at: int) -> None:
    """One more run of the job, as the pass counts it (limits.count_dispatch)."""
    usage.runs += 1
    if entry.get("maxRunsPerDay"):
        date = local_time(at, job_zone(job, entry)).date().isoformat()
        usage.days[date] = usage.runs_on(date) + 1


def next_text(preview: Preview) -> str | None:
    """What waits before the job's next run, or why it has none, in words (`cron list/show`)."""
    if preview.runs:
        return preview.runs[0]["note"]
    if preview.end is not None:
        return f"{'expires' if preview.end.action == 'expire' else 'pauses'}: {preview.end.detail}"
    return None

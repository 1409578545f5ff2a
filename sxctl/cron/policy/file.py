"""sxctl's own per-job settings, beside the comis store: `.scheduler/sxctl-policy.json`.

comis's strict store allows no extra keys, so what sxctl adds to a job — how long a due run waits
for the agent, what happens to missed occurrences, runaway limits, a lifetime, active hours — lives
here, keyed by job id. The file is versioned and strictly validated (an unknown key is exit 5, and
an invalid file is never rewritten), written atomically under the comis store lock, and entries of
removed jobs are dropped on the next write. A job without an entry gets the defaults below.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ... import faults
from ...errors import ConflictError, ErrorCode, InvalidDataError, UsageError
from ...fsio import PendingFile, read_data_file
from ...inbox.message import MAX_LIFETIME_MS
from ...jsondata import compact_json
from ...locks import MkdirLock
from ...timeparse import is_iana_zone_name, parse_time_in_zone_ms
from ..run.pings import MAX_URL_LEN, check_ping_url, url_rule
from ..spend.rules import BUDGET, GUARD_FIELDS, SPEND_SKIP_REASONS, GuardOptions, apply_guards
from ..store.file import job_named_by
from ..store.schema import EPOCH_MS, job_named_at
from ..store.schema_kit import (
    MAX_SAFE_INT,
    Arr,
    Bool,
    Check,
    Enum,
    Int,
    Node,
    Obj,
    SchemaError,
    Str,
    opt,
    read_checked_file,
    req,
    with_job,
)
from ..store.workspace import Workspace
from ..timeline.schedule import load_cron_zone
from .days import DAYS, parse_active_days, parse_active_hours
from .hosts import ANY, MAX_HOST_LEN, check_host_name, host_rule
from .jitter import MAX_JITTER_MS
from .keys import (
    CLOCK_REPAIR,
    DEFAULTS,
    MAX_RAN_AHEAD,
    OVERLAP_MODES,
    WINDOW,
    WORKSPACE_KEYS,
    Applied,
    needs_format_3,
    needs_format_4,
)
from .message_lifetime import apply_lifetime

FILE_CAP = 8 * 1024 * 1024  # the most a write produces (skip history is trimmed to fit)
READ_CAP = 2 * FILE_CAP  # the most a read takes: room for a file an older sxctl grew past FILE_CAP
DEFAULT_HOLD_MAX_MS = 24 * 3_600_000  # a due run waits this long for a live agent, then is given up
RECENT_SKIPS = 20  # skipped occurrences remembered per job (the total is counted beyond), fewer when the
#                   file would outgrow FILE_CAP (fit_to_cap)
SKIP_REASONS = ("stale", "inactive_hours", "max_runs_per_day", "overlap", "maintenance", "ran_ahead",
                *SPEND_SKIP_REASONS)
PAUSE_REASONS = ("max_unconsumed", "expired")
LIFETIME_KEYS = ("maxRuns", "untilMs")  # recurring jobs only


def _zone_rule(value: str) -> str | None:
    """An IANA zone this machine can load (a job's `--tz` when its schedule has no zone)."""
    try:
        load_cron_zone(value)
    except UsageError:
        return f"unknown time zone {value!r}"
    if not is_iana_zone_name(value):
        return f"not an IANA time zone name {value!r}"
    return None


def _version_rule(doc: Any) -> str | None:
    """Format 1 has no zones; format 2 is format 1 plus an entry's optional `tz`; format 3 adds
    the keys of `policy_keys.needs_format_3` (overlap, catch-up budget, maintenance windows,
    jitter, host pinning, pings, the spend guards)."""
    if doc["formatVersion"] < 4 and needs_format_4(doc):
        return f"{needs_format_4(doc)} needs formatVersion 4"
    if doc["formatVersion"] < 3 and needs_format_3(doc):
        return f"{needs_format_3(doc)} needs formatVersion 3"
    if doc["formatVersion"] == 1 and any("tz" in entry for entry in doc["jobs"].values()):
        return "a job's tz needs formatVersion 2"
    return None


def format_version(jobs: dict[str, Any], top: dict[str, Any] | None = None) -> int:
    """The version a file with these entries (and workspace keys `top`) is written as: 1 (what
    every sxctl reads) unless an entry keeps a zone (2) or a format-3 key (3); an sxctl that
    knows only an older format refuses the file, exit 5, rather than drop what it cannot honour."""
    if needs_format_4({**(top or {}), "jobs": jobs}):
        return 4
    if needs_format_3({**(top or {}), "jobs": jobs}):
        return 3
    return 2 if any("tz" in entry for entry in jobs.values()) else 1


def _clock_rule(value: str) -> str | None:
    """`HH:MM-HH:MM`, two different times of day."""
    try:
        parse_active_hours(value)
    except UsageError as error:
        return error.message
    return None


class Map(Node):
    """An object whose keys are ids (at most `max_items`) and whose values are all `value`."""

    def __init__(self, value: Node, max_items: int) -> None:
        self.value = value
        self.max_items = max_items

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, dict):
            raise SchemaError(path, "must be an object")
        if len(value) > self.max_items:
            raise SchemaError(path, f"must have at most {self.max_items} entries")
        for key, item in value.items():
            if not 1 <= len(key) <= 256:
                raise SchemaError(path, "job ids must be 1-256 characters")
            self.value.check(item, (path, f"[{key!r}]"))


ENTRY = Obj([
    opt("holdMaxMs", Int(0, MAX_SAFE_INT)),
    opt("catchUp", Enum(("once", "skip"))),
    opt("staleAfterMs", Int(1, MAX_SAFE_INT)),
    opt("missedNote", Bool()),
    opt("maxUnconsumed", Int(1, 1000)),
    opt("maxRunsPerDay", Int(1, 100_000)),
    opt("untilMs", EPOCH_MS),
    opt("maxRuns", Int(1, MAX_SAFE_INT)),
    opt("activeHours", Check(Str(11, 11), _clock_rule)),
    opt("activeDays", Check(Arr(Enum(DAYS), max_items=7), lambda days: None if days else "must name a day")),
    opt("tz", Check(Str(1, 128), _zone_rule)),  # format 2: the zone of an every/at job (schedule.job_zone)
    *GUARD_FIELDS,  # format 3: the spend guards (cron/spend/rules.py)
    opt("overlap", Enum(OVERLAP_MODES[1:])),  # format 3: skip or replace (queue, the default, is not stored)
    opt("maintenance", WINDOW),  # format 3: this job's maintenance window (cron/policy/maintenance.py)
    opt("jitterMs", Int(1, MAX_JITTER_MS)),  # format 3: cron/policy/jitter.py
    opt("host", Check(Str(1, MAX_HOST_LEN), host_rule)),  # format 3: only this host's passes run it (policy/hosts.py)
    opt("pingUrl", Check(Str(1, MAX_URL_LEN), url_rule)),  # format 3: push monitoring (cron/run/pings.py)
    opt("expiresMs", Int(1, MAX_LIFETIME_MS)),  # format 4: each run's message lifetime (inbox/lifetimes.py)
    opt("readWithinMs", Int(1, MAX_LIFETIME_MS)),  # format 4: its read deadline
    opt("pingOn", Enum(("read",))),  # format 4: the success ping when the message is read (written: not stored)
    opt("ranAheadMs", Arr(EPOCH_MS, max_items=MAX_RAN_AHEAD)),  # format 3: cron/store/clock_repair.py
    # state kept by the scheduler pass
    opt("runs", Int(0, MAX_SAFE_INT)),
    opt("countedId", Str(1, 256)),  # the execution last counted in runs/day (limits.count_dispatch)
    opt("limitsFromMs", EPOCH_MS),
    opt("day", Obj([req("date", Str(10, 10)), req("runs", Int(0, MAX_SAFE_INT))])),
    opt("paused", Obj([req("reason", Enum(PAUSE_REASONS)), req("atMs", EPOCH_MS), req("message", Str(1, 1024))])),
    opt("skips", Obj([
        req("total", Int(0, MAX_SAFE_INT)),
        req("recent", Arr(Obj([req("scheduledForMs", EPOCH_MS), req("lastMs", EPOCH_MS),
                               req("count", Int(1, MAX_SAFE_INT)), req("reason", Enum(SKIP_REASONS)),
                               req("atMs", EPOCH_MS)]), max_items=RECENT_SKIPS)),
    ])),
])
ROOT = Check(Obj([req("formatVersion", Enum((1, 2, 3, 4))), req("jobs", Map(ENTRY, 100_000)),
                  opt("defaults", DEFAULTS), opt("maintenance", WINDOW),  # format 3: the workspace's
                  opt("budget", BUDGET),  # format 3: the workspace's spend guards (cron/spend/rules.py)
                  opt("clockRepair", CLOCK_REPAIR),  # format 3: cron/store/clock_repair.py
                  opt("applied", Applied())]),  # format 4: the last `cron apply` (cron/schedule_file/)
             _version_rule)


# --- reading and writing ------------------------------------------------------------------------

def read_policy(ws: Workspace) -> dict[str, Any]:
    """The validated policy file (an empty one when there is none). Invalid: exit 5 naming the
    file and the rule; nothing is ever written over it."""
    policy = read_checked_file(ws.policy, READ_CAP, "sxctl policy file", ROOT, lambda path: job_named_by(ws, path))
    return policy if policy is not None else {"formatVersion": 1, "jobs": {}}


def write_policy(ws: Workspace, policy: dict[str, Any], store: dict[str, Any], lock: MkdirLock,
                 removing: Collection[str] = ()) -> None:
    """Replace the file atomically (0600) while holding the store lock with `policy_bytes`.
    Nothing is written when nothing changed."""
    path = ws.policy
    data = policy_bytes(policy, store, removing, path)
    if os.path.islink(path):
        raise InvalidDataError(str(path), "refusing to use it: it is a symbolic link")
    if read_data_file(path, READ_CAP) == data or (data == EMPTY and not os.path.lexists(path)):
        return

    def before_rename() -> None:
        faults.hit("before-rename")
        lock.check_held()

    with PendingFile(path, path.with_name(f"{path.name}.{uuid.uuid4()}.tmp")) as pending:
        pending.write_all(data)
        pending.commit(before_rename)


def policy_bytes(policy: dict[str, Any], store: dict[str, Any], removing: Collection[str] = (),
                 path: Any = "sxctl-policy.json") -> bytes:
    """The file's bytes for `policy` beside `store`, checked (exit 2 naming the value): entries
    of jobs no longer in `store` dropped — but those of the jobs `removing`, which the store
    written next removes (a kill before it leaves them running: with their policy), and the next
    write drops — and never larger than FILE_CAP (`fit_to_cap`; exit 4)."""
    ids = {job["id"] for job in store["jobs"]} | set(removing)
    kept = {job_id: entry for job_id, entry in policy["jobs"].items() if job_id in ids and entry}
    top = {key: policy[key] for key in WORKSPACE_KEYS if policy.get(key)}  # the workspace's own settings
    doc = {"formatVersion": format_version(kept, top), "jobs": kept, **top}
    try:
        ROOT.check(doc, "$")
    except SchemaError as error:
        job = job_named_at(store, error.path)
        raise UsageError(with_job(f"invalid value for {error.path}: {error.rule}", job), json_path=error.path,
                         rule=error.rule, job=job) from None
    return fit_to_cap(doc, path)


#: the file of no setting at all: not written where there is none
EMPTY = b'{"formatVersion":1,"jobs":{}}\n'


def fit_to_cap(doc: dict[str, Any], path: Any = "sxctl-policy.json") -> bytes:
    """`doc` encoded in at most FILE_CAP bytes: when it is larger, every job keeps fewer of its
    most recent skip records — the same number for all, as many as fit; the totals stay — so
    no write grows the file past what its readers take. The entries are trimmed in place (the
    caller's policy is what was written). Settings alone beyond the cap: exit 4, nothing written."""
    data = compact_json(doc)
    if len(data) <= FILE_CAP:
        return data
    skips = [entry["skips"] for entry in doc["jobs"].values() if "skips" in entry]
    full = [list(s["recent"]) for s in skips]

    def keeping(count: int) -> bytes:
        for record, recent in zip(skips, full, strict=True):
            record["recent"] = recent[-count:] if count else []
        return compact_json(doc)

    low, high = 0, RECENT_SKIPS  # the most records per job that fit lies in [low, high] once `low` fits
    if len(keeping(0)) > FILE_CAP:
        for record, recent in zip(skips, full, strict=True):
            record["recent"] = recent  # nothing written: the caller's policy as it was
        raise ConflictError(f"{path} would be larger than its cap of {FILE_CAP} bytes even without skip history; "
                            "nothing was written: remove jobs or their settings", code=ErrorCode.CAPACITY, file=path)
    while low < high:
        middle = (low + high + 1) // 2
        if len(keeping(middle)) <= FILE_CAP:
            low = middle
        else:
            high = middle - 1
    return keeping(low)


# --- one job's policy ---------------------------------------------------------------------------

@dataclass
class PolicyOptions:
    """The policy flags of `cron add` / `cron update` (None = not given; 0 or "none" clears).
    Durations are seconds; `until` is a TIME string."""

    hold_max: float | None = None
    catch_up: str | None = None
    stale_after: float | None = None
    missed_note: bool | None = None
    max_unconsumed: int | None = None
    max_runs_per_day: int | None = None
    until: str | None = None
    max_runs: int | None = None
    active_hours: str | None = None
    active_days: str | None = None
    guards: GuardOptions | None = None  # the spend guards (cron/spend/rules.py)
    overlap: str | None = None
    jitter: float | None = None
    host: str | None = None  # "any" clears
    ping_url: str | None = None  # "none" clears
    expires: float | None = None  # seconds; 0 clears
    read_within: float | None = None  # seconds; 0 clears
    ping_on: str | None = None  # written | read

    @property
    def given(self) -> bool:
        return any(value is not None and (not isinstance(value, GuardOptions) or value.given)
                   for value in vars(self).values())


def apply_options(entry: dict[str, Any], options: PolicyOptions, *, tz: str | None, now_ms: int,
                  recurring: bool) -> dict[str, Any]:
    """`entry` changed by the flags given; checks each value (exit 2 naming the flag)."""
    entry = dict(entry)

    def put(key: str, value: Any) -> None:
        if value is None:
            entry.pop(key, None)
        else:
            entry[key] = value

    def ms(flag: str, seconds: float) -> int:  # the file holds it: refused with the flag, never a JSON path
        if seconds * 1000 > MAX_SAFE_INT:
            raise UsageError(f"{flag} is too long (at most {MAX_SAFE_INT // 86_400_000:,} days)")
        return round(seconds * 1000)

    if options.hold_max is not None:
        put("holdMaxMs", ms("--hold-max", options.hold_max))
    if options.catch_up is not None:
        put("catchUp", options.catch_up)
    if options.stale_after is not None:
        if options.stale_after <= 0:
            raise UsageError("--stale-after must be longer than 0")
        put("staleAfterMs", ms("--stale-after", options.stale_after))
    if options.missed_note is not None:
        put("missedNote", None if options.missed_note else False)  # on is the default: nothing stored
    if options.max_unconsumed is not None:
        put("maxUnconsumed", options.max_unconsumed or None)
    if options.max_runs_per_day is not None:
        put("maxRunsPerDay", options.max_runs_per_day or None)
    if options.max_runs is not None:
        put("maxRuns", options.max_runs or None)  # runs spent still count: a resume starts anew (job_change)
    if options.until is not None:
        try:
            put("untilMs", None if options.until == "none" else parse_time_in_zone_ms(options.until, tz, now_ms))
        except UsageError as error:
            hint = ("--fold is for --at: give --until with its offset (e.g. 2027-11-07T01:30-05:00) to pick one "
                    "of the two readings" if "fold" in error.message else error.extra.get("hint"))
            raise UsageError(f"invalid --until {options.until!r}: {error.message}", hint=hint) from None
        if entry.get("untilMs") is not None and entry["untilMs"] <= now_ms:
            raise UsageError(f"--until {options.until} is not in the future")
    if options.active_hours is not None:
        if options.active_hours != "none":
            parse_active_hours(options.active_hours)
        put("activeHours", None if options.active_hours == "none" else options.active_hours)
    if options.active_days is not None:
        put("activeDays", None if options.active_days == "none" else parse_active_days(options.active_days))
    if options.guards is not None:
        apply_guards(entry, options.guards)
    if options.overlap is not None:
        if options.overlap not in OVERLAP_MODES:
            raise UsageError(f"invalid --overlap {options.overlap!r}: one of {', '.join(OVERLAP_MODES)}")
        put("overlap", None if options.overlap == "queue" else options.overlap)
    if options.jitter is not None:
        if options.jitter * 1000 > MAX_JITTER_MS:
            raise UsageError(f"--jitter must be at most {MAX_JITTER_MS // 3_600_000}h")
        put("jitterMs", round(options.jitter * 1000) or None)
    if options.host is not None:
        put("host", None if options.host.lower() == ANY else check_host_name(options.host))
    if options.ping_url is not None:
        put("pingUrl", None if options.ping_url == "none" else check_ping_url(options.ping_url))
    apply_lifetime(entry, options.expires, options.read_within, options.ping_on, ms)
    if entry.get("catchUp") == "skip" and "staleAfterMs" not in entry:
        raise UsageError("--catch-up skip needs --stale-after DURATION")
    if options.stale_after is not None and entry.get("catchUp") != "skip":
        raise UsageError("--stale-after applies with --catch-up skip (under --catch-up once a late run is never stale)")
    if "activeDays" in entry and "activeHours" not in entry:
        entry["activeHours"] = "00:00-24:00"
    if not recurring:
        if options.max_runs or options.until not in (None, "none"):
            raise UsageError("--until and --max-runs are for recurring jobs (a one-shot runs once)")
        if options.overlap in ("skip", "replace"):
            raise UsageError(f"--overlap {options.overlap} is for recurring jobs (a one-shot sends one message)")
        if {options.active_hours, options.active_days} - {None, "none"}:
            raise UsageError("--active-hours and --active-days are for recurring jobs (a one-shot runs at its time: "
                             "give it a time inside the hours)")
        for key in (*LIFETIME_KEYS, "overlap", "activeHours", "activeDays"):  # kept from when the job was recurring
            entry.pop(key, None)
    if "paused" in entry and (options.max_unconsumed is not None or options.until is not None
                              or options.max_runs is not None):
        entry.pop("paused")  # the limit that paused the job has changed
    return entry


def record_skip(entry: dict[str, Any], first_ms: int, last_ms: int, count: int, reason: str, now_ms: int) -> None:
    """`count` occurrences from `first_ms` to `last_ms` were not run, for `reason`."""
    skips = entry.setdefault("skips", {"total": 0, "recent": []})
    skips["total"] += count
    skips["recent"] = [*skips["recent"], {"scheduledForMs": first_ms, "lastMs": last_ms, "count": count,
                                          "reason": reason, "atMs": now_ms}][-RECENT_SKIPS:]

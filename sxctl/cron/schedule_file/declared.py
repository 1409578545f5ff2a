"""A job's declared form: the keys of a schedule file's job table (the `cron add` flags without
their dashes), each with its value normalized — durations and times in ms, a target project as a
real path, a setting left out as its default — read from a stored job and its policy entry
(`declared_of`) or from the file (schedule_file/read.py). `cron plan` compares the two, `cron
apply` changes what differs, `cron dump` writes the first, drift compares it with the last apply:
one table of keys (KEYS), one normal form."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ...timeparse import duration_text, format_ms, wall_time_kind
from ..policy.file import DAYS, DEFAULT_HOLD_MAX_MS
from ..run.pings import mask_url
from ..store.targets import INBOX_CHANNEL, resolve_project, stored_project
from ..timeline.schedule import load_cron_zone

#: the payload kinds as a file and `cron add --payload` spell them, by comis's names
PAYLOADS = {"agent_turn": "agent-turn", "delivery": "delivery", "heartbeat_event": "heartbeat-event"}
CONTINUATIONS = {"none": "none", "heartbeat_excerpt": "heartbeat-excerpt", "origin_history": "origin-history"}

#: every key of a job table -> its kind (how a value is read and shown). `ping-url-env`, `text-file`
#: and `wake-gate` name where a value comes from (an environment variable, files beside the schedule
#: file): they are read into `ping-url`, `text` and `wake-gate-script`.
KEYS: dict[str, str] = {
    # the schedule: one of cron, every, at; tz; fold reads an ambiguous at or anchor
    "cron": "str", "every": "duration", "anchor": "time", "at": "time", "tz": "str", "fold": "str",
    # the job (comis's store)
    "payload": "str", "text": "text", "wake-mode": "str", "model": "str", "timeout-seconds": "duration",
    "session-strategy": "str", "max-history-turns": "int", "continuation": "str",
    "wake-gate-script": "text", "wake-gate-language": "str", "wake-gate-timeout": "duration",
    "to": "str", "to-project": "path", "tenant": "str", "max-dependency-errors": "int", "paused": "bool",
    "agent": "str",
    # sxctl's policy (the policy file)
    "hold-max": "duration", "catch-up": "str", "stale-after": "duration", "missed-note": "bool",
    "max-unconsumed": "int", "max-runs-per-day": "int", "until": "time", "max-runs": "int",
    "active-hours": "str", "active-days": "days", "overlap": "str", "jitter": "duration", "host": "str",
    "ping-url": "secret", "rate-limit-ceiling": "fraction", "max-session-tokens": "int",
    "max-tokens-per-day": "int", "on-missing-usage": "str", "ping-on": "str", "expires": "duration",
    "read-within": "duration",
}
#: keys a file may give that are read into another key
SOURCES: dict[str, str] = {"ping-url-env": "ping-url", "text-file": "text", "wake-gate": "wake-gate-script"}
#: what a key the file leaves out means (None: not set; and see KEPT)
DEFAULTS: dict[str, Any] = {
    "payload": "agent-turn", "tz": "UTC", "agent": "default", "hold-max": DEFAULT_HOLD_MAX_MS, "catch-up": "once",
    "missed-note": True, "overlap": "queue", "ping-on": "written",
}
#: a declared form's list of the keys it leaves as the job has them: an `every` job's `anchor`,
#: `paused` and `agent` when the file does not give them (a new job counts from the apply; an operator's
#: `cron pause` survives it), and the ping URL when its environment variable is not set where
#: the file is read (a CI gate or a pass's environment without the secret)
KEPT = "__kept__"
#: defaults that hold only for some payload kinds
KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "agent-turn": {"session-strategy": "fresh", "continuation": "none", "to": "live", "tenant": "default"},
    "delivery": {"to": "live", "tenant": "default"},
    "heartbeat-event": {"wake-mode": "now"},
}
#: a wake gate's settings when the file gives its script alone
GATE_DEFAULTS: dict[str, Any] = {"wake-gate-language": "js", "wake-gate-timeout": 30_000}
#: keys that are not compared: `fold` only reads a time
NOT_COMPARED = ("fold",)


def default_of(key: str, payload: str) -> Any:
    """The value a job of kind `payload` has for a key its table leaves out (a target project:
    the workspace's own, `.`)."""
    if key == "to-project":
        return "." if payload in ("agent-turn", "delivery") else None
    if key in GATE_DEFAULTS:
        return GATE_DEFAULTS[key]  # a wake gate's (a job without one has None)
    return KIND_DEFAULTS.get(payload, {}).get(key, DEFAULTS.get(key))


def declared_of(record: dict[str, Any], entry: dict[str, Any], workspace: Path) -> dict[str, Any] | None:
    """Every key of the job as it is stored (the policy entry `entry`), normalized; None for a job a
    schedule file cannot declare: a built-in job, or one with a target or setting that `cron add`
    cannot make (another channel's target, comis's cacheRetention or toolPolicy)."""
    if record["source"] != "authored" or "cacheRetention" in record or "toolPolicy" in record:
        return None
    target = record.get("deliveryTarget")
    endpoint = target["destinationEndpoint"] if target else None
    if endpoint is not None and endpoint["channelType"] != INBOX_CHANNEL:
        return None
    schedule, payload, life = record["schedule"], record["payload"], record["lifecycle"]
    kind = PAYLOADS[payload["kind"]]
    found: dict[str, Any] = dict.fromkeys(KEYS)
    found.update(payload=kind, paused=_paused_by_hand(life, entry), agent=record["agentId"])
    if schedule["kind"] == "cron":
        found.update(cron=schedule["expr"], tz=schedule.get("tz") or "UTC")
    else:
        found.update(tz=entry.get("tz") or "UTC")
        if schedule["kind"] == "every":
            found.update(every=schedule["everyMs"], anchor=schedule["anchorMs"])
        else:
            found.update(at=schedule["atMs"])
    found["text"] = payload.get("message" if kind == "agent-turn" else "text")
    if kind == "heartbeat-event":
        found["wake-mode"] = payload.get("wakeMode", "now")
    if kind == "agent-turn":
        policy = record.get("sessionPolicy", {})
        timeout = payload.get("timeoutSeconds")
        found.update({"model": payload.get("model"), "timeout-seconds": None if timeout is None else timeout * 1000,
                      "session-strategy": policy.get("strategy", "fresh"),
                      "max-history-turns": policy.get("maxHistoryTurns"),
                      "continuation": CONTINUATIONS[record.get("continuationMode", "none")]})
        gate = record.get("wakeGate")
        if gate is not None:
            found.update({"wake-gate-script": gate["script"], "wake-gate-language": gate["language"],
                          "wake-gate-timeout": gate["timeoutSeconds"] * 1000})
    if target is not None and endpoint is not None:
        scope = target["conversation"]["conversationScope"]
        found.update({"to": endpoint["conversationId"], "tenant": scope["tenantId"],
                      "to-project": stored_project(resolve_project(endpoint["channelInstanceId"], workspace),
                                                   workspace)})
    found["max-dependency-errors"] = record.get("maxConsecutiveDependencyErrors")
    found.update(_policy_of(entry))
    return found


def _paused_by_hand(life: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Paused by `cron pause` (or a file's `paused = true`): not by sxctl's own limits (expired,
    max_unconsumed), which a file does not declare, nor a one-shot's end."""
    return life["status"] == "paused" and life.get("reason") == "operator" and "paused" not in entry


def _policy_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The policy keys of an entry of sxctl's policy file, normalized (a setting that means
    nothing where it is — --stale-after without --catch-up skip, --active-hours 00:00-24:00 with
    days, every day — is left out, as a file that left it out reads)."""
    skip = entry.get("catchUp") == "skip"
    days = entry.get("activeDays")
    hours = entry.get("activeHours")
    days_text = None if days is None or tuple(days) == DAYS else ",".join(days)
    return {
        "hold-max": entry.get("holdMaxMs", DEFAULT_HOLD_MAX_MS), "catch-up": entry.get("catchUp", "once"),
        "stale-after": entry.get("staleAfterMs") if skip else None, "missed-note": entry.get("missedNote", True),
        "max-unconsumed": entry.get("maxUnconsumed"), "max-runs-per-day": entry.get("maxRunsPerDay"),
        "until": entry.get("untilMs"), "max-runs": entry.get("maxRuns"),
        "active-hours": None if hours == "00:00-24:00" else hours, "active-days": days_text,
        "overlap": entry.get("overlap", "queue"), "jitter": entry.get("jitterMs"), "host": entry.get("host"),
        "ping-url": entry.get("pingUrl"), "rate-limit-ceiling": entry.get("rateLimitCeiling"),
        "max-session-tokens": entry.get("maxSessionTokens"), "max-tokens-per-day": entry.get("maxTokensPerDay"),
        "on-missing-usage": entry.get("onMissingUsage"), "ping-on": entry.get("pingOn", "written"),
        "expires": entry.get("expiresMs"), "read-within": entry.get("readWithinMs"),
    }


def differences(declared: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """key -> (current, declared) for every compared key whose values differ (not those the
    declaration keeps as the job has them, KEPT)."""
    found = {}
    kept = declared.get(KEPT, ())
    for key in KEYS:
        if key in NOT_COMPARED or key in kept:
            continue
        if declared.get(key) != current.get(key):
            found[key] = (current.get(key), declared.get(key))
    return found


_TYPES: dict[str, type | tuple[type, ...]] = {"duration": int, "time": int, "int": int, "fraction": (int, float),
                                              "bool": bool}


def _fits(kind: str, value: Any) -> bool:
    """Whether a value has the type its key's kind takes."""
    return isinstance(value, _TYPES.get(kind, str)) and isinstance(value, bool) == (kind == "bool")


def instant_text(ms: int) -> str:
    """An instant as a file writes it, exactly: UTC ISO 8601, milliseconds when it has them."""
    text = format_ms(ms - ms % 1000).replace("+00:00", "")
    return f"{text}.{ms % 1000:03d}Z" if ms % 1000 else f"{text}Z"


def wall_text(ms: int, zone_name: str) -> tuple[str, str | None]:
    """An instant as a naive wall time in the zone (how a file gives an `every` or `at` job's
    time beside its `tz`), exactly, and the `fold` that picks it when that wall time happens
    twice (None: it happens once)."""
    zone = load_cron_zone(zone_name)
    local = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).astimezone(zone)
    naive = local.replace(tzinfo=None, fold=0)
    text = naive.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text, ("later" if local.fold else "earlier") if wall_time_kind(naive, zone) == "fold" else None


def shown(key: str, value: Any) -> str:
    """A normalized value in words, for `cron plan` and drift: durations and times as a file
    writes them, a ping URL masked, a long text cut."""
    if value is None:
        return "(none)"
    kind = KEYS.get(key, "str")
    if not _fits(kind, value):
        return repr(value)  # a record edited by hand: shown as it is
    if kind == "duration":
        return duration_text(value)
    if kind == "time":
        return instant_text(value)
    if kind == "secret":  # masked, with a short digest that changes when the URL does
        return f"{mask_url(value)} #{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:6]}"
    if kind == "text":  # a long one cut, with its length and a digest that tells two apart
        if len(value) <= 60:
            return repr(value)
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:6]
        return f"{value[:57]!r}... ({len(value)} characters, #{digest})"
    if kind == "bool":
        return "true" if value else "false"
    return str(value)

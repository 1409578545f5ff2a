"""Authoring jobs: the comis cron tool's add / update / pause / resume / remove rules, as edits of
a validated store (spec cron-store.md §3, §8). cron/store/transaction.py does the locking and writing."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...errors import ConflictError, ErrorCode, UsageError
from ...project import check_session_id
from ...report import Reporter
from ..policy.file import PolicyOptions
from ..timeline.schedule import ScheduleInput, job_zone_name, next_run, pass_rate_warning, resolve_schedule
from .file import find_job
from .schema import KIB, scorpiox_target
from .targets import INBOX_CHANNEL, holds_project, resolve_project, stored_project

PAYLOAD_KINDS = {"agent-turn": "agent_turn", "agent_turn": "agent_turn", "delivery": "delivery",
                 "heartbeat-event": "heartbeat_event", "heartbeat_event": "heartbeat_event"}
CONTINUATIONS = {"none": "none", "heartbeat-excerpt": "heartbeat_excerpt", "heartbeat_excerpt": "heartbeat_excerpt",
                 "origin-history": "origin_history", "origin_history": "origin_history"}
TEXT_LIMIT = 64 * KIB
WAKE_GATE_LIMIT = 256 * KIB


@dataclass
class WakeGate:
    """A job's wake gate from `--wake-gate FILE`: the script comis runs before an agent turn."""

    script: str
    language: str
    timeout_seconds: int

    @classmethod
    def from_file(cls, path: Path, language: str | None, timeout_seconds: int | None) -> WakeGate:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read --wake-gate {path}: {exc.strerror}") from None
        if not data or len(data) > WAKE_GATE_LIMIT:
            raise UsageError(f"--wake-gate {path} must be 1 byte to 256 KiB")
        try:
            script = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"--wake-gate {path} is not UTF-8 text") from None
        language = language or ("ts" if path.suffix in (".ts", ".mts") else "js")
        timeout = 30 if timeout_seconds is None else timeout_seconds
        if not 1 <= timeout <= 300:
            raise UsageError("wake_gate_timeout_seconds must be between 1 and 300")
        return cls(script, language, timeout)

    def to_json(self) -> dict[str, Any]:
        return {"script": self.script, "language": self.language, "timeoutSeconds": self.timeout_seconds}


@dataclass
class Target:
    """Where an agent turn or delivery goes: a session id or `live` of a project. A field left
    None keeps what the job had (`cron update --to-project DIR` keeps the session and the tenant),
    and for a new target is the default: the project the command runs in, `live`, `default`."""

    project: str | None = None
    conversation: str | None = None
    tenant: str | None = None


@dataclass
class JobSpec:
    """The flags of `cron add` / `cron update` (None = not given)."""

    schedule: ScheduleInput = field(default_factory=ScheduleInput)
    payload: str | None = None
    text: str | None = None
    wake_mode: str | None = None
    session_strategy: str | None = None
    max_history_turns: int | None = None
    continuation: str | None = None
    model: str | None = None
    timeout_seconds: int | None = None
    wake_gate: WakeGate | None = None
    no_wake_gate: bool = False
    target: Target | None = None
    max_dependency_errors: int | None = None
    paused: bool = False
    resumed: bool = False
    new_name: str | None = None
    policy: PolicyOptions | None = None  # sxctl's own settings (cron/policy/file.py), beside the store


def check_name(name: str) -> str:
    size16 = len(name.encode("utf-16-le", "surrogatepass")) // 2
    if not name or size16 > 200 or len(name.encode("utf-8", "surrogatepass")) > 1024:
        raise UsageError("job name must be 1-200 characters")
    return name


def payload_kind(text: str) -> str:
    try:
        return PAYLOAD_KINDS[text]
    except KeyError:
        raise UsageError(f"invalid payload {text!r}: use agent-turn, delivery or heartbeat-event") from None


def _check_text(kind: str, text: str | None) -> str:
    if not text:
        raise UsageError("payload text is required (--text, --message or --text-file)")
    if len(text.encode()) > TEXT_LIMIT:
        raise UsageError("payload text must be at most 64 KiB")
    return text


def _misplaced(spec: JobSpec, kind: str) -> None:
    """Flags that only some payload kinds take: comis's `X is valid only for Y payloads`."""
    agent_only = {"model": spec.model, "wake_gate_script": spec.wake_gate, "session_strategy": spec.session_strategy,
                  "max_history_turns": spec.max_history_turns, "continuation_mode": spec.continuation,
                  "timeout_seconds": spec.timeout_seconds}
    if kind != "agent_turn":
        for name, value in agent_only.items():
            if value is not None:
                raise UsageError(f"{name} is valid only for agent_turn payloads")
    if kind != "heartbeat_event" and spec.wake_mode is not None:
        raise UsageError("wake_mode is valid only for heartbeat_event payloads")
    if kind == "heartbeat_event" and spec.target is not None:
        raise UsageError("a delivery target is valid only for agent_turn and delivery payloads")


def _delivery_target(spec: JobSpec, agent_id: str, default_project: str, workspace: Path,
                     previous: dict[str, Any] | None = None, warnings: list[str] | None = None) -> dict[str, Any]:
    """The job's `deliveryTarget`: `spec.target` over the `previous` target (fields not given are
    kept) over the defaults. The project is stored relative to the workspace (`targets.stored_project`)."""
    target = spec.target or Target()
    endpoint = previous["destinationEndpoint"] if previous else None
    keep = endpoint is not None and endpoint["channelType"] == INBOX_CHANNEL
    conversation = target.conversation or (endpoint["conversationId"] if keep and endpoint else "live")
    tenant = target.tenant or (previous["conversation"]["conversationScope"]["tenantId"] if keep and previous
                               else "default")
    if conversation != "live":
        check_session_id(conversation)
    if target.project is None and keep and endpoint:
        stored = endpoint["channelInstanceId"]  # kept as written, absolute (older stores) or not
    else:
        stored = stored_project(target.project or default_project, workspace)
        if warnings is not None:
            warnings += target_warnings(stored, target.project or default_project, workspace)
    return scorpiox_target(agent_id, stored, conversation, tenant)


def target_warnings(stored: str, project: str, workspace: Path) -> list[str]:
    """What to say when a target is written that would make its runs fail, or that does not
    travel with the store."""
    warnings = []
    if not holds_project(resolve_project(stored, workspace)):
        warnings.append(f"the target project {project} has no .scorpiox/ folder: its runs fail `precondition` "
                        "until an agent has run there")
    if os.path.isabs(stored):
        warnings.append(f"the target project {stored} is outside the workspace {workspace}, so it is stored as an "
                        "absolute path: a copied, moved or mounted workspace still sends there")
    return warnings


def build_variant(kind: str, text: str, spec: JobSpec, agent_id: str, default_project: str,
                  previous: dict[str, Any] | None = None, *, workspace: Path,
                  warnings: list[str] | None = None) -> dict[str, Any]:
    """Payload and variant fields for `kind`, in schema order (defaults filled in). A target is
    stored relative to `workspace` (the folder of the store), when it can be."""
    previous = previous or {}
    if kind == "heartbeat_event":
        old = previous.get("payload", {})
        wake_mode = spec.wake_mode or old.get("wakeMode", "now")
        return {"payload": {"kind": kind, "text": text, "wakeMode": wake_mode}}
    if kind == "delivery":
        target = previous["deliveryTarget"] if not spec.target and "deliveryTarget" in previous else \
            _delivery_target(spec, agent_id, default_project, workspace, previous.get("deliveryTarget"), warnings)
        return {"payload": {"kind": kind, "text": text}, "deliveryTarget": target}
    payload: dict[str, Any] = {"kind": kind, "message": text}
    old_payload = previous.get("payload", {}) if previous.get("payload", {}).get("kind") == "agent_turn" else {}
    model = spec.model if spec.model is not None else old_payload.get("model")
    timeout = spec.timeout_seconds if spec.timeout_seconds is not None else old_payload.get("timeoutSeconds")
    if model is not None:
        payload["model"] = model
    if timeout is not None:
        if not 1 <= timeout <= 86_400:
            raise UsageError("timeout_seconds must be between 1 and 86400")
        payload["timeoutSeconds"] = timeout
    strategy = spec.session_strategy or previous.get("sessionPolicy", {}).get("strategy", "fresh")
    if strategy == "rolling":
        turns = spec.max_history_turns or previous.get("sessionPolicy", {}).get("maxHistoryTurns")
        if turns is None or not 1 <= turns <= 20:
            raise UsageError("max_history_turns (1-20) is required with the rolling session strategy")
        policy: dict[str, Any] = {"strategy": "rolling", "maxHistoryTurns": turns}
    else:
        if spec.max_history_turns is not None:
            raise UsageError("max_history_turns is valid only with the rolling session strategy")
        policy = {"strategy": "fresh"}
    continuation = CONTINUATIONS[spec.continuation] if spec.continuation else previous.get("continuationMode", "none")
    variant: dict[str, Any] = {"payload": payload, "sessionPolicy": policy, "continuationMode": continuation}
    if spec.target is not None or "deliveryTarget" not in previous:
        variant["deliveryTarget"] = _delivery_target(spec, agent_id, default_project, workspace,
                                                     previous.get("deliveryTarget"), warnings)
    else:
        variant["deliveryTarget"] = previous["deliveryTarget"]
    gate = None if spec.no_wake_gate else (spec.wake_gate.to_json() if spec.wake_gate else previous.get("wakeGate"))
    if gate is not None:
        variant["wakeGate"] = gate
    for key in ("cacheRetention", "toolPolicy"):
        if key in previous:
            variant[key] = previous[key]
    return variant


def _lifecycle(schedule: dict[str, Any], now_ms: int, paused: bool) -> dict[str, Any]:
    found = next_run(schedule, now_ms)
    if found is None:
        raise UsageError("Cron schedule has no future occurrence")
    if paused:
        return {"status": "paused", "nextRunAtMs": found[0], "consecutiveDependencyErrors": 0, "reason": "operator"}
    return {"status": "scheduled", "nextRunAtMs": found[0], "consecutiveDependencyErrors": 0}


def _assemble(head: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    job = dict(head)
    job.update(variant)
    return job


def add_job(store: dict[str, Any], name: str, spec: JobSpec, *, agent_id: str, default_project: str, now_ms: int,
            workspace: Path, max_jobs: int = 100, notes: list[str] | None = None,
            warnings: list[str] | None = None) -> dict[str, Any]:
    """Append a new authored job; returns comis's strict `{jobId, name, schedule}`."""
    check_name(name)
    if spec.payload is None:
        raise UsageError("--payload is required (agent-turn, delivery or heartbeat-event)")
    kind = payload_kind(spec.payload)
    _misplaced(spec, kind)
    text = _check_text(kind, spec.text)
    if not spec.schedule.given:
        raise UsageError("Invalid cron schedule input",
                         hint="a job needs one schedule: --cron EXPR, --every DURATION, --at TIME or --in DURATION")
    schedule = resolve_schedule(spec.schedule, now_ms, notes)
    if warnings is not None and (said := pass_rate_warning(schedule)):
        warnings.append(said)
    if any(job["name"] == name for job in store["jobs"]):
        raise ConflictError(f'A cron job named "{name}" already exists', code=ErrorCode.NAME_TAKEN)
    live_authored = [j for j in store["jobs"] if j["source"] == "authored"
                     and j["lifecycle"]["status"] != "one_shot_terminal"]
    if len(live_authored) >= max_jobs:
        raise ConflictError("Authored cron job capacity reached", code=ErrorCode.CAPACITY,
                            hint=f"the store holds {len(live_authored)} jobs, the most --max-jobs {max_jobs} allows; "
                                 "give a larger --max-jobs, or remove jobs (`cron remove`)")
    head: dict[str, Any] = {"id": str(uuid.uuid4()), "name": name, "agentId": agent_id, "schedule": schedule,
                            "lifecycle": _lifecycle(schedule, now_ms, spec.paused)}
    if spec.max_dependency_errors is not None:
        head["maxConsecutiveDependencyErrors"] = spec.max_dependency_errors
    head["source"] = "authored"
    job = _assemble(head, build_variant(kind, text, spec, agent_id, default_project, workspace=workspace,
                                        warnings=warnings))
    store["jobs"].append(job)
    return {"jobId": job["id"], "name": name, "schedule": schedule}


def _editable(store: dict[str, Any], name: str, verb: str) -> dict[str, Any]:
    """A job an editing verb may change; `verb` is the comis tool action (update, remove)."""
    job = find_job(store, name)
    if job["source"] == "built_in":
        raise ConflictError(f"Config-owned cron jobs cannot be {verb}d through cron.{verb}",
            code=ErrorCode.CONFIG_OWNED)
    if any(claim["jobId"] == job["id"] for claim in store["activeClaims"]):
        raise ConflictError("Cron job has an active execution", code=ErrorCode.ACTIVE_CLAIM)
    return job


def update_job(store: dict[str, Any], name: str, spec: JobSpec, *, default_project: str, now_ms: int,
               report: Reporter, workspace: Path, notes: list[str] | None = None,
               warnings: list[str] | None = None,
               policy_entry: Callable[[str], dict[str, Any]] = lambda job_id: {},
               effective: dict[str, Any] | None = None) -> dict[str, Any]:
    """Change a job in place; returns `{jobName, updated}`. `policy_entry(id)` is the job's entry
    in sxctl's policy file (where an `every`/`at` job keeps its zone); `effective["tz"]` receives
    the zone of the new schedule (the job's own when no --tz was given), for the policy change."""
    if spec.session_strategy is not None or spec.continuation is not None or spec.max_history_turns is not None:
        raise UsageError("session_strategy and continuation_mode cannot be changed; remove and recreate the job")
    if spec.paused and spec.resumed:
        raise UsageError("--paused and --resumed cannot be combined")
    if replace(spec, policy=None) == JobSpec() and not (spec.policy and spec.policy.given):
        raise UsageError("nothing to change: give a schedule, payload, target or another option to update")
    job = _editable(store, name, "update")
    zone = job_zone_name(job, policy_entry(job["id"]))
    spec = replace(spec, schedule=_schedule_change(job["schedule"], zone, spec.schedule, notes))
    if effective is not None:
        effective["tz"] = spec.schedule.tz  # the zone the policy file keeps for the new schedule
    index = store["jobs"].index(job)
    old_kind = job["payload"]["kind"]
    kind = payload_kind(spec.payload) if spec.payload is not None else old_kind
    if spec.payload is not None and not spec.text:
        raise UsageError("incomplete payload replacement")
    _misplaced(spec, kind)
    if spec.new_name is not None and spec.new_name != name:
        check_name(spec.new_name)
        if any(other["name"] == spec.new_name for other in store["jobs"]):
            raise ConflictError(f'A cron job named "{spec.new_name}" already exists', code=ErrorCode.NAME_TAKEN)
    head = {k: job[k] for k in ("id", "name", "agentId", "schedule", "lifecycle")}
    if spec.new_name is not None:
        head["name"] = check_name(spec.new_name)
    if spec.schedule.given:
        head["schedule"] = resolve_schedule(spec.schedule, now_ms, notes)
        if warnings is not None and (said := pass_rate_warning(head["schedule"])):
            warnings.append(said)
        head["lifecycle"] = _lifecycle(head["schedule"], now_ms, spec.paused)
    elif spec.paused or spec.resumed:
        head["lifecycle"] = _paused_or_resumed(job["lifecycle"], paused=spec.paused)
    dep = spec.max_dependency_errors if spec.max_dependency_errors is not None \
        else job.get("maxConsecutiveDependencyErrors")
    if dep is not None:
        head["maxConsecutiveDependencyErrors"] = dep
    head["source"] = job["source"]
    old_text = job["payload"].get("message" if old_kind == "agent_turn" else "text")
    text = _check_text(kind, spec.text if spec.text is not None else old_text)
    previous = job if kind == old_kind else {}
    if kind != old_kind:
        dropped = [k for k in job if k not in head and k != "payload"]
        if dropped:
            report.warn(f"payload changed to {kind}: dropped {', '.join(dropped)}")
    variant = build_variant(kind, text, spec, job["agentId"], default_project, previous, workspace=workspace,
                            warnings=warnings)
    store["jobs"][index] = _assemble(head, variant)
    return {"jobName": store["jobs"][index]["name"], "updated": True}


def _schedule_change(current: dict[str, Any], zone: str, given: ScheduleInput,
                     notes: list[str] | None) -> ScheduleInput:
    """What `cron update` means by its schedule flags, against the job's schedule and its zone
    (`job_zone_name`): `--tz` alone moves a job to another zone, `--anchor` alone re-anchors an
    `every` job, and a new schedule keeps the job's zone unless `--tz` is given (said in a note):
    `--at 09:00` on a New York job is 09:00 in New York."""
    kind = current["kind"]
    keep = given.tz is None and zone != "UTC"
    if keep and (given.given or (kind == "every" and given.anchor is not None)) and notes is not None:
        notes.append(f"kept the job's zone {zone} (give --tz to change it)")
    if given.given:
        return replace(given, tz=zone) if keep else given
    if given.tz is None and given.anchor is None and given.fold is None:
        return given
    if kind == "cron" and given.anchor is None and given.fold is None:
        return replace(given, cron=current["expr"])
    if kind != "cron" and given.anchor is None and given.fold is None:
        return given  # --tz alone on an every/at job: its zone, kept in the policy file (transaction.job_change)
    if kind == "every" and given.anchor is not None:  # re-anchored in the job's zone (its gaps and folds)
        return replace(given, every=f"{current['everyMs']}ms", tz=zone if keep else given.tz)
    flags = ", ".join(f for f, v in (("--tz", given.tz), ("--anchor", given.anchor), ("--fold", given.fold)) if v)
    raise UsageError(f"{flags} cannot change a job scheduled by {kind} on its own; give the whole schedule "
                     "(--cron, --every or --at) with it")


def _paused_or_resumed(lifecycle: dict[str, Any], *, paused: bool) -> dict[str, Any]:
    status = lifecycle["status"]
    if status.startswith("one_shot"):
        raise ConflictError("Terminal or claimed one-shot jobs cannot be paused or resumed",
            code=ErrorCode.ONE_SHOT_FINAL)
    base = {"nextRunAtMs": lifecycle["nextRunAtMs"],
            "consecutiveDependencyErrors": lifecycle["consecutiveDependencyErrors"]}
    if paused:
        reason = lifecycle.get("reason", "operator") if status == "paused" else "operator"
        return {"status": "paused", **base, "reason": reason}
    return {"status": "scheduled", **base}


def set_job_paused(store: dict[str, Any], name: str, paused: bool) -> dict[str, Any]:
    job = _editable(store, name, "update")
    job["lifecycle"] = _paused_or_resumed(job["lifecycle"], paused=paused)
    return {"jobName": name, "updated": True, "state": job["lifecycle"]["status"]}


def remove_job(store: dict[str, Any], name: str) -> dict[str, Any]:
    job = _editable(store, name, "remove")
    store["jobs"].remove(job)
    return {"jobName": name, "removed": True, "jobId": job["id"]}

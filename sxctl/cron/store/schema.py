"""The comis strict v1 store format (`cron-jobs.json`), as data in the schema kit
(cron/store/schema_kit.py): every job variant, claim and the root, in schema order. Whole-store rules
that span objects (uniqueness, claims, conversationRef) are in `validate_store`; the store's
canonical encoding is `compact_json`. Nothing is ever repaired.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Collection
from typing import Any
from zoneinfo import ZoneInfo

from .schema_kit import (
    MAX_SAFE_INT,
    Arr,
    Check,
    Const,
    Enum,
    Field,
    Int,
    Node,
    Nullable,
    Obj,
    SchemaError,
    Str,
    Union,
    opt,
    readable_name,
    req,
)

KIB = 1024

# --- shared pieces -------------------------------------------------------------------------------

ID = Str(1, 256)
EPOCH_MS = Int(0, MAX_SAFE_INT)
NON_EMPTY = Str(1, 4 * KIB)
ERROR_KINDS = ("config", "network", "auth", "validation", "precondition", "timeout", "resource", "dependency",
               "internal", "platform")
TRIGGERS = ("scheduled", "manual", "catchup")
WORK_KINDS = ("agent_turn", "heartbeat_event", "internal_action", "delivery_only")


def _zone_rule(value: str) -> str | None:
    try:
        if value.startswith("/") or ".." in value:
            raise ValueError
        ZoneInfo(value)
    except (ValueError, OSError, KeyError):
        return "is not a known IANA time zone"
    return None


SCHEDULE = Union("kind", {
    "cron": Obj([req("kind", Const("cron")), req("expr", Str(1, 1024)), req("tz", Check(Str(1, 128), _zone_rule))]),
    "every": Obj([req("kind", Const("every")), req("everyMs", Int(1, MAX_SAFE_INT)), req("anchorMs", EPOCH_MS)]),
    "at": Obj([req("kind", Const("at")), req("atMs", EPOCH_MS)]),
})

LIFECYCLE = Union("status", {
    "scheduled": Obj([req("status", Const("scheduled")), req("nextRunAtMs", EPOCH_MS),
                      req("consecutiveDependencyErrors", Int())]),
    "paused": Obj([req("status", Const("paused")), req("nextRunAtMs", EPOCH_MS),
                   req("consecutiveDependencyErrors", Int()), req("reason", Enum(("operator", "dependency_errors")))]),
    "one_shot_claimed": Obj([req("status", Const("one_shot_claimed")), req("executionId", ID),
                             req("scheduledForMs", EPOCH_MS), req("claimedAtMs", EPOCH_MS)]),
    "one_shot_terminal": Obj([req("status", Const("one_shot_terminal")), req("terminalExecutionId", ID),
                              req("terminalAtMs", EPOCH_MS)]),
})

ENDPOINT = Obj([
    req("channelType", NON_EMPTY), req("channelInstanceId", NON_EMPTY), req("conversationId", NON_EMPTY),
    opt("threadId", NON_EMPTY), req("conversationKind", Enum(("direct", "shared"))),
])

PARTITION = Union("kind", {
    "agent": Obj([req("kind", Const("agent"))]),
    "principal": Obj([req("kind", Const("principal")), req("principalId", NON_EMPTY)]),
    "channel-principal": Obj([req("kind", Const("channel-principal")), req("channelType", NON_EMPTY),
                              req("principalId", NON_EMPTY)]),
    "endpoint-conversation": Obj([req("kind", Const("endpoint-conversation")), req("endpoint", ENDPOINT)]),
    "endpoint-conversation-principal": Obj([req("kind", Const("endpoint-conversation-principal")),
                                            req("endpoint", ENDPOINT), req("principalId", NON_EMPTY)]),
})

SCOPE = Obj([req("tenantId", NON_EMPTY), req("agentId", ID), req("partition", PARTITION)])

DELIVERY_TARGET = Obj([
    req("conversation", Obj([req("conversationScope", SCOPE), req("conversationRef", Str(46, 46))])),
    req("destinationEndpoint", ENDPOINT),
])

TOOL_IDS = Arr(Str(1, 256), 256)

JOB_COMMON_HEAD = [
    req("id", ID), req("name", Str(1, 1024, max_utf16=200)), req("agentId", ID), req("schedule", SCHEDULE),
    req("lifecycle", LIFECYCLE), opt("maxConsecutiveDependencyErrors", Int()),
]


def _job(source: str, payload: Node, *variant: Field) -> Obj:
    return Obj([*JOB_COMMON_HEAD, req("source", Const(source)), req("payload", payload), *variant])


JOB_VARIANTS: dict[str, Obj] = {
    "heartbeat_event": _job("authored", Obj([
        req("kind", Const("heartbeat_event")), req("text", Str(1, 64 * KIB)),
        req("wakeMode", Enum(("now", "next-heartbeat"))),
    ])),
    "delivery": _job("authored", Obj([req("kind", Const("delivery")), req("text", Str(0, 64 * KIB))]),
                     req("deliveryTarget", DELIVERY_TARGET)),
    "agent_turn": _job(
        "authored",
        Obj([req("kind", Const("agent_turn")), req("message", Str(0, 64 * KIB)), opt("model", Str(1, 512)),
             opt("timeoutSeconds", Int(1, 86_400))]),
        req("sessionPolicy", Union("strategy", {
            "fresh": Obj([req("strategy", Const("fresh"))]),
            "rolling": Obj([req("strategy", Const("rolling")), req("maxHistoryTurns", Int(1, 20))]),
        })),
        req("continuationMode", Enum(("none", "heartbeat_excerpt", "origin_history"))),
        opt("deliveryTarget", DELIVERY_TARGET),
        opt("wakeGate", Obj([req("script", Str(1, 256 * KIB)), req("language", Enum(("js", "ts"))),
                             req("timeoutSeconds", Int(1, 300))])),
        opt("cacheRetention", Enum(("none", "short", "long"))),
        opt("toolPolicy", Obj([req("profile", Enum(("minimal", "coding", "messaging", "supervisor", "full"))),
                               req("allow", TOOL_IDS), req("deny", TOOL_IDS)])),
    ),
    "internal_action": _job("built_in", Obj([
        req("kind", Const("internal_action")),
        req("action", Enum(("memory_review", "memory_lifecycle", "reflection"))),
    ])),
}

BUILT_IN_ID_PREFIX = {"memory_review": "memory-review-", "memory_lifecycle": "memory-lifecycle-",
                      "reflection": "reflect-"}

CLAIM = Obj([
    req("executionId", ID), req("bootId", ID), req("jobId", ID), req("agentId", ID),
    req("rootRunId", Nullable(Str(1, 512))), req("scheduledForMs", EPOCH_MS), req("claimedAtMs", EPOCH_MS),
    req("trigger", Enum(TRIGGERS)), req("workKind", Enum(WORK_KINDS)),
])

ROOT = Obj([
    req("formatVersion", Const(1)), req("agentSchedulerSeed", Str(1, 256, max_utf16=256)),
    req("jobs", Arr(Node())), req("activeClaims", Arr(Node())),
])


class JobNode(Node):
    """A job: the variant is chosen by `payload.kind`; per-job rules come after the shape."""

    def pick(self, value: Any, path: Any) -> Obj:
        if not isinstance(value, dict):
            raise SchemaError(path, "must be an object")
        payload = value.get("payload")
        kind = payload.get("kind") if isinstance(payload, dict) else None
        if not isinstance(kind, str) or kind not in JOB_VARIANTS:  # a list there is no crash
            raise SchemaError((path, ".payload.kind"), f"must be one of {', '.join(JOB_VARIANTS)}")
        return JOB_VARIANTS[kind]

    def check(self, value: Any, path: Any) -> None:
        self.pick(value, path).check(value, path)
        if value["lifecycle"]["status"].startswith("one_shot") and value["schedule"]["kind"] != "at":
            raise SchemaError((path, ".lifecycle"), "one-shot lifecycle is legal only for an at schedule")
        target = value.get("deliveryTarget")
        if target is not None:
            check_delivery_target(target, (path, ".deliveryTarget"))
            if target["conversation"]["conversationScope"]["agentId"] != value["agentId"]:
                raise SchemaError((path, ".deliveryTarget"), "delivery conversation must belong to the job owner")
        if value.get("continuationMode") == "origin_history" and target is None:
            raise SchemaError((path, ".continuationMode"), "origin_history continuation requires a delivery target")
        if value["source"] == "built_in":
            expected = BUILT_IN_ID_PREFIX[value["payload"]["action"]] + value["agentId"]
            if value["id"] != expected:
                raise SchemaError((path, ".id"), f"a built-in {value['payload']['action']} job must have id {expected}")

    def canonical(self, value: Any) -> Any:
        return self.pick(value, "$").canonical(value)


JOB = JobNode()


def work_kind_of(job: dict[str, Any]) -> str:
    kind = job["payload"]["kind"]
    return "delivery_only" if kind == "delivery" else kind


def root_run_id_for(work_kind: str, execution_id: str) -> str | None:
    return f"root-cron-{execution_id}" if work_kind in ("agent_turn", "internal_action") else None


# --- conversationRef (cron-store.md §4) ----------------------------------------------------------

def _endpoint_fields(endpoint: dict[str, Any]) -> list[str]:
    thread = endpoint.get("threadId")
    return [endpoint["channelType"], endpoint["channelInstanceId"], endpoint["conversationId"],
            "thread:absent" if thread is None else f"thread:present:{thread}", endpoint["conversationKind"]]


def conversation_ref(scope: dict[str, Any]) -> str:
    """`cv_` + base64url(sha256(length-prefixed fields)), without padding."""
    partition = scope["partition"]
    kind = partition["kind"]
    fields = ["comis-conversation-scope", "v1", scope["tenantId"], scope["agentId"], kind]
    if kind == "principal":
        fields.append(partition["principalId"])
    elif kind == "channel-principal":
        fields += [partition["channelType"], partition["principalId"]]
    elif kind.startswith("endpoint-conversation"):
        fields += _endpoint_fields(partition["endpoint"])
        if kind == "endpoint-conversation-principal":
            fields.append(partition["principalId"])
    encoded = "".join(f"{len(f.encode())}:{f}" for f in fields)
    digest = hashlib.sha256(encoded.encode()).digest()
    return "cv_" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def check_delivery_target(target: dict[str, Any], path: Any) -> None:
    scope = target["conversation"]["conversationScope"]
    partition = scope["partition"]
    endpoint = target["destinationEndpoint"]
    if partition["kind"] == "channel-principal" and partition["channelType"] != endpoint["channelType"]:
        raise SchemaError((path, ".conversation.conversationScope.partition.channelType"),
                          "must equal the destination endpoint's channelType")
    if partition["kind"].startswith("endpoint-conversation") and partition["endpoint"] != endpoint:
        raise SchemaError((path, ".conversation.conversationScope.partition.endpoint"),
                          "must equal destinationEndpoint exactly")
    if target["conversation"]["conversationRef"] != conversation_ref(scope):
        raise SchemaError((path, ".conversation.conversationRef"), "does not match its conversationScope")


def scorpiox_target(agent_id: str, project: str, conversation: str, tenant: str = "default") -> dict[str, Any]:
    """sxctl's delivery target: a SCORPIOX session (or `live`) of a project (cron-store.md §4)."""
    endpoint = {"channelType": "scorpiox-inbox", "channelInstanceId": project, "conversationId": conversation,
                "conversationKind": "direct"}
    scope = {"tenantId": tenant, "agentId": agent_id,
             "partition": {"kind": "endpoint-conversation", "endpoint": dict(endpoint)}}
    return {"conversation": {"conversationScope": scope, "conversationRef": conversation_ref(scope)},
            "destinationEndpoint": endpoint}


# --- the whole store -----------------------------------------------------------------------------

def validate_store(store: Any, only_jobs: Collection[str] | None = None,
                   memo: dict[str, Any] | None = None) -> None:
    """Every shape rule and every whole-root rule (cron-store.md §2–§5); SchemaError on the first.
    With `only_jobs`, the store is one that was validated whole when it was read and in which only
    these jobs (and the claims) changed since: their shapes and every rule they or the claims can
    break are checked, in time that does not grow with the number of other jobs."""
    if only_jobs is not None:
        _validate_changes(store, only_jobs, {} if memo is None else memo)
        return
    ROOT.check(store, "$")
    for index, job in enumerate(store["jobs"]):
        JOB.check(job, ("$.jobs", index))
    for index, claim in enumerate(store["activeClaims"]):
        CLAIM.check(claim, ("$.activeClaims", index))
    ids: dict[str, int] = {}
    names: set[str] = set()
    for index, job in enumerate(store["jobs"]):
        if job["id"] in ids:
            raise SchemaError(f"$.jobs[{index}].id", "job id must be unique")
        if job["name"] in names:
            raise SchemaError(f"$.jobs[{index}].name", "job name must be unique")
        ids[job["id"]] = index
        names.add(job["name"])
    executions: set[str] = set()
    claimed_jobs: dict[str, dict[str, Any]] = {}
    for index, claim in enumerate(store["activeClaims"]):
        path = f"$.activeClaims[{index}]"
        if claim["executionId"] in executions:
            raise SchemaError((path, ".executionId"), "execution id must be unique")
        executions.add(claim["executionId"])
        if claim["jobId"] in claimed_jobs:
            raise SchemaError((path, ".jobId"), "a job may have only one active claim")
        claimed_jobs[claim["jobId"]] = claim
        if claim["jobId"] not in ids:
            raise SchemaError((path, ".jobId"), "claim must reference an existing job")
        job = store["jobs"][ids[claim["jobId"]]]
        if claim["agentId"] != job["agentId"] or claim["workKind"] != work_kind_of(job):
            raise SchemaError(path, "claim identity must match its job")
        if claim["rootRunId"] != root_run_id_for(claim["workKind"], claim["executionId"]):
            raise SchemaError((path, ".rootRunId"), "claim root legality does not match work kind")
    for index, job in enumerate(store["jobs"]):
        claim = claimed_jobs.get(job["id"])
        lifecycle = job["lifecycle"]
        needs_one_shot = claim is not None and claim["trigger"] != "manual" and job["schedule"]["kind"] == "at"
        is_claimed = lifecycle["status"] == "one_shot_claimed"
        if needs_one_shot or is_claimed:
            matches = (
                needs_one_shot and is_claimed
                and claim is not None
                and all(lifecycle[k] == claim[k] for k in ("executionId", "scheduledForMs", "claimedAtMs"))
            )
            if not matches:
                raise SchemaError(f"$.jobs[{index}].lifecycle", "one-shot lifecycle must match its active claim")


def job_named_at(store: Any, json_path: str) -> str | None:
    """The name of the job a JSON path is in, where the record has a readable one
    (`schema_kit.readable_name`): in the store `$.jobs[0]…` (that job) and `$.activeClaims[0]…`
    (the job the claim is for); in sxctl's policy file, keyed by job id, `$.jobs['<id>']…` (the
    store's job of that id)."""
    jobs = store.get("jobs") if isinstance(store, dict) else None
    if not isinstance(jobs, list):
        return None
    if json_path.startswith(("$.jobs['", '$.jobs["')):
        return next((readable_name(job.get("name")) for job in jobs if isinstance(job, dict)
                     and json_path.startswith(f"$.jobs[{job.get('id')!r}]")), None)
    found = re.match(r"\$\.(jobs|activeClaims)\[(\d+)\]", json_path)
    records = store.get(found.group(1)) if found is not None else None
    if found is None or not isinstance(records, list) or int(found.group(2)) >= len(records):
        return None
    record = records[int(found.group(2))]
    if isinstance(record, dict) and found.group(1) == "activeClaims":
        record = next((job for job in jobs if isinstance(job, dict) and job.get("id") == record.get("jobId")), None)
    return readable_name(record.get("name")) if isinstance(record, dict) else None


def _validate_changes(store: Any, changed: Collection[str], memo: dict[str, Any]) -> None:
    """`memo` keeps each job's id and name from one write to the next: while the jobs are the
    same ones and the changed ones kept their names, ids and names are still unique."""
    ROOT.check({**store, "jobs": []}, "$")
    jobs = store["jobs"]
    name_of: dict[str, str] | None = memo.get("name_of")
    same = (name_of is not None and len(name_of) == len(jobs)
            and all(name_of.get(job["id"]) == job["name"] for job in jobs if job["id"] in changed))
    if not same:
        name_of = {job["id"]: job["name"] for job in jobs}
        if len(name_of) != len(jobs) or len(set(name_of.values())) != len(jobs):
            raise SchemaError("$.jobs", "job ids and names must be unique")
        memo["name_of"] = name_of
    assert name_of is not None
    ids = name_of
    claimed: dict[str, tuple[int, dict[str, Any]]] = {}
    executions: set[str] = set()
    for index, claim in enumerate(store["activeClaims"]):
        path = f"$.activeClaims[{index}]"
        CLAIM.check(claim, path)
        if claim["executionId"] in executions:
            raise SchemaError((path, ".executionId"), "execution id must be unique")
        executions.add(claim["executionId"])
        if claim["jobId"] in claimed:
            raise SchemaError((path, ".jobId"), "a job may have only one active claim")
        if claim["jobId"] not in ids:
            raise SchemaError((path, ".jobId"), "claim must reference an existing job")
        claimed[claim["jobId"]] = (index, claim)
    for index, job in enumerate(jobs):
        if job["id"] not in changed and job["id"] not in claimed:
            continue
        JOB.check(job, ("$.jobs", index))
        claim_index, claim = claimed.get(job["id"], (-1, None))
        if claim is not None and (claim["agentId"] != job["agentId"] or claim["workKind"] != work_kind_of(job)
                                  or claim["rootRunId"] != root_run_id_for(claim["workKind"], claim["executionId"])):
            raise SchemaError(f"$.activeClaims[{claim_index}]", "claim identity must match its job")
        lifecycle = job["lifecycle"]
        needs_one_shot = claim is not None and claim["trigger"] != "manual" and job["schedule"]["kind"] == "at"
        if (needs_one_shot or lifecycle["status"] == "one_shot_claimed") and not (
                needs_one_shot and lifecycle["status"] == "one_shot_claimed" and claim is not None
                and all(lifecycle[k] == claim[k] for k in ("executionId", "scheduledForMs", "claimedAtMs"))):
            raise SchemaError(f"$.jobs[{index}].lifecycle", "one-shot lifecycle must match its active claim")


def canonical_store(store: dict[str, Any], only_jobs: Collection[str] | None = None) -> dict[str, Any]:
    """The store in schema order (keys as comis writes them); with `only_jobs`, the other jobs are
    taken as they are (already canonical)."""
    return {
        "formatVersion": store["formatVersion"], "agentSchedulerSeed": store["agentSchedulerSeed"],
        "jobs": [JOB.canonical(job) if only_jobs is None or job["id"] in only_jobs else job for job in store["jobs"]],
        "activeClaims": [CLAIM.canonical(claim) for claim in store["activeClaims"]],
    }



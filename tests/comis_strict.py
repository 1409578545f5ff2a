"""An independent strict checker of comis v1 `cron-jobs.json` bytes, written from the spec
(cron-store.md §2-§5) and sharing no code with sxctl, so that sxctl's writer is checked by
something other than its own reader. Returns a list of problems (empty = loads in comis)."""

from __future__ import annotations

import base64
import hashlib
import json

ROOT_KEYS = ["formatVersion", "agentSchedulerSeed", "jobs", "activeClaims"]
HEAD = ["id", "name", "agentId", "schedule", "lifecycle"]
VARIANT_TAIL = {
    "heartbeat_event": ([], []),
    "delivery": (["deliveryTarget"], []),
    "agent_turn": (["sessionPolicy", "continuationMode"], ["deliveryTarget", "wakeGate", "cacheRetention", "toolPolicy"]),
    "internal_action": ([], []),
}
PAYLOAD_KEYS = {
    "heartbeat_event": (["kind", "text", "wakeMode"], []),
    "delivery": (["kind", "text"], []),
    "agent_turn": (["kind", "message"], ["model", "timeoutSeconds"]),
    "internal_action": (["kind", "action"], []),
}
SCHEDULE_KEYS = {"cron": ["kind", "expr", "tz"], "every": ["kind", "everyMs", "anchorMs"], "at": ["kind", "atMs"]}
LIFECYCLE_KEYS = {
    "scheduled": ["status", "nextRunAtMs", "consecutiveDependencyErrors"],
    "paused": ["status", "nextRunAtMs", "consecutiveDependencyErrors", "reason"],
    "one_shot_claimed": ["status", "executionId", "scheduledForMs", "claimedAtMs"],
    "one_shot_terminal": ["status", "terminalExecutionId", "terminalAtMs"],
}
CLAIM_KEYS = ["executionId", "bootId", "jobId", "agentId", "rootRunId", "scheduledForMs", "claimedAtMs", "trigger",
              "workKind"]


def _ordered(obj, required, optional, where, problems, order=None):
    """Exactly the required keys plus some optional ones, in `order` (default required+optional)."""
    if not isinstance(obj, dict):
        problems.append(f"{where}: not an object")
        return
    keys = list(obj)
    allowed = order or required + optional
    if any(k not in allowed for k in keys) or any(k not in keys for k in required):
        problems.append(f"{where}: keys {keys} are not exactly {required} (+ optional {optional})")
        return
    positions = [allowed.index(k) for k in keys]
    if positions != sorted(positions):
        problems.append(f"{where}: keys out of schema order: {keys}")


def _ref(scope):
    part = scope["partition"]
    fields = ["comis-conversation-scope", "v1", scope["tenantId"], scope["agentId"], part["kind"]]
    if part["kind"] == "endpoint-conversation":
        ep = part["endpoint"]
        fields += [ep["channelType"], ep["channelInstanceId"], ep["conversationId"],
                   "thread:absent" if "threadId" not in ep else "thread:present:" + ep["threadId"],
                   ep["conversationKind"]]
    text = "".join(f"{len(f.encode('utf-8'))}:{f}" for f in fields)
    return "cv_" + base64.urlsafe_b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode().rstrip("=")


def _int(value):
    return type(value) is int and 0 <= value <= 2**53 - 1


def check_store_bytes(raw: bytes) -> list[str]:
    problems: list[str] = []
    if not raw.endswith(b"\n") or raw.endswith(b"\n\n"):
        problems.append("not terminated by exactly one newline")
    store = json.loads(raw)
    if json.dumps(store, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" != raw:
        problems.append("not compact JSON")
    if list(store) != ROOT_KEYS or store["formatVersion"] != 1:
        problems.append(f"root keys {list(store)}")
        return problems
    if not 1 <= len(store["agentSchedulerSeed"]) <= 256:
        problems.append("bad seed")
    names, ids = set(), set()
    for n, job in enumerate(store["jobs"]):
        where = f"jobs[{n}]"
        kind = job.get("payload", {}).get("kind")
        if kind not in VARIANT_TAIL:
            problems.append(f"{where}: payload kind {kind!r}")
            continue
        req_tail, opt_tail = VARIANT_TAIL[kind]
        order = HEAD + ["maxConsecutiveDependencyErrors", "source", "payload"] + req_tail + opt_tail
        _ordered(job, HEAD + ["source", "payload"] + req_tail, ["maxConsecutiveDependencyErrors"] + opt_tail,
                 where, problems, order)
        _ordered(job["payload"], *PAYLOAD_KEYS[kind], f"{where}.payload", problems)
        _ordered(job["schedule"], SCHEDULE_KEYS[job["schedule"]["kind"]], [], f"{where}.schedule", problems)
        _ordered(job["lifecycle"], LIFECYCLE_KEYS[job["lifecycle"]["status"]], [], f"{where}.lifecycle", problems)
        for key, value in job["lifecycle"].items():
            if key.endswith("Ms") and not _int(value):
                problems.append(f"{where}.lifecycle.{key}: not an epoch ms")
        if job["lifecycle"]["status"].startswith("one_shot") and job["schedule"]["kind"] != "at":
            problems.append(f"{where}: one-shot lifecycle on a non-at schedule")
        if job["source"] != ("built_in" if kind == "internal_action" else "authored"):
            problems.append(f"{where}: source {job['source']}")
        if kind == "heartbeat_event" and "deliveryTarget" in job:
            problems.append(f"{where}: heartbeat with a delivery target")
        target = job.get("deliveryTarget")
        if target is not None:
            scope = target["conversation"]["conversationScope"]
            if target["conversation"]["conversationRef"] != _ref(scope):
                problems.append(f"{where}: conversationRef mismatch")
            if scope["agentId"] != job["agentId"]:
                problems.append(f"{where}: delivery conversation of another agent")
            if scope["partition"].get("endpoint") not in (None, target["destinationEndpoint"]):
                problems.append(f"{where}: partition endpoint differs from destinationEndpoint")
        if job["name"] in names or job["id"] in ids:
            problems.append(f"{where}: duplicate name or id")
        names.add(job["name"])
        ids.add(job["id"])
    for n, claim in enumerate(store["activeClaims"]):
        _ordered(claim, CLAIM_KEYS, [], f"activeClaims[{n}]", problems)
        if claim.get("jobId") not in ids:
            problems.append(f"activeClaims[{n}]: unknown job")
    return problems

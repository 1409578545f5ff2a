"""The row format of comis's execution ledger `cron-executions.jsonl` (spec cron-ledger.md §2-§3):
started and terminal rows, every outcome kind with the work kinds it may settle, and the check of
one row alone. Reading, pairing and rewriting the file are cron/run/ledger.py's.
"""

from __future__ import annotations

from typing import Any

from ..store.schema import EPOCH_MS, ERROR_KINDS, ID, TRIGGERS, WORK_KINDS, root_run_id_for
from ..store.schema_kit import MAX_SAFE_INT, Const, Enum, Int, Node, Nullable, Obj, SchemaError, Str, Union, opt, req

ERROR_KIND = Enum(ERROR_KINDS)
COUNT = Int(0, MAX_SAFE_INT)
POSITIVE = Int(1, MAX_SAFE_INT)
QUEUE_DISPOSITION = Enum(("accepted", "accepted_oldest_dropped", "duplicate"))


def _delivery(allow_not_requested: bool, allow_quiet_hours: bool) -> Union:
    variants: dict[str, Node] = {
        "suppressed": Obj([req("status", Const("suppressed")), req("reason", Enum(
            ("response_filter", "quiet_hours") if allow_quiet_hours else ("response_filter",)))]),
        "pre_send_failed": Obj([req("status", Const("pre_send_failed")),
                                req("reason", Enum(("output_guard", "target_precondition", "cancelled"))),
                                req("errorKind", ERROR_KIND)]),
        "accepted": Obj([req("status", Const("accepted")), req("deliveredChunks", POSITIVE),
                         req("settledAtMs", EPOCH_MS), opt("lastMessageId", Str(1, 1024))]),
        "partial": Obj([req("status", Const("partial")), req("errorKind", ERROR_KIND),
                        req("deliveredChunks", POSITIVE), req("failedChunks", POSITIVE), req("settledAtMs", EPOCH_MS),
                        opt("lastMessageId", Str(1, 1024))]),
        "rejected": Obj([req("status", Const("rejected")), req("errorKind", ERROR_KIND),
                         req("deliveredChunks", Const(0)), req("failedChunks", POSITIVE),
                         req("settledAtMs", EPOCH_MS)]),
        "unknown": Obj([req("status", Const("unknown")), req("errorKind", ERROR_KIND),
                        req("deliveredChunks", COUNT), req("failedChunks", POSITIVE), req("ambiguousChunks", POSITIVE),
                        req("settledAtMs", EPOCH_MS), opt("lastMessageId", Str(1, 1024))]),
    }
    if allow_not_requested:
        variants["not_requested"] = Obj([req("status", Const("not_requested"))])
    return Union("status", variants)


DELIVERY = _delivery(True, False)
DIRECT_DELIVERY = _delivery(False, True)

CONTINUATION = Union("mode", {
    "none": Obj([req("mode", Const("none")), req("status", Const("not_requested"))]),
    "heartbeat_excerpt": Union("status", {
        "admitted": Obj([req("mode", Const("heartbeat_excerpt")), req("status", Const("admitted")),
                         req("correlationId", ID), req("queueDisposition", QUEUE_DISPOSITION)]),
        "skipped": Obj([req("mode", Const("heartbeat_excerpt")), req("status", Const("skipped")),
                        req("reason", Enum(("execution_not_completed", "visible_text_unavailable")))]),
        "failed": Obj([req("mode", Const("heartbeat_excerpt")), req("status", Const("failed")),
                       req("errorKind", ERROR_KIND)]),
    }),
    "origin_history": Union("status", {
        "appended": Obj([req("mode", Const("origin_history")), req("status", Const("appended"))]),
        "already_present": Obj([req("mode", Const("origin_history")), req("status", Const("already_present"))]),
        "skipped": Obj([req("mode", Const("origin_history")), req("status", Const("skipped")),
                        req("reason", Enum(("execution_not_completed", "delivery_not_accepted")))]),
        "failed": Obj([req("mode", Const("origin_history")), req("status", Const("failed")),
                       req("errorKind", ERROR_KIND)]),
    }),
})

WAKE_GATE = Union("status", {
    "not_configured": Obj([req("status", Const("not_configured"))]),
    "woke": Obj([req("status", Const("woke")), req("durationMs", COUNT), req("toolCalls", COUNT)]),
    "failed_open": Obj([req("status", Const("failed_open")), req("durationMs", COUNT), req("toolCalls", COUNT),
                        req("errorKind", ERROR_KIND)]),
})

ROOT_RUN = Str(1, 512)
EXECUTION = Union("status", {
    "completed": Obj([req("status", Const("completed")), req("finishReason", Str(1, 256))]),
    "failed": Obj([req("status", Const("failed")), req("finishReason", Str(1, 256)), req("errorKind", ERROR_KIND)]),
    "aborted": Obj([req("status", Const("aborted")), req("abortReason", Str(1, 256)),
                    opt("finishReason", Str(1, 256)), opt("errorKind", ERROR_KIND)]),
    "unknown": Obj([req("status", Const("unknown")), req("errorKind", ERROR_KIND)]),
})
PRE_DISPATCH_STAGES = {"start_record_recovery": "internal", "root_registration": "internal",
                       "executor_not_bound": "precondition", "executor_invalid_input": "validation",
                       "executor_precondition": "precondition", "dispatch_rejected": None}
UNSETTLED_REASONS = {"deadline_termination_unestablished": "timeout", "owner_lost_after_start": "internal",
                     "executor_rejected_after_invocation": "internal"}

#: Each outcome kind: its full schema, and the work kinds it may settle.
OUTCOMES: dict[str, tuple[Node, tuple[str, ...]]] = {
    "agent_turn": (Obj([
        req("kind", Const("agent_turn")), req("rootRunId", ROOT_RUN), req("sessionKey", Node()),
        req("agentExecutionId", Node()), req("execution", EXECUTION), req("modelResolved", Node()),
        req("modelResolutionSource", Node()),
        req("metrics", Obj([req("totalTokens", Node()), req("costUsd", Node()), req("toolCalls", Node()),
                            req("llmCalls", Node())])),
        req("wakeGate", WAKE_GATE), req("delivery", DELIVERY), req("continuation", CONTINUATION),
    ]), ("agent_turn",)),
    "wake_gate_skip": (Obj([
        req("kind", Const("wake_gate_skip")), req("rootRunId", ROOT_RUN), req("gateDurationMs", COUNT),
        req("gateToolCalls", COUNT), req("delivery", DELIVERY), req("continuation", CONTINUATION),
    ]), ("agent_turn",)),
    "agent_turn_pre_model_skip": (Obj([
        req("kind", Const("agent_turn_pre_model_skip")), req("rootRunId", ROOT_RUN),
        req("reason", Enum(("wake_gate_disabled", "wake_gate_unbound"))), req("errorKind", Const("precondition")),
        req("continuation", CONTINUATION),
    ]), ("agent_turn",)),
    "heartbeat_event": (Obj([
        req("kind", Const("heartbeat_event")), req("correlationId", ID), req("queueDisposition", QUEUE_DISPOSITION),
    ]), ("heartbeat_event",)),
    "internal_action": (Obj([
        req("kind", Const("internal_action")), req("action", Str(1, 256)), req("rootRunId", ROOT_RUN),
        req("modelResolved", Node()), req("modelResolutionSource", Node()),
        req("metrics", Obj([req("totalTokens", Node()), req("costUsd", Node()), req("llmCalls", Node())])),
        req("execution", Node()),
    ]), ("internal_action",)),
    "delivery_only": (Obj([req("kind", Const("delivery_only")), req("delivery", DIRECT_DELIVERY)]),
                      ("delivery_only",)),
    "pre_dispatch_failure": (Obj([
        req("kind", Const("pre_dispatch_failure")), req("stage", Enum(tuple(PRE_DISPATCH_STAGES))),
        req("errorKind", ERROR_KIND),
    ]), WORK_KINDS),
    "unsettled": (Obj([
        req("kind", Const("unsettled")), req("reason", Enum(tuple(UNSETTLED_REASONS))),
        req("rootRunId", Nullable(ROOT_RUN)), req("errorKind", ERROR_KIND),
    ]), WORK_KINDS),
    "inbox_dispatch": (Obj([
        req("kind", Const("inbox_dispatch")), req("sessionId", Str(1, 256)), req("stem", Str(1, 64)),
        req("mode", Enum(("auto", "interrupt", "queue"))), opt("wakeGate", WAKE_GATE),
        opt("replaced", Obj([req("executionId", ID), req("sessionId", Str(1, 256)), req("stem", Str(1, 64)),
                             req("state", Enum(("retracted", "read", "lost")))])),  # --overlap replace
    ]), ("agent_turn", "heartbeat_event")),
}

BASE = [req("executionId", ID), req("bootId", ID), req("jobId", ID), req("agentId", ID),
        req("scheduledForMs", EPOCH_MS), req("trigger", Enum(TRIGGERS))]


class OutcomeShape(Node):
    """Structural check only: an object whose `kind` is known (details are `validate`'s job)."""

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or value["kind"] not in OUTCOMES:
            raise SchemaError((path, ".kind"), f"must be one of {', '.join(OUTCOMES)}")


ROW = Union("recordType", {
    "started": Obj([*BASE, req("recordType", Const("started")), req("workKind", Enum(WORK_KINDS)),
                    req("rootRunId", Nullable(ROOT_RUN)), req("startedAtMs", EPOCH_MS)]),
    "terminal": Obj([*BASE, req("recordType", Const("terminal")), req("workKind", Enum(WORK_KINDS)),
                     req("terminalAtMs", EPOCH_MS), req("durationMs", COUNT), req("outcome", OutcomeShape())]),
})

IDENTITY_KEYS = ("executionId", "bootId", "jobId", "agentId", "scheduledForMs", "trigger", "workKind")


def check_row(row: Any, *, full: bool) -> str | None:
    """None when the row is acceptable alone; otherwise the comis message for it."""
    try:
        ROW.check(row, "$")
        if row["recordType"] == "started":
            if row["rootRunId"] != root_run_id_for(row["workKind"], row["executionId"]):
                raise SchemaError("$.rootRunId", "root legality does not match work kind")
            return None
        schema, work_kinds = OUTCOMES[row["outcome"]["kind"]]
        if row["workKind"] not in work_kinds:
            raise SchemaError("$.outcome.kind", f"does not fit work kind {row['workKind']}")
        if full:
            schema.check(row["outcome"], "$.outcome")
            _check_outcome_pairs(row["outcome"])
    except SchemaError:
        return "Cron execution ledger contains an invalid row"
    return None


def _check_outcome_pairs(outcome: dict[str, Any]) -> None:
    kind = outcome["kind"]
    if kind == "pre_dispatch_failure":
        fixed = PRE_DISPATCH_STAGES[outcome["stage"]]
        if fixed is not None and outcome["errorKind"] != fixed:
            raise SchemaError("$.outcome.errorKind", f"must be {fixed} for stage {outcome['stage']}")
    elif kind == "unsettled" and outcome["errorKind"] != UNSETTLED_REASONS[outcome["reason"]]:
        raise SchemaError("$.outcome.errorKind", "does not fit the reason")
    delivery = outcome.get("delivery")
    if isinstance(delivery, dict) and delivery.get("status") == "unknown" \
            and delivery["ambiguousChunks"] > delivery["failedChunks"]:
        raise SchemaError("$.outcome.delivery.ambiguousChunks", "must not exceed failedChunks")


def start_row(claim: dict[str, Any], *, started_at: int) -> dict[str, Any]:
    """The `started` row of a claimed run."""
    row = {k: claim[k] for k in ("executionId", "bootId", "jobId", "agentId", "scheduledForMs", "trigger")}
    row.update(recordType="started", workKind=claim["workKind"], rootRunId=claim["rootRunId"], startedAtMs=started_at)
    return row


def unsettled_outcome(root_run_id: str | None) -> dict[str, Any]:
    """The outcome of a run whose pass died after its start: `unknown`, never replayed."""
    return {"kind": "unsettled", "reason": "owner_lost_after_start", "rootRunId": root_run_id,
            "errorKind": "internal"}

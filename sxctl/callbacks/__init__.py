"""The session timer table `callbacks.json` (spec callbacks.md), in parts: `table` (reading rules,
both copies of a worktree session, the tool's validation strings, slots), `protocol` (the
revision protocol every write goes through), `verbs` (set, edit, cancel, pause, the fire
preview and the tool's strings) and `move` (timers out of sessions no agent runs in). Names
are imported from here; each part loads on first use.
"""

from __future__ import annotations

from ..lazy import lazy_parts

#: the part that defines each name this package offers
_PARTS: dict[str, tuple[str, ...]] = {
    "table": (
        "CAPACITY",
        "_FILE_CAP",
        "FILE_NAME",
        "LOCK_NAME",
        "LOCK_WAIT_S",
        "ATTEMPTS",
        "STALE_TEMP_MS",
        "MISSING_FILE_WARNING",
        "_is_int",
        "CallbackTable",
        "doc_rev",
        "doc_paused",
        "is_active",
        "_ACTIVE_TYPES",
        "parse_table",
        "_read_raw",
        "read_table",
        "encode_table",
        "TableView",
        "_table_paths",
        "_raw_pair",
        "view_table",
        "tool_error",
        "check_message",
        "_seconds_text",
        "check_delay_ms",
        "check_first_in_ms",
        "check_repeat",
        "check_slot_id",
        "not_active_error",
        "doc_slots",
        "is_free",
        "active_ids",
        "put_slot",
        "new_table_doc",
    ),
    "protocol": (
        "_Moved",
        "WriteResult",
        "WriteOptions",
        "Apply",
        "Survives",
        "write_table",
        "_write_mirror",
        "_verify",
        "_remove_stale_temps",
    ),
    "move": ("MovedTimer", "TimerMovePlan", "has_active_timers", "move_timers"),
    "verbs": (
        "set_timer",
        "edit_timer",
        "cancel_timers",
        "set_paused",
        "preview_fires",
        "list_preview",
        "cancel_preview",
        "fires_in",
        "scheduled_text",
        "list_text",
        "cancelled_text",
    ),
}
__getattr__, __all__ = lazy_parts(__name__, globals(), _PARTS)

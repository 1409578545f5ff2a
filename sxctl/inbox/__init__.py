"""The agent's drop-in inbox (spec inbox.md), in parts: `message` (bytes and stems), `folder`
(an inbox folder, message states, listings), `sending`, `wait`, `manage` (retract, clean,
prune) and `forward` (moving pending messages between sessions, keys across sessions).

Names are imported from here as before (`from sxctl.inbox import send`); each part is loaded
only when one of its names is first used, so `inbox send --no-wait` in a shell loop loads the
message, folder and sending parts and nothing else.
"""

from __future__ import annotations

from ..lazy import lazy_parts

#: the part that defines each name this package offers
_PARTS: dict[str, tuple[str, ...]] = {
    "message": ("MODES", "MAX_MESSAGE_BYTES", "MAX_IMAGE_BYTES", "IMAGE_EXTS", "SOFT_WAIT_S", "POLL_S",
                "KEY_TEMP_WAIT_S", "PREVIEW_CHARS", "InboxMessage", "Image", "image_type_ok", "load_image",
                "apply_tilde", "build_message", "check_stem", "stem_argument", "default_stem"),
    "folder": ("InboxDir", "inbox_dirs", "primary_inbox", "is_message_name", "message_names", "MessageRow",
               "list_messages", "find_message", "count_since", "deliverable_count"),
    "sending": ("reserve", "publish", "check_key", "SendResult", "SendRequest", "inbox_gate", "send", "key_state",
             "_gates"),
    "wait": ("WaitOutcome", "wait_for", "rotation_target", "rehome"),
    "manage": ("RetractResult", "stem_for_key", "retract", "clean", "prune", "evidence_for_key"),
    "forward": ("Moved", "move_message", "forward_lock", "recover", "Recovered", "interrupted", "KeyPlace",
                "moved_to", "follow", "place_of", "find_key_elsewhere", "forward_target", "pick_sources",
                "has_pending", "ForwardPlan", "forward_pending", "key_index"),
}
__getattr__, __all__ = lazy_parts(__name__, globals(), _PARTS)

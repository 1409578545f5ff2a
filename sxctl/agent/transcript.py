"""The reference agent's events as the transcript lines a person reads (`agent run`, the demo)."""

from __future__ import annotations

TRANSCRIPT = {
    "started": lambda e: f"[Agent] session {e['session']} ({e['session_dir']}), pid {e['pid']}",
    "turn_start": lambda e: f"[turn {e['turn']}] ({e['source']} {e['ref']}, {e['mode']}) {e['text']}"
                            + (f" [image: {e['image']}]" if e.get("image") else ""),
    "turn_end": lambda e: f"[turn {e['turn']}] done in {e['duration_ms'] / 1000:.1f}s"
                          + (f" (exit {e['exit_code']})" if e.get("exit_code") is not None else ""),
    "interrupt_delivered": lambda e: f"[Interrupt delivered] {e['text']}",
    "queue_flush": lambda e: "[Sending queued message(s)]",
    "callback_fired": lambda e: "[Callback] Timer fired",
    "callback_deferred": lambda e: "[Callback] Deferred 5s — agent busy",
    "callbacks_rebased": lambda e: f"[Callbacks] re-based slot(s) {', '.join(map(str, e['slots']))}",
    "callbacks_adopted": lambda e: f"[Callbacks] adopted rev {e['rev']}",
    "stopping": lambda e: f"[Agent] stopping ({e['signal']})",
    "stopped": lambda e: f"[Agent] stopped after {e['turns']} turn(s); {e['dropped']} note(s) dropped",
}
INBOX = {
    "interrupt": lambda e: f"[Interrupt] {e['text']}",
    "queued": lambda e: f"[Queued {e['count']}] {e['text']}",
    "invalid": lambda e: f"[Inbox] skipped invalid {e['stem']}: {e['reason']}",
}

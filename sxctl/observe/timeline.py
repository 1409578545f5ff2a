"""`next`: pending inbox messages, timer fires and cron fires in one time-ordered list."""

from __future__ import annotations

from typing import Any

from ..callbacks.table import doc_paused, doc_slots
from ..callbacks.verbs import list_preview, preview_fires
from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy import read_policy
from ..cron.store import read_store
from ..cron.views import timeline
from ..inbox.folder import list_messages
from ..project import Session
from .summary import is_waiting, read_timers


def merged_next(session: Session, ws, count: int, zone, *, clock: Clock = SYSTEM_CLOCK) -> list[dict[str, Any]]:
    """Pending inbox messages (read at the next poll), timer fires (idle only) and cron fires,
    in one time-ordered list; every row says its source."""
    now = clock.now_ms()
    rows: list[dict[str, Any]] = []
    for message in list_messages(session, ("pending",), count):
        rows.append({"source": "inbox", "at_ms": now, "stem": message.stem,
                     "mode": message.message.mode if message.message else None, "preview": message.preview,
                     "pending_since_ms": message.mtime_ms})
    _, doc = read_timers(session, now)
    for fire in preview_fires(doc or {}, now, count):
        slot = doc_slots(doc or {})[fire["slot"]]
        rows.append({"source": "callback", "at_ms": fire["at_ms"], "slot": fire["slot"],
                     "message": list_preview(slot["message"]), "fire_no": fire["fire_no"],
                     "remaining_after": fire["remaining_after"], "overdue": fire["overdue"], "idle_only": True,
                     "paused": doc_paused(doc or {})})
    store = read_store(ws)
    if store is not None:
        jobs = {job["id"]: job for job in store["jobs"]}
        policy = read_policy(ws)["jobs"]
        for fire in timeline(store, now, count, zone):
            waiting = fire["overdue"] and is_waiting(jobs[fire["jobId"]], policy.get(fire["jobId"]), now,
                                                     session.project, clock, ws)
            rows.append({"source": "cron", "at_ms": fire["at_ms"], "name": fire["name"], "jobId": fire["jobId"],
                         "overdue": fire["overdue"], "paused": fire["paused"], "dst": fire["dst"],
                         "waiting": waiting})
    order = {"inbox": 0, "callback": 1, "cron": 2}
    rows.sort(key=lambda row: (row["at_ms"], order[row["source"]]))
    return rows[:count]

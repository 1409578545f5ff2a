"""`next`: pending inbox messages, timer fires and cron fires in one time-ordered list. Each row
is one of three typed dicts by its `source` (docs/api.md lists their keys)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..callbacks.table import doc_paused, doc_slots
from ..callbacks.verbs import list_preview, preview_fires
from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.store.file import read_store
from ..cron.timeline.previews import job_previews
from ..cron.timeline.views import timeline
from ..inbox.folder import list_messages
from ..project import Session
from .summary import read_timers


class InboxRow(TypedDict):
    """A pending message: read at the agent's next poll (`at_ms` is now) — or, when no agent
    is live in its session (`agent_live` false), whenever one starts."""

    source: Literal["inbox"]
    at_ms: int
    stem: str
    mode: str | None
    preview: str
    pending_since_ms: int
    agent_live: bool


class CallbackRow(TypedDict):
    """A timer fire (the agent must be idle then)."""

    source: Literal["callback"]
    at_ms: int
    slot: str
    message: str
    fire_no: int
    remaining_after: int | None
    overdue: bool
    idle_only: bool
    paused: bool


class CronRow(TypedDict):
    """A cron run the pass will make (`sxctl.cron.timeline.fate`): `note` says what it skips before it
    (active hours, daily limit), `due` whether its time has come, `overdue` whether the passes
    missed it (as `status` says), `waiting` whether a due one is held for a live agent, `held`
    what a spend guard holding it says (None: none does)."""

    source: Literal["cron"]
    at_ms: int
    name: str
    jobId: str
    due: bool
    overdue: bool
    paused: bool
    dst: bool
    waiting: bool
    held: str | None
    #: the timeline's mark of this run (`sxctl.cron.timeline.fate.run_mark`), as every view shows it
    mark: str | None
    note: str | None
    skipped_before: int


Row = InboxRow | CallbackRow | CronRow


def merged_next(session: Session | None, ws, count: int, zone, *, clock: Clock = SYSTEM_CLOCK) -> list[Row]:
    """Pending inbox messages (read at the next poll), timer fires (idle only) and cron fires,
    in one time-ordered list; every row says its source. With no session (a project without a
    session folder yet), the cron fires only."""
    now = clock.now_ms()
    rows: list[Row] = [] if session is None else _session_rows(session, count, now)
    store = read_store(ws)
    if store is not None:
        policy = read_policy(ws)
        found = job_previews(ws, store, policy, session.project if session is not None else ws.root, clock, count,
                             merged=True)
        for fire in timeline(store, now, count, zone, previews=found.previews, policy=policy):
            held: Any = fire.get("waiting")
            rows.append(CronRow(source="cron", at_ms=fire["at_ms"], name=fire["name"], jobId=fire["jobId"],
                                due=fire["due"], overdue=fire["overdue"], paused=fire["paused"], dst=fire["dst"],
                                waiting=bool(held) and held["status"] == "waiting" and "detail" not in held,
                                held=held.get("detail") if held else None, note=fire.get("note"),
                                mark=fire.get("mark"),
                                skipped_before=fire.get("skipped_before", 0)))
    order = {"inbox": 0, "callback": 1, "cron": 2}
    rows.sort(key=lambda row: (row["at_ms"], order[row["source"]]))
    return rows[:count]


def _session_rows(session: Session, count: int, now: int) -> list[Row]:
    """A session's pending messages and its timer fires."""
    rows: list[Row] = []
    for message in list_messages(session, ("pending",), count):
        rows.append(InboxRow(source="inbox", at_ms=now, stem=message.stem,
                             mode=message.message.mode if message.message else None, preview=message.preview,
                             pending_since_ms=message.mtime_ms, agent_live=session.state == "live"))
    _, doc = read_timers(session, now)
    for fire in preview_fires(doc or {}, now, count):
        slot = doc_slots(doc or {})[fire["slot"]]
        rows.append(CallbackRow(source="callback", at_ms=fire["at_ms"], slot=fire["slot"],
                                message=list_preview(slot["message"]), fire_no=fire["fire_no"],
                                remaining_after=fire["remaining_after"], overdue=fire["overdue"], idle_only=True,
                                paused=doc_paused(doc or {})))
    return rows

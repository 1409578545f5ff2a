"""Where a key's message is now, across the sessions of one project: a key identifies one
message wherever `inbox forward` (or a restart) left it, so look-ups follow the move records."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import SxctlError
from ..project import ProjectLayout, Session, as_session, is_valid_session_id, session_info
from ..record import record
from .folder import InboxDir, inbox_dirs, primary_inbox
from .keys import key_record_path, key_state, read_key_record
from .moves import moved_to

#: how far a chain of moves is followed (each forward of a message is one hop)
MAX_HOPS = 16


@record
class KeyPlace:
    """Where the message of a key record is now (after every move)."""

    session: Session
    inbox: InboxDir
    stem: str
    state: str
    record: dict[str, Any]
    forwarded_from: dict[str, str] | None = None


def _session_named(project: Path, session_id: str, source: str = "key") -> Session | None:
    """The session a record names, when its folder is a real one."""
    folder = ProjectLayout(project).sessions / session_id
    if not is_valid_session_id(session_id) or os.path.islink(folder) or not folder.is_dir():
        return None
    return as_session(session_info(folder), project, source)



def follow(session: Session, inbox: InboxDir, stem: str, state: str | None = None, record_name: str | None = None
           ) -> tuple[Session, InboxDir, str, str]:
    """Where the message `stem` of `inbox` is now: itself, or wherever its moves took it. With
    `record_name` (a key record's file name), each session's record of that key says what became
    of a message `inbox prune` removed there."""
    state = state or inbox.state_of(stem)
    for _ in range(MAX_HOPS):
        if state != "missing":
            break
        hop = moved_to(inbox.path, stem)
        if hop is None:
            break
        nxt = _session_named(session.project, hop[0])
        if nxt is None:
            break
        next_inbox = primary_inbox(nxt)
        next_state = next_inbox.state_of(hop[1])
        if next_state == "missing" and record_name is not None:
            try:
                body = read_key_record(next_inbox.keys / record_name)
            except SxctlError:
                body = None
            if body is not None and body["stem"] == hop[1]:
                next_state = key_state(next_inbox, body)
        if next_state == "missing" and not moved_to(next_inbox.path, hop[1]):
            break  # an interrupted move that has not arrived: the message is where it was
        session, inbox, stem, state = nxt, next_inbox, hop[1], next_state
    return session, inbox, stem, state


def place_of(session: Session, inbox: InboxDir, body: dict[str, Any]) -> KeyPlace:
    """Where a key record's message is: its own state, else where it was moved to, else — for a
    record a move created — where it came from while that move has not arrived."""
    state = key_state(inbox, body)
    where = follow(session, inbox, body["stem"], state, key_record_path(inbox, str(body.get("key", ""))).name
                   if isinstance(body.get("key"), str) else None)
    origin = body.get("moved_from")
    origin = origin if (isinstance(origin, dict) and isinstance(origin.get("session"), str)
                        and isinstance(origin.get("stem"), str)) else None
    if where[3] == "missing" and origin is not None:
        back = _session_named(session.project, origin["session"])
        if back is not None:
            for copy in inbox_dirs(back):
                if copy.state_of(origin["stem"]) == "pending":
                    return KeyPlace(back, copy, origin["stem"], "pending", body)
    return KeyPlace(*where, body, forwarded_from=origin)


def find_key_elsewhere(session: Session, key: str) -> KeyPlace | None:
    """The message a key was sent with in another session of the project (newest folder first),
    when it still exists: a key identifies one message across the project's sessions."""
    root = ProjectLayout(session.project).sessions
    try:
        names = [entry.name for entry in os.scandir(root)
                 if entry.name != session.id and is_valid_session_id(entry.name)
                 and entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return None
    record_name = key_record_path(InboxDir(root), key).name
    for name in sorted(names, reverse=True):
        path = root / name / "inbox" / ".keys" / record_name
        if not os.path.lexists(path):
            continue
        other = _session_named(session.project, name)
        if other is None:
            continue
        for copy in inbox_dirs(other):
            body = read_key_record(key_record_path(copy, key))
            if body is None:
                continue
            place = place_of(other, copy, body)
            if place.state != "missing":
                return place
    return None

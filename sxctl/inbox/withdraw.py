"""The retract of one inbox folder (spec inbox.md §9): the one rename that withdraws a pending
message, shared by `inbox retract` (manage.py) and expiry (lifetimes.py)."""

from __future__ import annotations

import os

from ..errors import ConflictError, ErrorCode
from ..fsio import ensure_private_dir, fsync_dir
from .folder import InboxDir


def withdraw_pending(inbox: InboxDir, stem: str) -> str:
    """The retract of one inbox folder (inbox.md §9), for `inbox retract` and for an expired
    message (inbox/lifetimes.py): `retracted`, or why not — `already` (retracted before),
    `consumed` (the agent took it first: it counts as read), `missing`."""
    inbox.refuse_symlinks(inbox.path, inbox.retracted)
    target = inbox.retracted / f"{stem}.json"
    if os.path.lexists(inbox.pending_file(stem)):
        ensure_private_dir(inbox.retracted)
        if os.path.lexists(target):
            raise ConflictError(f"{target} already exists", code=ErrorCode.NAME_TAKEN, file=target)
    try:
        os.rename(inbox.pending_file(stem), target)
    except FileNotFoundError:
        if os.path.lexists(inbox.done / f"{stem}.json"):
            return "consumed"
        return "already" if os.path.lexists(target) else "missing"
    sidecar = inbox.sidecar_of(inbox.path, stem)
    if sidecar is not None:
        try:
            os.rename(sidecar, inbox.retracted / sidecar.name)
        except FileNotFoundError:
            pass
    fsync_dir(inbox.path)
    fsync_dir(inbox.retracted)
    return "retracted"

"""Message lifetimes as use cases (docs/guides/message-lifetimes.md): the expiry and read deadline
a send asks for, a listing's rows with theirs, and `inbox expire`. Loaded by `inbox send` only for
the one call that checks its flags."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, SxctlError, UsageError
from ..inbox.message import MAX_LIFETIME_MS
from ..record import record
from ..report import Reporter
from .scope import find_project, milliseconds

if TYPE_CHECKING:
    from ..inbox.folder import MessageRow


def lifetime_of(expires: float | str | None, read_within: float | None, now_ms: int) -> dict[str, Any] | None:
    """The lifetime a send asks for (None: none): `expires` in seconds, or a DURATION or TIME
    (`2026-12-07T09:00`, read in the local zone), `read_within` in seconds; exit 2 naming the flag
    for one that has passed."""
    if expires is None and read_within is None:
        return None
    from ..timeparse import parse_duration_ms, parse_local_time_ms  # a send without them never loads it

    expires_ms = None
    if expires is not None:
        if isinstance(expires, str):
            try:
                expires_ms = now_ms + parse_duration_ms(expires, what="--expires")
            except UsageError:
                if not re.search(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|:", expires):  # meant as a DURATION: say why it is not
                    raise
                try:
                    expires_ms = parse_local_time_ms(expires, None)
                except UsageError as error:
                    raise UsageError(f"invalid --expires {expires!r}: give a DURATION (30m, 2h, 1d) or a TIME "
                                     f"(2026-12-07T09:00, with an offset or in the local zone): {error.message}"
                                     ) from None
        else:
            expires_ms = now_ms + milliseconds(expires)
        shown = expires if isinstance(expires, str) else f"{expires:g}"
        if expires_ms <= now_ms:
            raise UsageError(f"--expires {shown} is not in the future")
        if expires_ms - now_ms > MAX_LIFETIME_MS:
            raise UsageError(f"--expires {shown} is too far ahead (at most {MAX_LIFETIME_MS // 86_400_000} days)")
    read_by_ms = None
    if read_within is not None:
        if read_within <= 0:
            raise UsageError("--read-within must be longer than 0")
        if milliseconds(read_within) > MAX_LIFETIME_MS:
            raise UsageError(f"--read-within is too long (at most {MAX_LIFETIME_MS // 86_400_000} days)")
        read_by_ms = now_ms + milliseconds(read_within)
        if expires_ms is not None and read_by_ms >= expires_ms:
            raise UsageError("--read-within ends after --expires: the message is withdrawn before it could be late")
    return {"sent_ms": now_ms, "expires_ms": expires_ms, "read_by_ms": read_by_ms}


def with_lifetimes(rows: list[MessageRow]) -> list[MessageRow]:
    from ..inbox.lifetimes import annotate  # not on the path of a send

    return annotate(rows)


def state_text(row: MessageRow, now_ms: int) -> str:
    from ..inbox.lifetimes import state_words

    return state_words(row.state, row.expires_ms, row.read_by_ms, now_ms)


@record
class Expiry:
    """`inbox expire`: what the sweep of every session of the project did (or, dry, would do)."""

    project: Path
    events: list[Any]
    dry_run: bool

    def of(self, event: str) -> list[Any]:
        return [e for e in self.events if e.event == event]

    def raise_if_refused(self) -> None:
        """Exit 5 naming each session that could not be swept (the others were); the error
        carries this document."""
        refused = self.of("refused")
        if refused:
            raise SxctlError("; ".join(f"session {e.session} was not swept: {e.why}" for e in refused)
                             + " (the other sessions were)", code=ErrorCode.INVALID_DATA,
                             details={**self.to_json(), "ok": False, "refused": [e.to_json() for e in refused]})

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "project": str(self.project), "dry_run": self.dry_run,
                "expired": [e.to_json() for e in self.of("expired")],
                "missed": [e.to_json() for e in self.of("missed")],
                "settled": [e.to_json() for e in self.events if e.event in ("read", "retracted")]}


def expire_messages(
    *,
    dry_run: bool = False,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Expiry:
    """Withdraw every unread message of the project's sessions whose `--expires` passed (each with
    the inbox's retract: one the agent took meanwhile counts as read), note read deadlines that
    passed unread, and settle the lifetimes of messages that ended — what every scheduler pass
    does, for a project without one."""
    from ..inbox.expiry import sweep_project

    root = find_project(project)
    done = Expiry(root, sweep_project(root, clock.now_ms(), clock, dry_run=dry_run), dry_run)
    done.raise_if_refused()
    return done

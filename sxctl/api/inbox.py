"""Inbox use cases: send, list, show, wait, retract, clean, prune (spec inbox.md).

`inbox send` runs in shell loops: the parts of the other verbs (waiting, retracting, cleaning,
forwarding) are imported where they are used, so that a send loads only the sending code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, ErrorCode, UsageError
from ..inbox import folder
from ..inbox.folder import find_message, inbox_dirs
from ..inbox.message import MODES as MODES  # the modes a message may name (the CLI's choices)
from ..inbox.message import apply_tilde, check_key, check_stem, load_image, stem_argument
from ..inbox.request import SendRequest
from ..inbox.sending import SendResult, send
from ..project import follow_or_refuse
from ..record import Factory, record
from ..report import Reporter
from .message_lifetimes import lifetime_of, state_text, with_lifetimes
from .scope import find_project, find_session, milliseconds, reporter

if TYPE_CHECKING:
    from ..inbox.folder import InboxDir, MessageRow
    from ..inbox.wait import WaitOutcome
    from ..project import Session
    from .usage_gate import GatedSend


def send_message(
    text: str | None,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    mode: str | None = None,
    image: str | os.PathLike | None = None,
    priority: int | None = None,
    stem: str | None = None,
    key: str | None = None,
    wait: float | None = None,
    soft_wait: bool = True,
    follow: bool = False,
    expires: float | str | None = None,
    read_within: float | None = None,
    when_below: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> SendResult | GatedSend:
    """Drop a message into the session's inbox; with `wait` (seconds, 0 = forever), block until
    it is consumed (raising WaitTimeoutError, exit 6, if it is still pending then). `mode` is
    `auto`, `interrupt` or `queue`; without one, a text that starts with `~` is queued (the `~`
    and the spaces after it removed), any other is `auto` — as `sxctl inbox send TEXT` does.
    A pinned session (`session`, SXCTL_SESSION, SX_SESSION_DIR) the agent left for a newer live
    one is refused (exit 4 `session_superseded`); with `follow`, the message goes to that one
    instead, and a wait moves it on if the agent restarts meanwhile. `expires` (seconds, or a
    DURATION or TIME string): an unread message is withdrawn then (a wait ends with exit 12);
    `read_within` (seconds): a message unread by then is reported (docs/guides/message-lifetimes.md).
    `when_below` (`90%`): sent only while the agent's rate-limit use is below it, else held in a
    one-shot cron job that a pass delivers once it is: a `GatedSend` (`.held`, `.sent`, `.job`)."""
    if when_below is not None:
        given = [flag for flag, value in (("mode", mode), ("image", image), ("priority", priority), ("stem", stem),
                                          ("key", key), ("wait", wait), ("follow", follow))
                 if value not in (None, False)]
        if given:
            raise UsageError(f"--when-below cannot be combined with --{', --'.join(given)}: a held message is a cron "
                             "job's run")
        from .usage_gate import GatedSend, ceiling_of, duration_s, hold_until_below, rate_use

        ceiling = ceiling_of(when_below)
        expires_s = duration_s(expires)  # a held message's expiry counts from when it is sent
        lifetime_of(expires, read_within, clock.now_ms())  # checked as a send checks it, held or not
        report = reporter(report)
        chosen = find_session(session, project=project, clock=clock, report=report)
        figures = rate_use(chosen, report)
        if any(value is not None and value >= ceiling for value in figures.values()):
            return hold_until_below(text, ceiling, figures, chosen, expires=expires_s, read_within=read_within,
                                    clock=clock, report=report)
        sent = send_message(text, session=chosen, expires=expires, read_within=read_within, soft_wait=soft_wait,
                            clock=clock, report=report)
        assert isinstance(sent, SendResult)
        return GatedSend(ceiling, figures, sent=sent)
    if priority is not None and stem is not None:
        raise UsageError("--priority and --stem cannot be combined")
    if wait is not None and not soft_wait:
        raise UsageError("--wait and --no-wait cannot be combined")
    if mode is None:
        queued = False
        if text is not None:
            text, queued = apply_tilde(text)
        mode = "queue" if queued else "auto"
    request = SendRequest(
        text=text, mode=mode, image=load_image(Path(image)) if image is not None else None,
        stem=check_stem(stem) if stem is not None else None, priority=priority,
        key=check_key(key) if key is not None else None, wait_s=wait, no_wait=not soft_wait, follow=follow,
        lifetime=lifetime_of(expires, read_within, clock.now_ms()),
    )
    report = reporter(report)
    chosen = find_session(session, project=project, clock=clock, report=report)

    def where_the_agent_is() -> Session:
        return follow_or_refuse(chosen, "a message", follow=follow, clock=clock, report=report)

    if key is None or follow:
        return send(where_the_agent_is(), request, clock=clock, report=report)
    # a key that names a message already is a duplicate wherever the send is pinned: only a new
    # message is refused, decided under the key lock
    return send(chosen, request, clock=clock, report=report, before_new=where_the_agent_is)


@record
class MessageList:
    """`inbox list`: rows in the order the agent reads them (pending), then newest first, and the
    sessions the agent left that hold pending messages (`observe.stranded_sessions`, as status)."""

    session: Session
    states: tuple[str, ...]
    rows: list[MessageRow]
    now_ms: int = 0
    stranded: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]

    def state_text(self, row: MessageRow) -> str:
        """The row's state in words, with its expiry and read deadline."""
        return state_text(row, self.now_ms)

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.session.to_json(), "messages": [r.to_json() for r in self.rows],
                "stranded": self.stranded}


def list_messages(
    *,
    consumed: bool = False,
    retracted: bool = False,
    limit: int | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> MessageList:
    """Pending messages, plus consumed and/or retracted ones; at most `limit` rows (the newest
    consumed ones are found from their names, without reading the rest)."""
    states = ("pending",) + (("consumed",) if consumed else ()) + (("retracted",) if retracted else ())
    report = reporter(report)
    chosen = find_session(session, project=project, clock=clock, report=report)
    stranded = []
    if chosen.state == "live":  # what status and doctor call stranded is said here too, not hidden
        from ..observe import stranded_sessions

        for entry in stranded_sessions(chosen.project, clock):
            if entry.pending:
                stranded.append(entry.to_json())
                report.warn(f"{entry.pending} pending message(s) wait in session {entry.id}, which the agent left: "
                            f"`{entry.fixes()[0]}` moves them here")
    return MessageList(chosen, states, with_lifetimes(folder.list_messages(chosen, states, limit)), clock.now_ms(),
                       stranded)


@record
class MessageView:
    """`inbox show`: one message wherever it is now."""

    session: Session
    row: MessageRow
    now_ms: int = 0

    def state_text(self) -> str:
        return state_text(self.row, self.now_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, **self.session.to_json(), **self.row.to_json(), "path": str(self.row.path),
            "message": self.row.obj, "raw_bytes": self.row.raw.decode("utf-8", errors="replace"),
        }


def _stem_or_key(stem: str | None, key: str | None, session: Session) -> str:
    if (stem is None) == (key is None):
        raise UsageError("give either STEM or --key KEY")
    if stem is not None:
        return stem_argument(stem)
    assert key is not None  # exactly one of the two is given
    from ..inbox.manage import stem_for_key  # not on the path of a send

    return stem_for_key(session, check_key(key))


def show_message(
    stem: str,
    *,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> MessageView:
    """Message `stem` (pending, consumed or retracted): its text, mode, state and path."""
    chosen = find_session(session, project=project, clock=clock, report=report)
    return MessageView(chosen, with_lifetimes([find_message(chosen, stem_argument(stem))])[0], clock.now_ms())


def wait_for_message(
    stem: str | None = None,
    *,
    key: str | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    timeout: float = 60,
    follow: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
    on_event=None,
) -> WaitOutcome:
    """Wait until message `stem` (or the one sent with `key`) leaves the inbox; the outcome's
    `state` says where it went (`consumed`, or `pending` at the deadline, `retracted`, `missing`).
    Raises nothing for those: `outcome.raise_unless_consumed()` gives the CLI's exit-code errors."""
    from ..inbox.wait import wait_for  # not on the path of a send
    chosen = find_session(session, project=project, clock=clock, report=report)
    wanted = _stem_or_key(stem, key, chosen)
    dirs = inbox_dirs(chosen)
    inbox = next((d for d in dirs if d.state_of(wanted) != "missing"), dirs[0])
    return wait_for(chosen, inbox, wanted, timeout, follow=follow, clock=clock, report=report, on_event=on_event)


@record
class Retraction:
    """`inbox retract`: the message withdrawn (or found withdrawn already)."""

    session: Session
    inbox: InboxDir
    stem: str
    already: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, "stem": self.stem, "state": "retracted", "already": self.already,
            "copy": self.inbox.copy, "path": str(self.inbox.retracted / f"{self.stem}.json"),
            **self.session.to_json(),
        }


def retract_message(
    stem: str | None = None,
    *,
    key: str | None = None,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Retraction:
    """Withdraw a message the agent has not read yet (TooLateError, exit 7, if it has)."""
    from ..inbox.manage import retract  # not on the path of a send
    chosen = find_session(session, project=project, clock=clock, report=report)
    done = retract(chosen, _stem_or_key(stem, key, chosen))
    return Retraction(chosen, done.inbox, done.stem, done.already)


@record
class Removal:
    """`inbox clean` / `inbox prune`: the files removed (or, dry, that would be)."""

    session: Session
    removed: list[Path]
    dry_run: bool
    kept: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ok": True, **self.session.to_json(), "removed": [str(p) for p in self.removed],
                               "dry_run": self.dry_run}
        if self.kept is not None:
            doc["kept"] = self.kept
        return doc


def clean_inbox(
    *,
    older_than: float = 3600,
    dry_run: bool = False,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Removal:
    """Remove what crashed writers left (stray temps, orphan image sidecars) older than
    `older_than` seconds; only sxctl-pattern names are touched."""
    from ..inbox.manage import clean  # not on the path of a send
    chosen = find_session(session, project=project, clock=clock, report=report)
    return Removal(chosen, clean(chosen, milliseconds(older_than), dry_run=dry_run, clock=clock), dry_run)


def prune_inbox(
    *,
    older_than: float = 7 * 86400,
    retracted: bool = False,
    keys: bool = False,
    keep: int = 0,
    dry_run: bool = False,
    session: str | Session | None = None,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Removal:
    """Delete consumed messages consumed more than `older_than` seconds ago (never a pending one,
    never the `keep` newest), with `retracted` and `keys` their folders too."""
    from ..inbox.manage import prune  # not on the path of a send
    chosen = find_session(session, project=project, clock=clock, report=report)
    removed, kept = prune(chosen, milliseconds(older_than), retracted=retracted, keys=keys, keep=keep,
                          dry_run=dry_run, clock=clock)
    return Removal(chosen, removed, dry_run, kept)


@record
class Forwarding:
    """`inbox forward`: the messages moved (or, dry, that would be) into the target session,
    those that were not and why, and the interrupted moves it finished or undid."""

    project: Path
    plan: Any  # sxctl.inbox.ForwardPlan

    @property
    def target(self) -> Session:
        return self.plan.target

    @property
    def forwarded(self) -> list[Any]:
        return [m for m in self.plan.moves if m.outcome in ("forwarded", "would_forward")]

    @property
    def skipped(self) -> list[Any]:
        return [m for m in self.plan.moves if m.outcome not in ("forwarded", "would_forward")]

    @property
    def failed(self) -> list[Any]:
        """Messages that stay behind for a reason to act on (a stem taken in the target, a file
        that is not a regular file, another file system); consumed or retracted ones are not."""
        return [m for m in self.plan.moves if m.failed]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, "project": str(self.project), **self.target.to_json(), "state": self.target.state,
            "dry_run": self.plan.dry_run, "sources": [s.id for s in self.plan.sources],
            "forwarded": [m.to_json() for m in self.forwarded], "skipped": [m.to_json() for m in self.skipped],
            "recovered": [r.to_json() for r in self.plan.recovered],
            "stranded_timers": [{"session": sid, "active": n} for sid, n in self.plan.timers.items()],
        }

    def raise_if_incomplete(self) -> None:
        """Exit 4 (`name_taken`) when a message had to stay behind; the error carries this
        document, so a script sees what did move."""
        if not self.failed:
            return
        what = ", ".join(f"{m.stem} from {m.source} ({m.outcome.replace('_', ' ')})" for m in self.failed)
        verb = "would be forwarded (dry run: nothing moved)" if self.plan.dry_run else "forwarded"
        raise ConflictError(f"{len(self.forwarded)} message(s) {verb} to {self.target.id}; "
                            f"{len(self.failed)} {'would stay' if self.plan.dry_run else 'stayed'} behind: {what}",
                            code=ErrorCode.NAME_TAKEN,
                            details={**self.to_json(), "ok": False})


def forward_messages(
    *,
    sources: list[str] | tuple[str, ...] | None = None,
    to: str = "live",
    dry_run: bool = False,
    project: str | os.PathLike | None = None,
    clock: Clock = SYSTEM_CLOCK,
    report: Reporter | None = None,
) -> Forwarding:
    """Move the pending messages (with their images and keys, in the order the agent reads them)
    of `sources` — by default every session that is not live — into the live session (`to`, or
    a session id). With `dry_run`, only say what would move."""
    from ..inbox.forward import forward_pending  # not on the path of a send
    from ..project import check_session_id
    if to != "live":
        check_session_id(to)
    root = find_project(project)
    plan = forward_pending(root, sources=list(sources) if sources else None, to=to, dry_run=dry_run, clock=clock,
                   report=report)
    return Forwarding(root, plan)


def pending_stems(*, session: str | None = None, project: str | os.PathLike | None = None) -> list[str]:
    """The stems of the session's pending messages, for shell completion (the session chosen as
    every inbox command chooses it; its notes are dropped)."""
    chosen = find_session(session, project=project, report=Reporter())
    return [row.stem for row in folder.list_messages(chosen, ("pending",))]

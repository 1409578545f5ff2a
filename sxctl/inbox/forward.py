"""Moving pending messages between the sessions of one project (`inbox forward`, and `--follow`'s
re-homing after a rotation), and finding a key's message wherever it is in the project.

A move is one `rename` of the message file into the target inbox: the file is never copied, so
it is whole in its one place at every instant, and the rename is also the claim (as the agent's
own claim into `done/`): a message the old agent took meanwhile is not moved, and one that was
moved cannot be taken. Around that rename, each step leaves enough on disk for the next run to
finish or undo it (`recover`):

1. choose a free stem in the target and write the intent `inbox/.forwarding/<stem>.json` in the
   source: the target session, that stem and a random token;
2. reserve the stem in the target: `<stem>.json.tmp`, created only if absent (the stem's lock,
   as `inbox send` takes it) and holding the token, so a later run knows it for its own; check
   again that the stem is free;
3. give the target a key record for each key of the message (`moved_from` says where from);
4. publish the image sidecar in the target (a hard link, renamed into place after the free-stem
   check), so the message never appears without it;
5. check the stem again and rename the message into the target: the commit point;
6. fsync both folders, drop the reservation, remove the source's sidecar, and record the move
   (`inbox/.forwarded/<stem>.json`, which `inbox show`, key look-ups and `cron runs` follow),
   the intent last.

A run killed before 5 leaves the message pending in the source (the next forward undoes 2-4,
as far as the token proves them its own, then drops the intent); one killed after it leaves the
message pending in the target (the next forward finishes 6). Every move out of a session holds
its `.sxctl-forward.lock`, so a recovery never undoes a move that is still running.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from .. import faults
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConflictError, NotFoundError, SxctlError, UsageError
from ..fsio import (
    atomic_write,
    ensure_private_dir,
    fsync_dir,
    link_create,
    read_bytes_capped,
    read_data_file,
    refuse_symlink,
)
from ..project import (
    Session,
    as_session,
    is_valid_session_id,
    list_sessions,
    resolve_target_session,
    session_info,
    sessions_root,
)
from ..record import Factory, record
from ..report import Reporter
from .folder import InboxDir, inbox_dirs, message_names, primary_inbox
from .message import _SXCTL_STEM, _compact_json, check_stem, default_stem
from .sending import _key_record_path, _read_key_record, _remove_quietly, key_state

INTENTS = ".forwarding"
MOVES = ".forwarded"
LOCK_NAME = ".sxctl-forward.lock"
LOCK_WAIT_S = 5.0
#: how far a chain of moves is followed (each forward of a message is one hop)
MAX_HOPS = 16


class _StemTaken(Exception):
    """The target stem stopped being free after it was reserved."""


# --- one message ----------------------------------------------------------------------------------

@record
class Moved:
    """What happened to one pending message: `forwarded` (or `would_forward`), or why not —
    `consumed`/`retracted`/`missing` (it moved on meanwhile: nothing to do), `name_taken`,
    `not_regular`, `invalid_name` (not a stem sxctl accepts), `cross_device` (the message stays
    where it is)."""

    source: str
    copy: str
    stem: str
    outcome: str
    to_stem: str | None = None
    image: str | None = None
    keys: list[str] = Factory(list)  # type: ignore[assignment]
    path: Path | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in ("name_taken", "not_regular", "invalid_name", "cross_device")

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "copy": self.copy, "stem": self.stem, "outcome": self.outcome,
                "to_stem": self.to_stem, "image": self.image, "keys": self.keys,
                "path": str(self.path) if self.path is not None else None}


def forward_lock(session: Session):
    """The lock every move out of `session` holds (a recovery must not undo a running move)."""
    from ..locks import writer_lock

    return writer_lock(session.dir / LOCK_NAME, LOCK_WAIT_S, f"forwarding out of session {session.id}")


def key_index(inbox: InboxDir) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Every key record of `inbox` by the stem it names: one listing of `.keys/` and a read each."""
    index: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    try:
        names = sorted(os.listdir(inbox.keys))
    except (FileNotFoundError, NotADirectoryError):
        return index
    for name in names:
        if not name.endswith(".json"):
            continue
        path = inbox.keys / name
        try:
            body = _read_key_record(path)
        except SxctlError:
            continue  # not a record sxctl can use: it says nothing about any message
        if body is not None:
            index.setdefault(body["stem"], []).append((path, body))
    return index


def _keys_of(inbox: InboxDir, stem: str) -> list[tuple[Path, dict[str, Any]]]:
    return key_index(inbox).get(stem, [])


def _candidates(stem: str, bump: bool) -> list[str]:
    """`stem`, then (for sxctl's time-based stems) the same stem 1 ns later, up to 100 times, as
    `inbox send` does for a taken stem: the priority prefix and the place in time order stay."""
    if not bump or not _SXCTL_STEM.fullmatch(stem):
        return [stem]
    prefixed = stem[2] == "_"  # `0P_…`: an unprefixed stem starts with 10 digits
    seconds, nanos = (stem[3:] if prefixed else stem).split("_")
    time_ns = int(seconds) * 1_000_000_000 + int(nanos)
    return [default_stem(time_ns + n, int(stem[1]) if prefixed else None) for n in range(101)]


class _Reservation:
    """The target stem's lock, `<stem>.json.tmp`, taken as `inbox send` takes it (create only if
    absent: here an `os.link` of a complete file) and holding this move's token, so that a later
    run tells its own reservation from another writer's."""

    def __init__(self, inbox: InboxDir, stem: str, token: str) -> None:
        self.inbox, self.path, self.token = inbox, inbox.temp_file(stem), token
        self.body = f"sxctl inbox forward {token}\n".encode()

    @property
    def helper(self) -> Path:
        """The complete file linked into place; `inbox clean` removes one a crash left."""
        return self.inbox.keys / f"forward-{self.token}.tmp"

    def take(self) -> bool:
        ensure_private_dir(self.inbox.keys)
        try:
            atomic_write(self.path, self.body, temp=self.helper, no_clobber=True, durable=False)
        except FileExistsError:
            return False
        return True

    def ours(self) -> bool:
        try:
            return read_bytes_capped(self.path, len(self.body)) == self.body
        except OSError:
            return False

    def release(self) -> None:
        _remove_quietly(self.helper)
        if self.ours():
            _remove_quietly(self.path)


def _plain_stem(stem: str) -> bool:
    """A stem sxctl accepts (`--stem`'s rule): the only names it moves and records."""
    try:
        check_stem(stem)
    except UsageError:
        return False
    return True


def _regular(path: Path) -> bool | None:
    """True for a regular file, False for anything else, None when nothing is there."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def move_message(source: Session, inbox: InboxDir, stem: str, target: Session, *, bump: bool = True,
                 keys: list[tuple[Path, dict[str, Any]]] | None = None, clock: Clock = SYSTEM_CLOCK) -> Moved:
    """Move the pending message `stem` of `inbox` (a copy of `source`) into `target`'s inbox,
    with its sidecar and its keys (`keys`: its key records, when the caller indexed them). The
    caller holds `forward_lock(source)`."""
    new_inbox = primary_inbox(target)
    moved = Moved(source.id, inbox.copy, stem, "forwarded")
    if not _plain_stem(stem):
        moved.outcome = "invalid_name"
        return moved
    message = inbox.pending_file(stem)
    kind = _regular(message)
    if kind is None:
        moved.outcome = inbox.state_of(stem)
        return moved
    sidecar = inbox.sidecar_of(inbox.path, stem)
    if not kind or (sidecar is not None and not _regular(sidecar)):
        moved.outcome = "not_regular"  # the agent would not read it either; sxctl moves only files
        return moved
    inbox.refuse_symlinks(inbox.path, inbox.keys, inbox.path / INTENTS, inbox.path / MOVES)
    new_inbox.refuse_symlinks(new_inbox.path, new_inbox.keys)
    if not target.dir.is_dir():
        raise NotFoundError(f"session folder {target.dir} not found", code="session_not_found")
    ensure_private_dir(new_inbox.path)
    ensure_private_dir(inbox.path / INTENTS)
    keys = _keys_of(inbox, stem) if keys is None else keys
    moved.keys = [str(body.get("key")) for _, body in keys]
    moved.image = sidecar.suffix[1:] if sidecar is not None else None
    intent_path = inbox.path / INTENTS / f"{stem}.json"
    token = os.urandom(8).hex()
    reservation: _Reservation | None = None
    intent: dict[str, Any] = {}
    try:  # the intent names the stem before it is reserved: a reservation always has its intent
        for candidate in _candidates(stem, bump):
            if not new_inbox.stem_is_free(candidate):
                continue
            intent = {"stem": stem, "to_session": target.id, "to_stem": candidate, "token": token,
                      "image": moved.image, "created_ms": clock.now_ms()}
            atomic_write(intent_path, _compact_json(intent))
            reservation = _Reservation(new_inbox, candidate, token)
            if reservation.take() and new_inbox.stem_is_free(candidate, frozenset({reservation.path})):
                break
            reservation.release()
            reservation = None
    except BaseException:
        _undo(intent_path, reservation, None, [])
        raise
    if reservation is None:
        _remove_quietly(intent_path)
        moved.outcome = "name_taken"
        return moved
    to_stem = moved.to_stem = intent["to_stem"]
    own: set[str] = {str(reservation.path)}
    created: list[Path] = []
    published: Path | None = None

    def check_free() -> None:
        if not new_inbox.stem_is_free(to_stem, frozenset(own)):
            raise _StemTaken

    try:
        for path, body in keys:
            kept = {k: v for k, v in body.items() if k not in ("stem", "moved_from", "pruned")}
            try:
                link_create(new_inbox.keys / path.name, _compact_json(
                    {**kept, "stem": to_stem, "moved_from": {"session": source.id, "stem": stem}}))
            except FileExistsError:
                continue  # the target knows this key already: its own record stays
            created.append(new_inbox.keys / path.name)
        if sidecar is not None:
            published = _publish_sidecar(sidecar, new_inbox.path / f"{to_stem}{sidecar.suffix}", own, check_free)
            faults.hit("after-sidecar")
        faults.hit("before-rename")
        check_free()
        refuse_symlink(new_inbox.pending_file(to_stem))
        os.rename(message, new_inbox.pending_file(to_stem))  # the commit point
    except (_StemTaken, OSError) as error:
        _undo(intent_path, reservation, published, created)
        if isinstance(error, (_StemTaken, FileExistsError)):
            moved.outcome = "name_taken"  # another writer took the stem after it was checked
        elif isinstance(error, FileNotFoundError):
            moved.outcome = inbox.state_of(stem)  # the old agent took it, or it was retracted
            if moved.outcome == "pending":  # it is still there: the target went away
                raise NotFoundError(f"session folder {target.dir} vanished while forwarding {stem}",
                                    code="session_not_found") from None
        elif error.errno == errno.EXDEV:
            moved.outcome = "cross_device"
        else:
            raise
        moved.to_stem = None
        return moved
    except BaseException:
        _undo(intent_path, reservation, published, created)
        raise
    fsync_dir(new_inbox.path)
    fsync_dir(inbox.path)
    reservation.release()
    faults.hit("after-move")
    _finish(inbox, stem, intent, intent_path, clock)
    moved.path = new_inbox.pending_file(to_stem)
    return moved


def _publish_sidecar(sidecar: Path, target: Path, own: set[str], check_free) -> Path:
    """The image under its new name, complete (a hard link of the same file) and only while the
    stem is free — the way `inbox send` publishes one: a same-folder temp, then a rename."""
    temp = Path(f"{target}.tmp")
    os.link(sidecar, temp, follow_symlinks=False)
    own.add(str(temp))
    try:
        check_free()
        refuse_symlink(target)
        os.replace(temp, target)
    except BaseException:
        _remove_quietly(temp)
        raise
    own.add(str(target))
    return target


def _undo(intent_path: Path, reservation: _Reservation | None, published: Path | None,
          created: list[Path]) -> None:
    """Take back what a move that did not happen made, in the reverse order: the key records and
    the image while the reservation still says nobody else can have published under the stem,
    then the reservation, the intent last."""
    for path in created:
        _remove_quietly(path)
    _remove_quietly(published)
    if reservation is not None:
        reservation.release()
    _remove_quietly(intent_path)


def _finish(inbox: InboxDir, stem: str, intent: dict[str, Any], intent_path: Path, clock: Clock) -> None:
    """Step 6 after the rename: the source's sidecar goes (an orphan now), the move is recorded
    for look-ups, and the intent is removed last."""
    if inbox.state_of(stem) == "missing":
        sidecar = inbox.sidecar_of(inbox.path, stem)
        if sidecar is not None and _regular(sidecar):
            _remove_quietly(sidecar)
    ensure_private_dir(inbox.path / MOVES)
    atomic_write(inbox.path / MOVES / f"{stem}.json",
                 _compact_json({**intent, "moved_ms": clock.now_ms()}))
    _remove_quietly(intent_path)


# --- recovery of interrupted moves ----------------------------------------------------------------

@record
class Recovered:
    source: str
    stem: str
    to_session: str
    to_stem: str
    outcome: str  # completed | undone

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "stem": self.stem, "to_session": self.to_session,
                "to_stem": self.to_stem, "outcome": self.outcome}


def _read_intent(path: Path) -> dict[str, Any] | None:
    """An intent or move record sxctl wrote, or None when it is not one (never acted on)."""
    from .. import jsondata

    try:
        raw = read_data_file(path, 65_536)
    except SxctlError:
        return None
    if raw is None:
        return None
    try:
        body = jsondata.loads(raw)
    except jsondata.JSONDataError:
        return None
    if not (isinstance(body, dict) and isinstance(body.get("stem"), str) and isinstance(body.get("to_stem"), str)
            and isinstance(body.get("to_session"), str) and is_valid_session_id(body["to_session"])):
        return None
    return body if _plain_stem(body["to_stem"]) else None


def interrupted(inbox: InboxDir) -> list[str]:
    """Stems whose move out of `inbox` was interrupted (an intent is left)."""
    return sorted(name[:-5] for name in message_names(inbox.path / INTENTS))


def recover(source: Session, *, dry_run: bool = False) -> list[Recovered]:
    """Finish (the message reached the target) or undo (it did not) every interrupted move out
    of `source`. The caller holds `forward_lock(source)` unless `dry_run`."""
    done: list[Recovered] = []
    for inbox in inbox_dirs(source):
        inbox.refuse_symlinks(inbox.path, inbox.path / INTENTS, inbox.path / MOVES)
        if not dry_run:
            _remove_dead_temps(inbox)
        for stem in interrupted(inbox):
            intent_path = inbox.path / INTENTS / f"{stem}.json"
            intent = _read_intent(intent_path)
            if intent is None or intent["stem"] != stem:
                continue  # not ours to act on; `inbox list` never shows it
            target_dir = sessions_root(source.project) / intent["to_session"]
            target = as_session(session_info(target_dir), source.project, "flag") if target_dir.is_dir() else None
            new_inbox = primary_inbox(target) if target is not None else None
            if new_inbox is not None:
                new_inbox.refuse_symlinks(new_inbox.path, new_inbox.keys)
            to_stem = intent["to_stem"]
            arrived = new_inbox is not None and new_inbox.state_of(to_stem) != "missing"
            outcome = "completed" if arrived and inbox.state_of(stem) == "missing" else "undone"
            done.append(Recovered(source.id, stem, intent["to_session"], to_stem, outcome))
            if dry_run:
                continue
            token = intent.get("token")
            reservation = (_Reservation(new_inbox, to_stem, token) if new_inbox is not None and isinstance(token, str)
                           and re.fullmatch(r"[0-9a-f]{16}", token) else None)
            if outcome == "completed":
                if reservation is not None:
                    reservation.release()
                _finish(inbox, stem, intent, intent_path, SYSTEM_CLOCK)
                continue
            if new_inbox is None or arrived:  # the target is gone, or holds a message we did not move
                _remove_quietly(intent_path)
                continue
            # the move did not happen: the key records it gave the target go; its image and its
            # reservation too, while the reservation proves nobody else could publish there
            created = [path for path, body in _keys_of(new_inbox, to_stem)
                       if body.get("moved_from") == {"session": source.id, "stem": stem} and "pruned" not in body]
            ours = reservation is not None and reservation.ours()
            _undo(intent_path, reservation if ours else None,
                  new_inbox.sidecar_of(new_inbox.path, to_stem) if ours else None, created)
            if reservation is not None:
                _remove_quietly(reservation.helper)
    return done


def _remove_dead_temps(inbox: InboxDir) -> None:
    """Temps in the intent and move folders belong to a dead writer: every writer there holds the
    session's forward lock, which the caller holds now."""
    for folder in (inbox.path / INTENTS, inbox.path / MOVES):
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False):
                _remove_quietly(Path(entry.path))


# --- where a key's message is, across the project -------------------------------------------------

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
    folder = sessions_root(project) / session_id
    if not is_valid_session_id(session_id) or os.path.islink(folder) or not folder.is_dir():
        return None
    return as_session(session_info(folder), project, source)


def moved_to(inbox: InboxDir, stem: str, *, moving: bool = True) -> tuple[str, str] | None:
    """(session id, stem) a message of `inbox` was forwarded to (with `moving`, also one it is
    being forwarded to, or whose move was interrupted), from its record."""
    for folder in (MOVES, INTENTS) if moving else (MOVES,):
        body = _read_intent(inbox.path / folder / f"{stem}.json")
        if body is not None and body["stem"] == stem:
            return body["to_session"], body["to_stem"]
    return None


def follow(session: Session, inbox: InboxDir, stem: str, state: str | None = None, record_name: str | None = None
           ) -> tuple[Session, InboxDir, str, str]:
    """Where the message `stem` of `inbox` is now: itself, or wherever its moves took it. With
    `record_name` (a key record's file name), each session's record of that key says what became
    of a message `inbox prune` removed there."""
    state = state or inbox.state_of(stem)
    for _ in range(MAX_HOPS):
        if state != "missing":
            break
        hop = moved_to(inbox, stem)
        if hop is None:
            break
        nxt = _session_named(session.project, hop[0])
        if nxt is None:
            break
        next_inbox = primary_inbox(nxt)
        next_state = next_inbox.state_of(hop[1])
        if next_state == "missing" and record_name is not None:
            try:
                body = _read_key_record(next_inbox.keys / record_name)
            except SxctlError:
                body = None
            if body is not None and body["stem"] == hop[1]:
                next_state = key_state(next_inbox, body)
        if next_state == "missing" and not moved_to(next_inbox, hop[1]):
            break  # an interrupted move that has not arrived: the message is where it was
        session, inbox, stem, state = nxt, next_inbox, hop[1], next_state
    return session, inbox, stem, state


def place_of(session: Session, inbox: InboxDir, body: dict[str, Any]) -> KeyPlace:
    """Where a key record's message is: its own state, else where it was moved to, else — for a
    record a move created — where it came from while that move has not arrived."""
    state = key_state(inbox, body)
    where = follow(session, inbox, body["stem"], state, _key_record_path(inbox, str(body.get("key", ""))).name
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
    root = sessions_root(session.project)
    try:
        names = [entry.name for entry in os.scandir(root)
                 if entry.name != session.id and is_valid_session_id(entry.name)
                 and entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return None
    record_name = _key_record_path(InboxDir(root), key).name
    for name in sorted(names, reverse=True):
        path = root / name / "inbox" / ".keys" / record_name
        if not os.path.lexists(path):
            continue
        other = _session_named(session.project, name)
        if other is None:
            continue
        for copy in inbox_dirs(other):
            body = _read_key_record(_key_record_path(copy, key))
            if body is None:
                continue
            place = place_of(other, copy, body)
            if place.state != "missing":
                return place
    return None


# --- the command: every stranded message into the live session -------------------------------------

def forward_target(project: Path, to: str, clock: Clock) -> Session:
    """`live` = the freshest live session now (exit 3 when none); anything else = that session."""
    try:
        return resolve_target_session(project, to, clock=clock)
    except NotFoundError as error:
        if to != "live":
            raise
        raise NotFoundError(f"{error.message}: nothing to forward to; start the agent, or name a session "
                            "with --to SESSION", code="session_not_found") from None


def pick_sources(project: Path, target: Session, explicit: list[str] | None, clock: Clock,
                 has_something) -> list[Session]:
    """The sessions to move out of: those named (each must exist, must not be the target and must
    not be live), else every session of the project other than the target that is not live and
    for which `has_something(session)` holds."""
    if explicit:
        chosen = []
        for session_id in dict.fromkeys(explicit):
            source = resolve_target_session(project, session_id, clock=clock)
            if source.id == target.id:
                raise UsageError(f"--from {session_id} is the session to forward to")
            if source.state == "live":
                raise ConflictError(f"session {source.id} is live: its agent reads its own inbox and timers; "
                                    "move only out of a session no agent runs in", code="agent_owns_session")
            chosen.append(source)
        return chosen
    return [session for info in list_sessions(project, clock)
            if info.id != target.id and info.state != "live"
            and has_something(session := as_session(info, project, "flag"))]


def has_pending(session: Session) -> bool:
    """Pending messages, or a move out of it that was interrupted."""
    return any(message_names(inbox.path) or message_names(inbox.path / INTENTS) for inbox in inbox_dirs(session))


@record
class ForwardPlan:
    """What `inbox forward` did (or, dry, would do)."""

    target: Session
    sources: list[Session]
    moves: list[Moved]
    recovered: list[Recovered]
    dry_run: bool
    timers: dict[str, int] = Factory(dict)  # type: ignore[assignment]


def forward_pending(project: Path, *, sources: list[str] | None = None, to: str = "live", dry_run: bool = False,
            clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None) -> ForwardPlan:
    """Move every pending message of the source sessions into the target, in the order the agent
    reads them (byte order of names, across every source), one message at a time."""
    import contextlib

    report = report or Reporter()
    target = forward_target(project, to, clock)
    if target.state != "live":
        report.warn(f"session {target.id} is {target.state}: no agent reads the forwarded messages until one "
                    "runs there")
    chosen = pick_sources(project, target, sources, clock, has_pending)
    plan = ForwardPlan(target, chosen, [], [], dry_run)
    with contextlib.ExitStack() as locks:
        if not dry_run:
            for source in sorted(chosen, key=lambda s: s.id):
                locks.enter_context(forward_lock(source))
        for source in chosen:
            plan.recovered += recover(source, dry_run=dry_run)
        queue = sorted(((os.fsencode(name), source, inbox) for source in chosen for inbox in inbox_dirs(source)
                        for name in message_names(inbox.path)), key=lambda entry: entry[0])
        indexes: dict[Path, dict[str, list[tuple[Path, dict[str, Any]]]]] = {}
        for encoded, source, inbox in queue:
            name = os.fsdecode(encoded)
            stem = name[: -len(".json")]
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                plan.moves.append(Moved(source.id, inbox.copy, stem.encode("utf-8", "surrogateescape").decode(
                    "utf-8", "backslashreplace"), "invalid_name"))
                continue
            if inbox.path not in indexes:  # after the listing: a record is written before its message
                indexes[inbox.path] = key_index(inbox)
            keys = indexes[inbox.path].get(stem, [])
            if dry_run:
                plan.moves.append(_would_move(source, inbox, stem, target, keys))
            else:
                plan.moves.append(move_message(source, inbox, stem, target, clock=clock, keys=keys))
    from ..callbacks import view_table

    for source in chosen:
        try:
            table = view_table(source).winner
        except SxctlError:
            continue
        active = len(table.active_slots()) if table is not None else 0
        if active:
            plan.timers[source.id] = active
    return plan


def _would_move(source: Session, inbox: InboxDir, stem: str, target: Session,
                keys: list[tuple[Path, dict[str, Any]]]) -> Moved:
    """What `move_message` would do now, found without writing anything."""
    if not _plain_stem(stem):
        return Moved(source.id, inbox.copy, stem, "invalid_name")
    kind = _regular(inbox.pending_file(stem))
    sidecar = inbox.sidecar_of(inbox.path, stem)
    moved = Moved(source.id, inbox.copy, stem, "would_forward", image=sidecar.suffix[1:] if sidecar else None,
                  keys=[str(body.get("key")) for _, body in keys])
    if kind is None:
        moved.outcome = inbox.state_of(stem)
    elif not kind or (sidecar is not None and not _regular(sidecar)):
        moved.outcome = "not_regular"
    else:
        new_inbox = primary_inbox(target)
        free = next((c for c in _candidates(stem, True) if new_inbox.stem_is_free(c)), None)
        if free is None:
            moved.outcome = "name_taken"
        else:
            moved.to_stem, moved.path = free, new_inbox.pending_file(free)
    return moved


"""Moving one pending message between the sessions of one project (for `inbox forward`, and
`--follow`'s re-homing after a rotation), and recovering moves a killed run left half done.

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
3. give the target a key record for each key of the message and its lifetime record (`moved_from`);
4. publish the image sidecar in the target (a hard link, renamed into place after the free-stem
   check), so the message never appears without it;
5. check the stem again and rename the message into the target: the commit point;
6. fsync both folders, drop the reservation, remove the source's sidecar, and record the move
   (`inbox/.forwarded/<stem>.json`, which `inbox show`, key look-ups and `cron runs` follow),
   the intent last.

A run killed before 5 leaves the message pending in the source (the recovery undoes 2-4, as
far as the token proves them its own, then drops the intent); one killed after it leaves the
message pending in the target (the recovery finishes 6). `inbox forward` recovers every
interrupted move of a source first, and every other move of a message (`--follow`'s re-home)
recovers that message's own first: a move never overwrites or drops an intent it did not write,
so the key records always name the message where it is. Every move out of a session holds its
`.sxctl-forward.lock`, so a recovery never undoes a move that is still running.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import stat
from pathlib import Path
from typing import Any

from .. import faults
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, NotFoundError
from ..fsio import (
    atomic_write,
    ensure_private_dir,
    fsync_dir,
    link_create,
    read_bytes_capped,
    refuse_symlink,
    refuse_symlinks_below,
    remove_quietly,
)
from ..jsondata import compact_json
from ..locks import writer_lock
from ..project import ProjectLayout, Session, as_session, session_info
from ..record import Factory, record
from .folder import InboxDir, inbox_dirs, message_names, primary_inbox
from .keys import key_index
from .lifetimes import carried, carry, expire_before_move, forget_moved
from .message import TIME_STEM, default_stem, is_plain_stem
from .moves import INTENTS, MOVES, read_intent
from .publishing import StemTaken

LOCK_NAME = ".sxctl-forward.lock"
LOCK_WAIT_S = 5.0


# --- one message ----------------------------------------------------------------------------------

@record
class Moved:
    """What happened to one pending message: `forwarded` (or `would_forward`), or why not — `consumed`/
    `retracted`/`missing` (it moved on meanwhile), `expired` (withdrawn: its --expires passed), `name_taken`,
    `not_regular`, `invalid_name`, `cross_device` (the message stays where it is)."""

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
        return self.outcome in ("name_taken", "not_regular", "invalid_name", "cross_device", "invalid_lifetime")

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "copy": self.copy, "stem": self.stem, "outcome": self.outcome,
                "to_stem": self.to_stem, "image": self.image, "keys": self.keys,
                "path": str(self.path) if self.path is not None else None}


def forward_lock(session: Session):
    """The lock every move out of `session` holds (a recovery must not undo a running move)."""
    refuse_symlinks_below(session.project, session.dir)  # the lock file is made there: never through a link
    return writer_lock(session.dir / LOCK_NAME, LOCK_WAIT_S, f"forwarding out of session {session.id}")


def candidates(stem: str, bump: bool) -> list[str]:
    """`stem`, then (for sxctl's time-based stems) the same stem 1 ns later, up to 100 times, as
    `inbox send` does for a taken stem: the priority prefix and the place in time order stay."""
    if not bump or not TIME_STEM.fullmatch(stem):
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
        remove_quietly(self.helper)
        if self.ours():
            remove_quietly(self.path)


def is_regular(path: Path) -> bool | None:
    """True for a regular file, False for anything else, None when nothing is there."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def move_message(source: Session, inbox: InboxDir, stem: str, target: Session, *, bump: bool = True,
                 keys: list[tuple[Path, dict[str, Any]]] | None = None, clock: Clock = SYSTEM_CLOCK) -> Moved:
    """Move the pending message `stem` of `inbox` (a copy of `source`) into `target`'s inbox, with its
    sidecar, keys (`keys`: its records, if indexed) and lifetime. The caller holds `forward_lock(source)`."""
    new_inbox = primary_inbox(target)
    moved = Moved(source.id, inbox.copy, stem, "forwarded")
    if not is_plain_stem(stem):
        moved.outcome = "invalid_name"
        return moved
    inbox.refuse_symlinks(inbox.path, inbox.path / INTENTS)
    if os.path.lexists(inbox.path / INTENTS / f"{stem}.json"):  # a move of it was killed: its intent
        _recover_one(source, inbox, stem)  # is finished or undone first, never overwritten or dropped
    message = inbox.pending_file(stem)
    kind = is_regular(message)
    if kind is None:
        moved.outcome = inbox.state_of(stem)
        return moved
    sidecar = inbox.sidecar_of(inbox.path, stem)
    if not kind or (sidecar is not None and not is_regular(sidecar)):
        moved.outcome = "not_regular"  # the agent would not read it either; sxctl moves only files
        return moved
    inbox.refuse_symlinks(inbox.path, inbox.keys, inbox.path / INTENTS, inbox.path / MOVES, inbox.lifetimes)
    if (ended := expire_before_move(inbox, stem, clock.now_ms())) is not None:  # expired: withdrawn, never
        moved.outcome = ended  # delivered late (or taken meanwhile)
        return moved
    new_inbox.refuse_symlinks(new_inbox.path, new_inbox.keys, new_inbox.lifetimes)
    if not target.dir.is_dir():
        raise NotFoundError(f"session folder {target.dir} not found", code=ErrorCode.SESSION_NOT_FOUND)
    ensure_private_dir(new_inbox.path)
    ensure_private_dir(inbox.path / INTENTS)
    keys = key_index(inbox).get(stem, []) if keys is None else keys
    moved.keys = [str(body.get("key")) for _, body in keys]
    moved.image = sidecar.suffix[1:] if sidecar is not None else None
    intent_path = inbox.path / INTENTS / f"{stem}.json"
    token = os.urandom(8).hex()
    reservation: _Reservation | None = None
    intent: dict[str, Any] = {}
    try:  # the intent names the stem before it is reserved: a reservation always has its intent
        for candidate in candidates(stem, bump):
            if not new_inbox.stem_is_free(candidate):
                continue
            intent = {"stem": stem, "to_session": target.id, "to_stem": candidate, "token": token,
                      "image": moved.image, "created_ms": clock.now_ms()}
            atomic_write(intent_path, compact_json(intent))
            reservation = _Reservation(new_inbox, candidate, token)
            if reservation.take() and new_inbox.stem_is_free(candidate, frozenset({reservation.path})):
                break
            reservation.release()
            reservation = None
    except BaseException:
        _undo(intent_path, reservation, None, [])
        raise
    if reservation is None:
        if intent:  # ours: the last candidate's, taken by another writer meanwhile
            remove_quietly(intent_path)
        moved.outcome = "name_taken"
        return moved
    to_stem = moved.to_stem = intent["to_stem"]
    own: set[str] = {str(reservation.path)}
    created: list[Path] = []
    published: Path | None = None

    def check_free() -> None:
        if not new_inbox.stem_is_free(to_stem, frozenset(own)):
            raise StemTaken

    try:
        for path, body in keys:
            kept = {k: v for k, v in body.items() if k not in ("stem", "moved_from", "pruned")}
            try:
                link_create(new_inbox.keys / path.name, compact_json(
                    {**kept, "stem": to_stem, "moved_from": {"session": source.id, "stem": stem}}))
            except FileExistsError:
                continue  # the target knows this key already: its own record stays
            created.append(new_inbox.keys / path.name)
        created += carry(inbox, stem, new_inbox, to_stem, source.id)  # its expiry and read deadline
        if sidecar is not None:
            published = _publish_sidecar(sidecar, new_inbox.path / f"{to_stem}{sidecar.suffix}", own, check_free)
            faults.hit("after-sidecar")
        faults.hit("before-rename")
        check_free()
        refuse_symlink(new_inbox.pending_file(to_stem))
        os.rename(message, new_inbox.pending_file(to_stem))  # the commit point
    except (StemTaken, OSError) as error:
        _undo(intent_path, reservation, published, created)
        if isinstance(error, (StemTaken, FileExistsError)):
            moved.outcome = "name_taken"  # another writer took the stem after it was checked
        elif isinstance(error, FileNotFoundError):
            moved.outcome = inbox.state_of(stem)  # the old agent took it, or it was retracted
            if moved.outcome == "pending":  # it is still there: the target went away
                raise NotFoundError(f"session folder {target.dir} vanished while forwarding {stem}",
                                    code=ErrorCode.SESSION_NOT_FOUND) from None
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
    faults.hit("sidecar-linked")  # killed here: the next move of the message (a forward, a re-home)
    # first undoes this one, the temp included
    try:
        check_free()
        refuse_symlink(target)
        os.replace(temp, target)
    except BaseException:
        remove_quietly(temp)
        raise
    own.add(str(target))
    return target


def _undo(intent_path: Path, reservation: _Reservation | None, published: Path | None, created: list[Path]) -> None:
    """Take back what a move that did not happen made, in the reverse order: the key records and
    the image while the reservation still says nobody else can have published under the stem,
    then the reservation, the intent last."""
    for path in created:
        remove_quietly(path)
    remove_quietly(published)
    if reservation is not None:
        reservation.release()
    remove_quietly(intent_path)


def _finish(inbox: InboxDir, stem: str, intent: dict[str, Any], intent_path: Path, clock: Clock) -> None:
    """Step 6 after the rename: the source's sidecar goes (an orphan now), the move is recorded
    for look-ups, and the intent is removed last."""
    sidecar = inbox.sidecar_of(inbox.path, stem) if inbox.state_of(stem) == "missing" else None
    if sidecar is not None and is_regular(sidecar):
        remove_quietly(sidecar)
    ensure_private_dir(inbox.path / MOVES)
    atomic_write(inbox.path / MOVES / f"{stem}.json",
                 compact_json({**intent, "moved_ms": clock.now_ms()}))
    forget_moved(inbox, stem)
    remove_quietly(intent_path)


# --- recovery of interrupted moves ----------------------------------------------------------------

@record
class Recovered:
    """One interrupted move `recover` finished or undid."""

    source: str
    stem: str
    to_session: str
    to_stem: str
    outcome: str  # completed | undone

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "stem": self.stem, "to_session": self.to_session,
                "to_stem": self.to_stem, "outcome": self.outcome}


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
            found = _recover_one(source, inbox, stem, dry_run=dry_run)
            if found is not None:
                done.append(found)
    return done


def _recover_one(source: Session, inbox: InboxDir, stem: str, *, dry_run: bool = False) -> Recovered | None:
    """Finish or undo the interrupted move of `stem` out of `inbox`, if its intent is one sxctl wrote
    (None otherwise: nothing is acted on). The caller holds `forward_lock(source)` unless `dry_run`."""
    intent_path = inbox.path / INTENTS / f"{stem}.json"
    intent = read_intent(intent_path)
    if intent is None or intent["stem"] != stem:
        return None  # not ours to act on; `inbox list` never shows it
    target_dir = ProjectLayout(source.project).sessions / intent["to_session"]
    target = as_session(session_info(target_dir), source.project, "flag") if target_dir.is_dir() else None
    new_inbox = primary_inbox(target) if target is not None else None
    if new_inbox is not None:
        new_inbox.refuse_symlinks(new_inbox.path, new_inbox.keys)
    to_stem = intent["to_stem"]
    arrived = new_inbox is not None and new_inbox.state_of(to_stem) != "missing"
    outcome = "completed" if arrived and inbox.state_of(stem) == "missing" else "undone"
    found = Recovered(source.id, stem, intent["to_session"], to_stem, outcome)
    if dry_run:
        return found
    token = intent.get("token")
    reservation = (_Reservation(new_inbox, to_stem, token) if new_inbox is not None and isinstance(token, str)
                   and re.fullmatch(r"[0-9a-f]{16}", token) else None)
    if outcome == "completed":
        if reservation is not None:
            reservation.release()
        _finish(inbox, stem, intent, intent_path, SYSTEM_CLOCK)
        return found
    if new_inbox is None or arrived:  # the target is gone, or holds a message we did not move
        remove_quietly(intent_path)
        return found
    # the move did not happen: the key records it gave the target go; its image and its
    # reservation too, while the reservation proves nobody else could publish there
    created = [path for path, body in key_index(new_inbox).get(to_stem, [])
               if body.get("moved_from") == {"session": source.id, "stem": stem} and "pruned" not in body]
    created += carried(new_inbox, to_stem, source.id, stem)
    ours = reservation is not None and reservation.ours()
    if ours:  # an image the move had linked but not yet renamed into place (`<stem>.png.tmp`)
        created += [path for path in new_inbox.path.glob(f"{glob.escape(to_stem)}.*.tmp")
                    if path.name != f"{to_stem}.json.tmp" and path.is_file() and not path.is_symlink()]
    _undo(intent_path, reservation if ours else None,
          new_inbox.sidecar_of(new_inbox.path, to_stem) if ours else None, created)
    if reservation is not None:
        remove_quietly(reservation.helper)
    return found


def _remove_dead_temps(inbox: InboxDir) -> None:
    """Temps in the intent and move folders are a dead writer's: every writer there holds the forward lock."""
    for folder in (inbox.path / INTENTS, inbox.path / MOVES):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in list(os.scandir(folder)):
                if entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False):
                    remove_quietly(Path(entry.path))


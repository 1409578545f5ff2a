"""The reference agent's intake (spec reference-agent.md §2.2): it claims the first pending inbox
message by name order — a rename into `done/`, which a retract cannot race past — and reads it
the way SCORPIOX CODE does, skipping what is invalid."""

from __future__ import annotations

import os
from pathlib import Path

from ..fsio import open_regular, read_bytes_capped
from ..inbox.folder import is_message_name
from ..inbox.message import IMAGE_EXTS, MAX_IMAGE_BYTES, MAX_MESSAGE_BYTES, InboxMessage, image_type_ok
from ..record import record
from .parts import Announce


@record
class Delivery:
    """One claimed message, read: what the turn runner gets."""

    stem: str
    mode: str
    text: str
    image: Path | None


class Intake:
    """The session's inbox folder, as the agent consumes it."""

    def __init__(self, inbox: Path, emit: Announce) -> None:
        self.inbox, self.emit = inbox, emit

    def has_pending(self) -> bool:
        return any(is_message_name(name) for name in os.listdir(self.inbox))

    def take(self) -> Delivery | None:
        """Claim and read the first pending message; None when there is none to deliver."""
        try:
            # a message by the one rule; the agent claims only regular files (a FIFO or a link
            # there stays pending, listed as invalid by `inbox list`)
            names = sorted((e.name for e in os.scandir(self.inbox)
                            if is_message_name(e.name) and e.is_file(follow_symlinks=False)), key=os.fsencode)
        except FileNotFoundError:
            return None
        if not names:
            return None
        name = names[0]
        stem = name[: -len(".json")]
        done = self.inbox / "done"
        try:
            os.rename(self.inbox / name, done / name)  # the claim: retract cannot race past this
        except FileNotFoundError:
            return None
        image = None
        for ext in IMAGE_EXTS:
            try:
                os.rename(self.inbox / f"{stem}.{ext}", done / f"{stem}.{ext}")
                image = image or done / f"{stem}.{ext}"
            except FileNotFoundError:
                pass
        text, mode, reason = _read_claimed(done / name, image)
        if reason is not None:
            self.emit("inbox", stem=stem, mode=mode, action="invalid", reason=reason)
            return None
        if image is not None and not _image_ok(image):
            self.emit("warning", message=f"[Inbox] dropped image {image.name}: too large or not a valid image")
            image = None
        return Delivery(stem, mode, text or "", image)


def _read_claimed(path: Path, image: Path | None) -> tuple[str | None, str, str | None]:
    """(text, mode, why it is invalid) of a claimed message."""
    try:
        raw = read_bytes_capped(path, MAX_MESSAGE_BYTES)
    except OSError as error:
        return None, "auto", f"unreadable ({error.strerror})"
    if not raw or len(raw) > MAX_MESSAGE_BYTES:
        return None, "auto", "empty or larger than 64000 bytes"
    message, _, invalid = InboxMessage.parse(raw)
    if invalid or message is None:
        return None, "auto", invalid or "invalid"
    if message.text is None and image is None:
        return None, message.mode, "no text and no image"
    return message.text, message.mode, None


def _image_ok(path: Path) -> bool:
    try:
        if path.stat().st_size > MAX_IMAGE_BYTES:
            return False
        with os.fdopen(open_regular(path), "rb") as handle:
            head = handle.read(16)
    except OSError:
        return False
    return image_type_ok(path.suffix[1:], head)

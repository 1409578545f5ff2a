"""What `inbox send` is asked to do: the message (checked and encoded at once) and how to send it.

A module of its own so that the send step (`sending`) and the key step (`keyed`) both read the
request without importing each other.
"""

from __future__ import annotations

from ..record import NoInit, record
from .message import Image, build_message


@record
class SendRequest:
    """Everything `inbox send` needs besides the session."""

    text: str | None
    mode: str = "auto"
    image: Image | None = None
    stem: str | None = None
    priority: int | None = None
    key: str | None = None
    wait_s: float | None = None  # hard wait; None = soft wait (or none with no_wait)
    no_wait: bool = False
    follow: bool = False
    #: when it expires and should be read by, for its record (inbox/lifetimes.py; None: neither)
    lifetime: dict | None = None
    data: bytes = NoInit()  # type: ignore[assignment]

    def __post_init__(self) -> None:
        """Build and check the message bytes at once, before any session is looked up."""
        self.data = build_message(self.text, self.mode, self.image)

    @property
    def content_sha256(self) -> str:
        """What a key record remembers."""
        import hashlib  # only keyed sends hash: an unkeyed send in a loop never loads hashlib

        return hashlib.sha256(self.data + (self.image.data if self.image else b"")).hexdigest()

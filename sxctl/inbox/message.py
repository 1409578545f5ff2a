"""Message files and stems (spec inbox.md §1-3): the bytes of a message, image sidecars, the
names a stem may take and idempotency keys. The leaf of the inbox package: it knows no folder
(`folder`) and publishes nothing (`publishing`), so every other inbox module can import it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import NotFoundError, UsageError
from ..fsio import read_bytes_capped
from ..record import record

try:  # the C encoder `json` itself uses, without loading the json package: a send writes one string
    from _json import encode_basestring
except ImportError:  # not CPython
    from json.encoder import py_encode_basestring as encode_basestring

MODES = ("auto", "interrupt", "queue")
MAX_MESSAGE_BYTES = 64_000
MAX_IMAGE_BYTES = 8_000_000
IMAGE_EXTS = ("png", "jpg", "jpeg", "gif", "webp")
SOFT_WAIT_S = 2.0
POLL_S = 0.1
KEY_TEMP_WAIT_S = 5.0
#: the longest `--expires` / `--read-within` (ten years): every time a lifetime record keeps stays a
#: time its readers take (inbox/lifetimes.py)
MAX_LIFETIME_MS = 3650 * 86_400_000
PREVIEW_CHARS = 60

_USER_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: a stem sxctl makes (`default_stem`), with or without its priority prefix
TIME_STEM = re.compile(r"(0[0-9]_)?[0-9]{10,}_[0-9]{9}")
_FORBIDDEN_STEM_ENDINGS = (".tmp", ".json", *(f".{ext}" for ext in IMAGE_EXTS))


# --- message model -----------------------------------------------------------------------------

def _json_string(text: str) -> str:
    """One JSON string exactly as `json.dumps(text, ensure_ascii=False)` writes it, without
    importing the json package (a send need not pay for it at start-up)."""
    return encode_basestring(text)


@record
class InboxMessage:
    """One message file: `{"text":…,"mode":…}` (text omitted for an image-only message)."""

    text: str | None
    mode: str = "auto"

    def encode(self) -> bytes:
        """Compact UTF-8 JSON with a trailing newline; `mode` always written (inbox.md §1)."""
        text = "" if self.text is None else f'"text":{_json_string(self.text)},'
        return f'{{{text}"mode":{_json_string(self.mode)}}}\n'.encode()

    @classmethod
    def parse(cls, raw: bytes) -> tuple[InboxMessage | None, dict[str, Any] | None, str | None]:
        """(message, parsed object, reason-if-invalid) the way the agent would read it."""
        if not raw.strip():
            return None, None, "empty file"
        if len(raw) > MAX_MESSAGE_BYTES:
            return None, None, f"larger than {MAX_MESSAGE_BYTES} bytes"
        from .. import jsondata  # only readers parse messages: a send never loads the JSON reader

        try:
            obj = jsondata.loads(raw)
        except jsondata.JSONDataError as exc:
            return None, None, str(exc)
        if not isinstance(obj, dict):
            return None, None, "not a JSON object"
        text = obj.get("text")
        if not isinstance(text, str):
            text = obj.get("content") if isinstance(obj.get("content"), str) else None
        mode = obj.get("mode")
        return cls(text, mode if mode in MODES else "auto"), obj, None


@record
class Image:
    """An image sidecar to send beside a message: its extension and its bytes."""

    ext: str
    data: bytes


_MAGIC: dict[str, Callable[[bytes], bool]] = {
    "png": lambda b: b.startswith(b"\x89PNG\r\n\x1a\n"),
    "jpg": lambda b: b.startswith(b"\xff\xd8\xff"),
    "jpeg": lambda b: b.startswith(b"\xff\xd8\xff"),
    "gif": lambda b: b[:6] in (b"GIF87a", b"GIF89a"),
    "webp": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP",
}


def image_type_ok(ext: str, head: bytes) -> bool:
    """Do the first bytes match the type the extension claims (png, jpg/jpeg, gif, webp)?"""
    check = _MAGIC.get(ext.lower())
    return bool(check and check(head))


def load_image(path: Path) -> Image:
    """An image sidecar from a user file: known extension, matching magic bytes, ≤ 8,000,000."""
    ext = path.suffix.lower().lstrip(".")
    if ext not in _MAGIC:
        raise UsageError(
            f"image {path}: unsupported type {path.suffix or '(none)'!r}; use png, jpg, jpeg, gif or webp"
        )
    try:
        data = read_bytes_capped(path, MAX_IMAGE_BYTES)
    except FileNotFoundError:
        raise NotFoundError(f"image {path} not found", file=path) from None
    except OSError as exc:
        raise UsageError(f"image {path}: cannot read it ({exc.strerror})") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise UsageError(f"image {path} is larger than {MAX_IMAGE_BYTES} bytes")
    if not image_type_ok(ext, data):
        raise UsageError(f"image {path}: its content is not {ext.upper()} (magic bytes do not match)")
    return Image("jpg" if ext == "jpg" else ext, data)


def apply_tilde(text: str) -> tuple[str, bool]:
    """A leading `~` on argument text means `queue`: strip it and the spaces after it."""
    if text.startswith("~"):
        return text[1:].lstrip(" "), True
    return text, False


def build_message(text: str | None, mode: str, image: Image | None) -> bytes:
    """The message bytes, checked against the caps (exit 2 when too big or empty)."""
    if mode not in MODES:
        raise UsageError(f"invalid mode {mode!r}: use auto, interrupt or queue")
    if not text and image is None:
        raise UsageError("empty message: give text (argument, '-', --text-file) or --image")
    data = InboxMessage(text or None, mode).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise UsageError(
            f"message is {len(data)} bytes as encoded; the inbox limit is {MAX_MESSAGE_BYTES}"
        )
    return data


# --- stems -------------------------------------------------------------------------------------

def check_stem(stem: str) -> str:
    """A user-given stem (exit 2 unless safe: letters, digits, _ . -, ≤ 64, no `..`)."""
    if (
        not _USER_STEM.fullmatch(stem)
        or ".." in stem
        or stem.lower().endswith(_FORBIDDEN_STEM_ENDINGS)
    ):
        raise UsageError(
            f"invalid stem {stem!r}: 1-64 of letters, digits, '_', '.', '-', starting with a "
            "letter or digit, no '..', not ending in .tmp, .json or an image extension"
        )
    return stem


def stem_argument(text: str) -> str:
    """A stem named on the command line to look up; `NAME.json` is accepted for `NAME`."""
    return check_stem(text[:-5] if text.endswith(".json") and len(text) > 5 else text)


def default_stem(time_ns: int, priority: int | None = None) -> str:
    """`<epoch s>_<9-digit ns>`, optionally prefixed `0P_` so lower P is read first."""
    stem = f"{time_ns // 1_000_000_000}_{time_ns % 1_000_000_000:09d}"
    return stem if priority is None else f"0{priority}_{stem}"


def is_plain_stem(stem: str) -> bool:
    """A stem sxctl accepts (`--stem`'s rule): the only names `inbox forward` moves and records."""
    try:
        check_stem(stem)
    except UsageError:
        return False
    return True


def check_key(key: str) -> str:
    """An idempotency key (`--key`): 1-256 characters, no control characters."""
    import unicodedata  # only a keyed send checks a key: an unkeyed send in a loop never loads it

    if not 1 <= len(key) <= 256 or any(unicodedata.category(c) == "Cc" for c in key):
        raise UsageError("invalid --key: 1-256 characters, no control characters")
    return key

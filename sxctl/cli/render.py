"""How every line reaches a person or a script: human lines through `say`, `--json` documents
through `json_line`, the core's notes through `StderrReporter`. No click here: the plain
`inbox send` (`plain_send`) prints through the same functions without loading it."""

from __future__ import annotations

import json
import re
import sys

from ..api.scope import Reporter
from .settings import Settings
from .text import printable

TYPE_CHECKING = False  # the plain `inbox send` loads this module: not even `typing` at run time
if TYPE_CHECKING:
    from typing import Any

#: what json.dumps leaves raw with ensure_ascii off: DEL and the C1 controls (a terminal may obey
#: them), and the lone surrogates that stand for the bytes of a name that is not UTF-8
_JSON_RAW = "[\x7f-\x9f\ud800-\udfff]"  # compiled on first use (re caches it), not at import


def say(message: str, *, err: bool = False, lines: bool = False) -> None:
    """Write one human line to stdout (or stderr): every human line goes through here or
    `output.table`, escaped by `printable`, so no value from a file or an argument reaches the
    terminal raw. `lines=True`: a multi-line text (a message body, the agent tool's lists), whose
    line breaks stay. A character the stream's encoding lacks is written as a backslash escape."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # started with it closed: nothing to say
        return
    try:
        stream.write(printable(message, newlines=lines) + "\n")
        stream.flush()
    except OSError:
        if not err:
            raise  # stdout: the command's output failed, and its exit status says so
        drop_stream(stream)  # `2>/dev/full`: a note is lost, never the command (nor its exit status)


def drop_stream(stream) -> None:
    """Point `stream` (stdout, stderr) at /dev/null: what is still buffered goes nowhere, and the
    interpreter's last flush cannot fail again (a traceback, exit 120, after the status was chosen)."""
    import io
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (in tests): nothing to protect
        pass


def json_line(doc: dict[str, Any]) -> str:
    """One JSON document as one line of stdout: ASCII-only unless stdout takes UTF-8, and never a
    raw control character either way (json escapes C0; DEL and the C1 controls, which a terminal
    may obey, are escaped here as `\\u009b`: the same JSON value), and always valid UTF-8 (a name
    that is not UTF-8 shows its bytes as `\\udce9`, as Python's own ASCII JSON does)."""
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    text = json.dumps(doc, ensure_ascii=not encoding.startswith("utf"))
    if text.isascii() and "\x7f" not in text:  # nothing to escape: no scan (a 10,000-job list is 5 MB)
        return text + "\n"
    return re.sub(_JSON_RAW, lambda found: f"\\u{ord(found.group()):04x}", text) + "\n"


def emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json_line(doc))
    sys.stdout.flush()


class StderrReporter(Reporter):
    """Keeps the core's notes and warnings (for JSON reports) and shows them on stderr as they
    happen (-q drops them); details are shown only with -v."""

    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.settings = s

    @property
    def quiet(self) -> bool:
        return bool(self.settings.quiet)

    def note(self, message: str) -> None:
        super().note(message)
        if not self.settings.quiet:
            say(f"sxctl: {message}", err=True)

    def warn(self, message: str) -> None:
        super().warn(message)
        if not self.settings.quiet:
            say(f"sxctl: warning: {message}", err=True)

    def detail(self, message: str) -> None:
        super().detail(message)
        if self.settings.verbose:
            say(f"sxctl: {message}", err=True)

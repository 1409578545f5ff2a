"""The one escaping rule for text shown to a person (every human line goes through it)."""

from __future__ import annotations

import re

#: what `printable` escapes: controls (C0, DEL, C1), bidi controls, line/paragraph separators,
#: surrogates; not the other non-printing characters of ordinary text (no-break spaces, joiners)
#: compiled on first use (re caches it), not at import: `inbox send -q` never needs it
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"


def printable(text: str, *, newlines: bool = False) -> str:
    """The one escaping rule for text shown to a person: a character that can drive a terminal or
    reorder what is shown becomes a visible escape — the C0 and C1 controls (ESC `\\x1b`, the
    one-byte CSI `\\x9b`, BEL, backspace, CR, tab, DEL, …), bidi controls (`\\u202e`), line and
    paragraph separators, lone surrogates. Ordinary text stays as it is (a no-break space, the
    zero-width joiner inside an emoji or a Persian word). A value from a file or an argument can
    then neither drive the terminal (an OSC 52 clipboard write, a cleared screen) nor fake a row.
    With `newlines=True` the line breaks of a multi-line text stay. Escaping twice changes nothing."""
    if text.isprintable() or not re.search(_UNSAFE, text):
        return text
    if newlines:
        return "\n".join(printable(line) for line in text.split("\n"))
    return re.sub(_UNSAFE, lambda found: found.group().encode("unicode_escape", "backslashreplace").decode("ascii"),
                  text)

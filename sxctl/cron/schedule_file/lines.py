"""Where a key is in a schedule file's text, for the messages that name it: TOML's reader
(`tomllib`) gives no positions."""

from __future__ import annotations

import re


class KeyLines:
    """Where a key is in the file's text, for messages (TOML's reader gives no positions): the
    line of `[jobs.NAME]` or `[workspace…]`, then of the key below it; None when it is written
    another way (an inline table, a dotted key)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def find(self, table: tuple[str, ...], key: str | None = None) -> int | None:
        header = None
        if not table and key is not None:  # a top-level key: `[KEY…]` or `KEY =`
            return next((number for number, line in enumerate(self.lines, 1)
                         if re.match(rf"\s*(\[\s*)?[\"']?{re.escape(key)}[\"']?\s*[.=\]]", line)), None)
        for number, line in enumerate(self.lines, 1):
            found = re.fullmatch(r"\s*\[([^\[\]]+)\]\s*(#.*)?", line)
            if found is not None:
                parts = tuple(part.strip().strip("\"'") for part in re.split(r"\.(?=(?:[^\"']|\"[^\"]*\"|'[^']*')*$)",
                                                                             found.group(1)))
                if key is not None and parts == (*table, key):
                    return number  # `[jobs.NAME.KEY]`: a table where a value belongs
                if parts == table and key is None:
                    return number
                if parts == table:
                    header = number
                elif header is not None and key is not None and parts[:len(table)] != table:
                    return header
                continue
            if header is not None and key is not None and re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
                return number
        return header

"""The verdicts `doctor` collects: one per check — `ok`, `warn` or `fail` — with the command that
fixes each one that is not ok."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import SxctlError


class Findings:
    """The checks `doctor` ran and how each went, collected so that one failing probe never
    stops the others."""

    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []

    def add(self, check: str, status: str, message: str, fix: str | None = None) -> None:
        self.checks.append({"check": check, "status": status, "message": message, "fix": fix})

    def guard(self, check: str, probe: Callable[[], Any], fix: str | None = None) -> Any:
        """Run one probe and return what it returns; a file that cannot be read is that check's
        failure (with `fix`, or how to get at a file the system refuses), never a crash."""
        try:
            return probe()
        except SxctlError as error:
            refused = error.file if error.code == "os_refused" else None
            self.add(check, "fail", error.message,
                     error.extra.get("hint") or (access_fix(refused) if refused else fix))
        except OSError as error:
            where = error.filename
            self.add(check, "fail", f"{error.strerror or error}: {where or ''}".rstrip(": "),
                     access_fix(where) if isinstance(error, PermissionError) and where else fix)
        return None


def access_fix(path: str | os.PathLike[str]) -> str:
    return (f"ls -ld {path}   # run sxctl as its owner (the agent's user), or give this user access "
            "(chmod u+rX as the owner)")

"""One error family for every sxctl failure: each carries its exit code and its JSON object.

The CLI turns any `SxctlError` into a one-line message (or a JSON error document) and the
exit code of the spec's table, so no command needs its own error handling.
"""

from __future__ import annotations

import os
from typing import Any

#: spec README "Error codes": every `error.code` string and the exit status it maps to.
EXIT_BY_CODE: dict[str, int] = {
    "internal": 1,
    **dict.fromkeys(("usage", "invalid_value", "unsupported"), 2),
    **dict.fromkeys(
        (
            "project_not_found",
            "session_not_found",
            "slot_not_active",
            "job_not_found",
            "stem_not_found",
            "file_not_found",
            "key_not_set",
        ),
        3,
    ),
    **dict.fromkeys(
        (
            "rev_moved",
            "lock_busy",
            "lock_lost",
            "daemon_owns_workspace",
            "built_in_present",
            "agent_owns_session",
            "slots_full",
            "slot_active",
            "key_conflict",
            "active_claim",
            "config_owned",
            "name_taken",
            "capacity",
            "reset_intent",
            "one_shot_final",
            "retracted",
            "lost_update",
        ),
        4,
    ),
    **dict.fromkeys(("invalid_data", "orphan_start", "identity_mismatch", "clock_behind"), 5),
    "timeout": 6,
    "too_late": 7,
    "os_refused": 8,
    "doctor_failed": 9,
    "interrupted": 130,
}


#: what each exit status means: the README's table, the man pages' EXIT STATUS (generated) and
#: `EXIT_BY_CODE` above say the same, and a test holds them together
EXIT_MEANINGS: dict[int, str] = {
    0: "ok (also: written but not yet consumed, without `--wait`)",
    1: "internal error (`-v` shows the traceback)",
    2: "usage or invalid value (bad stem, oversize text, wrong image type, bad DURATION, a value beyond "
       "comis's limits, an argument that is not UTF-8)",
    3: "not found (project, session, stem, inactive timer slot, cron job, input file, unset configuration key)",
    4: "conflict (stem taken, key reused with other content, retracted while waiting, busy, slots full, rev moved, "
       "lost update, cron lock busy or lost, daemon owns the workspace, name taken, capacity)",
    5: "invalid data on disk (never rewritten), or a symbolic link where sxctl would delete, move or create",
    6: "timed out waiting (`--wait`, `inbox wait`)",
    7: "too late (retracting a consumed message; editing a timer that fired its last time meanwhile)",
    8: "the operating system refused (permission denied, read-only or full file system, closed standard output)",
    9: "`doctor` found a failing check (each is named, with the command that fixes it)",
    130: "interrupted (Ctrl-C; SIGTERM while waiting); a command that was waiting says where its message is",
}


class SxctlError(Exception):
    """A failure a user can act on. `code` picks the exit status from the spec's table."""

    default_code = "internal"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        file: str | os.PathLike[str] | None = None,
        details: dict[str, Any] | None = None,
        verbatim: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        if self.code not in EXIT_BY_CODE:
            raise ValueError(f"unknown sxctl error code {self.code!r}")
        self.file = str(file) if file is not None else None
        self.extra = extra
        #: top-level keys of the failure document besides `ok` and `error` (e.g. the stem
        #: that a timed-out `send --wait` did write)
        self.details = details or {}
        #: print the message as the whole stderr line, without the `sxctl: ` prefix (the agent
        #: tool's own `Error: …` strings are reproduced verbatim)
        self.verbatim = verbatim

    @property
    def exit_code(self) -> int:
        return EXIT_BY_CODE[self.code]

    def to_json(self) -> dict[str, Any]:
        """The `error` object of a failed command's JSON document."""
        error: dict[str, Any] = {"code": self.code, "message": self.message, "exit": self.exit_code}
        if self.file is not None:
            error["file"] = self.file
        error.update(self.extra)
        return error

    def document(self) -> dict[str, Any]:
        """The whole `--json` failure document."""
        return {**self.details, "ok": False, "error": self.to_json()}


class UsageError(SxctlError):
    """Exit 2: a bad flag or value given by the user."""

    default_code = "invalid_value"


class NotFoundError(SxctlError):
    """Exit 3: the project, session, stem, … does not exist."""

    default_code = "file_not_found"


class ConflictError(SxctlError):
    """Exit 4: someone else holds or changed what we wanted to change."""

    default_code = "lock_busy"


class InvalidDataError(SxctlError):
    """Exit 5: a file on disk cannot be parsed or validated; it is never rewritten."""

    default_code = "invalid_data"

    def __init__(self, file: str | os.PathLike[str], reason: str, **extra: Any) -> None:
        super().__init__(f"invalid data in {file}: {reason}", file=file, **extra)
        self.reason = reason


class WaitTimeoutError(SxctlError):
    """Exit 6: a deadline passed while the awaited thing was still pending."""

    default_code = "timeout"


class TooLateError(SxctlError):
    """Exit 7: the thing already happened (consumed, fired)."""

    default_code = "too_late"


class SystemRefusedError(SxctlError):
    """Exit 8: the operating system refused (permission denied, read-only or full file system,
    a closed standard output): nothing sxctl or the data did wrong, and nothing to retry blindly."""

    default_code = "os_refused"

    @classmethod
    def from_os_error(cls, error: OSError, doing: str | None = None) -> SystemRefusedError:
        where = error.filename if error.filename is not None else None
        what = f"{doing} " if doing else ""
        target = f"{where}: " if where is not None else ""
        reason = error.strerror or error.__class__.__name__
        return cls(f"{what}{target}{reason}", file=where)

"""One error family for every sxctl failure: each carries its exit code and its JSON object.

The CLI turns any `SxctlError` into a one-line message (or a JSON error document) and the
exit code of the spec's table, so no command needs its own error handling.
"""

from __future__ import annotations

import os
from enum import IntEnum, StrEnum
from typing import Any


class ExitStatus(IntEnum):
    """Every exit status of sxctl (docs/reference/json-and-exit-codes.md "Exit codes")."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    INVALID_DATA = 5
    TIMEOUT = 6
    TOO_LATE = 7
    OS_REFUSED = 8
    DOCTOR_FAILED = 9
    RUN_FAILED = 10  # `cron run`: a run it made did not succeed (not in the spec's table)
    CHANGES_PENDING = 11  # `cron plan --detailed-exitcode`: apply would change something (not an error)
    EXPIRED = 12  # `inbox wait`: the message's --expires passed unread and it was withdrawn (not in the spec)
    INTERRUPTED = 130  # Ctrl-C, SIGTERM while waiting: 128 + SIGINT
    BROKEN_PIPE = 141  # the reader of stdout went away: what a shell reports for SIGPIPE (128 + 13)


class ErrorCode(StrEnum):
    """Every `error.code` string of a failure document; each knows its exit status (`.status`)."""

    INTERNAL = "internal"
    USAGE = "usage"
    INVALID_VALUE = "invalid_value"
    UNSUPPORTED = "unsupported"
    PROJECT_NOT_FOUND = "project_not_found"
    SESSION_NOT_FOUND = "session_not_found"
    SLOT_NOT_ACTIVE = "slot_not_active"
    JOB_NOT_FOUND = "job_not_found"
    STEM_NOT_FOUND = "stem_not_found"
    FILE_NOT_FOUND = "file_not_found"
    KEY_NOT_SET = "key_not_set"
    REV_MOVED = "rev_moved"
    LOCK_BUSY = "lock_busy"
    LOCK_LOST = "lock_lost"
    DAEMON_OWNS_WORKSPACE = "daemon_owns_workspace"
    BUILT_IN_PRESENT = "built_in_present"
    AGENT_OWNS_SESSION = "agent_owns_session"
    SESSION_SUPERSEDED = "session_superseded"
    SLOTS_FULL = "slots_full"
    SLOT_ACTIVE = "slot_active"
    KEY_CONFLICT = "key_conflict"
    ACTIVE_CLAIM = "active_claim"
    CONFIG_OWNED = "config_owned"
    NAME_TAKEN = "name_taken"
    CAPACITY = "capacity"
    RESET_INTENT = "reset_intent"
    ONE_SHOT_FINAL = "one_shot_final"
    RETRACTED = "retracted"
    EXPIRED = "expired"
    LOST_UPDATE = "lost_update"
    POLICY_LOSS = "policy_loss"  # `cron handoff`: comis would ignore sxctl's policy of a job
    PASS_INSTALLED = "pass_installed"  # `cron handoff`: sxctl's crontab entry still runs passes here
    INVALID_DATA = "invalid_data"
    ORPHAN_START = "orphan_start"
    IDENTITY_MISMATCH = "identity_mismatch"
    CLOCK_BEHIND = "clock_behind"
    TIMEOUT = "timeout"
    TOO_LATE = "too_late"
    OS_REFUSED = "os_refused"
    DOCTOR_FAILED = "doctor_failed"
    RUN_FAILED = "run_failed"
    INTERRUPTED = "interrupted"

    @property
    def status(self) -> ExitStatus:
        return _STATUS_BY_CODE[self]


_STATUS_BY_CODE: dict[ErrorCode, ExitStatus] = {
    ErrorCode.INTERNAL: ExitStatus.INTERNAL,
    **dict.fromkeys((ErrorCode.USAGE, ErrorCode.INVALID_VALUE, ErrorCode.UNSUPPORTED), ExitStatus.USAGE),
    **dict.fromkeys((ErrorCode.PROJECT_NOT_FOUND, ErrorCode.SESSION_NOT_FOUND, ErrorCode.SLOT_NOT_ACTIVE,
                     ErrorCode.JOB_NOT_FOUND, ErrorCode.STEM_NOT_FOUND, ErrorCode.FILE_NOT_FOUND,
                     ErrorCode.KEY_NOT_SET), ExitStatus.NOT_FOUND),
    **dict.fromkeys((ErrorCode.REV_MOVED, ErrorCode.LOCK_BUSY, ErrorCode.LOCK_LOST, ErrorCode.DAEMON_OWNS_WORKSPACE,
                     ErrorCode.BUILT_IN_PRESENT, ErrorCode.AGENT_OWNS_SESSION, ErrorCode.SESSION_SUPERSEDED,
                     ErrorCode.SLOTS_FULL,
                     ErrorCode.SLOT_ACTIVE, ErrorCode.KEY_CONFLICT, ErrorCode.ACTIVE_CLAIM, ErrorCode.CONFIG_OWNED,
                     ErrorCode.NAME_TAKEN, ErrorCode.CAPACITY, ErrorCode.RESET_INTENT, ErrorCode.ONE_SHOT_FINAL,
                     ErrorCode.RETRACTED, ErrorCode.LOST_UPDATE, ErrorCode.POLICY_LOSS,
                     ErrorCode.PASS_INSTALLED), ExitStatus.CONFLICT),
    **dict.fromkeys((ErrorCode.INVALID_DATA, ErrorCode.ORPHAN_START, ErrorCode.IDENTITY_MISMATCH,
                     ErrorCode.CLOCK_BEHIND), ExitStatus.INVALID_DATA),
    ErrorCode.TIMEOUT: ExitStatus.TIMEOUT,
    ErrorCode.TOO_LATE: ExitStatus.TOO_LATE,
    ErrorCode.EXPIRED: ExitStatus.EXPIRED,
    ErrorCode.OS_REFUSED: ExitStatus.OS_REFUSED,
    ErrorCode.DOCTOR_FAILED: ExitStatus.DOCTOR_FAILED,
    ErrorCode.RUN_FAILED: ExitStatus.RUN_FAILED,
    ErrorCode.INTERRUPTED: ExitStatus.INTERRUPTED,
}

#: every `error.code` string and the exit status it maps to, as plain values (for the generated
#: tables of the docs)
EXIT_BY_CODE: dict[str, int] = {code.value: int(code.status) for code in ErrorCode}


#: what each exit status means: the table of docs/reference/json-and-exit-codes.md, the man pages'
#: EXIT STATUS (generated) and `ErrorCode` above say the same, and a test holds them together
EXIT_MEANINGS: dict[int, str] = {
    0: "ok (also: written but not yet consumed, without `--wait`)",
    1: "internal error (`-v` shows the traceback)",
    2: "usage or invalid value (bad stem, oversize text, wrong image type, bad DURATION, a value beyond "
       "comis's limits, an argument that is not UTF-8)",
    3: "not found (project, session, stem, inactive timer slot, cron job, input file, unset configuration key)",
    4: "conflict (stem taken, key reused with other content, retracted while waiting, busy, slots full, rev moved, "
       "lost update, cron lock busy or lost, daemon owns the workspace, name taken, capacity, a hand-off to comis "
       "that would lose sxctl's policy or while sxctl's pass is installed, a pinned session the agent left for a "
       "newer live one)",
    5: "invalid data on disk (never rewritten), or a symbolic link where sxctl would delete, move or create",
    6: "timed out waiting (`--wait`, `inbox wait`)",
    7: "too late (retracting a consumed message; editing a timer that fired its last time meanwhile)",
    8: "the operating system refused (permission denied, read-only or full file system, closed standard output)",
    9: "`doctor` found a failing check (each is named, with the command that fixes it; with `--strict`, a warning)",
    10: "`cron run`: a run it made did not succeed (failed or unknown); the reason is printed, "
        "`sxctl cron runs NAME` shows the run",
    11: "`cron plan --detailed-exitcode`: `cron apply` would change something (the plan is printed; "
        "0: nothing would change)",
    12: "expired: the message's `--expires` passed unread and it was withdrawn (`inbox wait`, `inbox send --wait`)",
    130: "interrupted (Ctrl-C; SIGTERM while writing or waiting); a send interrupted once its message was written, "
         "or while waiting, says where the message is",
    141: "the reader of standard output went away (piped into `head`): silently, as a shell reports SIGPIPE",
}


class SxctlError(Exception):
    """A failure a user can act on. `code` picks the exit status from the spec's table."""

    default_code: ErrorCode = ErrorCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        file: str | os.PathLike[str] | None = None,
        details: dict[str, Any] | None = None,
        verbatim: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: ErrorCode = code or self.default_code
        self.file = str(file) if file is not None else None
        self.extra = extra
        #: top-level keys of the failure document besides `ok` and `error` (e.g. the stem
        #: that a timed-out `send --wait` did write)
        self.details = details or {}
        #: print the message as the whole stderr line, without the `sxctl: ` prefix (the agent
        #: tool's own `Error: …` strings are reproduced verbatim)
        self.verbatim = verbatim

    @property
    def exit_code(self) -> ExitStatus:
        return self.code.status

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

    default_code = ErrorCode.INVALID_VALUE


class NotFoundError(SxctlError):
    """Exit 3: the project, session, stem, … does not exist."""

    default_code = ErrorCode.FILE_NOT_FOUND


class ConflictError(SxctlError):
    """Exit 4: someone else holds or changed what we wanted to change."""

    default_code = ErrorCode.LOCK_BUSY


class InvalidDataError(SxctlError):
    """Exit 5: a file on disk cannot be parsed or validated; it is never rewritten."""

    default_code = ErrorCode.INVALID_DATA

    def __init__(self, file: str | os.PathLike[str], reason: str, **extra: Any) -> None:
        super().__init__(f"invalid data in {file}: {reason}", file=file, **extra)
        self.reason = reason


class WaitTimeoutError(SxctlError):
    """Exit 6: a deadline passed while the awaited thing was still pending."""

    default_code = ErrorCode.TIMEOUT


class TooLateError(SxctlError):
    """Exit 7: the thing already happened (consumed, fired)."""

    default_code = ErrorCode.TOO_LATE


class SystemRefusedError(SxctlError):
    """Exit 8: the operating system refused (permission denied, read-only or full file system,
    a closed standard output): nothing sxctl or the data did wrong, and nothing to retry blindly."""

    default_code = ErrorCode.OS_REFUSED

    @classmethod
    def from_os_error(cls, error: OSError, doing: str | None = None) -> SystemRefusedError:
        where = error.filename if error.filename is not None else None
        what = f"{doing} " if doing else ""
        target = f"{where}: " if where is not None else ""
        reason = error.strerror or error.__class__.__name__
        return cls(f"{what}{target}{reason}", file=where)

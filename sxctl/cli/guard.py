"""The one place that turns a run of sxctl into an exit status: a failure becomes one line on
stderr (or its JSON document) and the exit code of docs/reference/json-and-exit-codes.md "Exit
codes", never a traceback. Both ways in go through it — the click command line (`root`) and the
plain `inbox send` (`plain_send`) — and it loads no click, so the plain send need not."""

from __future__ import annotations

import io
import sys

from ..errors import ErrorCode, ExitStatus, SxctlError, SystemRefusedError, UsageError
from .render import drop_stream, emit_json, say

TYPE_CHECKING = False  # the plain `inbox send` loads this module: not even `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


def run(args: list[str], body: Callable[[], int]) -> NoReturn:
    """Run `body` (it returns the exit status) for the command line `args`, turn what it raises
    into the documented exit status and output, and exit."""
    if sys.stdout is None:  # started with stdout closed (`>&-`): say so, and do nothing
        if sys.stderr is not None:
            sys.stderr.write("sxctl: standard output is closed; nothing was done\n")
        sys.exit(ExitStatus.OS_REFUSED)
    _whole_writes()
    _tolerate_narrow_encodings()
    try:
        _refuse_undecodable(args)
        code = body()
    except SxctlError as error:
        code = fail(error, args)
    except BrokenPipeError:
        code = _broken_pipe()
    except KeyboardInterrupt:
        code = fail(SxctlError("interrupted", code=ErrorCode.INTERRUPTED), args)
    except OSError as error:  # what the disk or the system refused, named, never a traceback
        code = _stdout_refused(error) if _stdout_failing() else fail(SystemRefusedError.from_os_error(error), args)
    except Exception as error:  # noqa: BLE001 - the last line of defence: exit 1, never a traceback
        if wants(args, "-v", "--verbose"):
            import traceback  # only for a crash shown with -v (about 3 ms on every start-up otherwise)

            traceback.print_exc()
        code = fail(SxctlError(f"internal error: {error.__class__.__name__}: {error}"), args)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _broken_pipe()
    except OSError as error:  # `> /dev/full`: the output could not be written
        code = _stdout_refused(error)
    sys.exit(code)


def _whole_writes() -> None:
    """Under PYTHONUNBUFFERED (or `python -u`) stdout writes straight to its descriptor, and a
    write the system cuts short (the reader of a pipe gone mid-document) drops the rest without
    a word: `--json | head -c 10` exited 0 while the same cut in human output exited 141. Through
    a line-buffered writer every byte is written or BrokenPipeError is raised, whatever the
    output and the buffering: one rule for both."""
    stream = sys.stdout
    raw = getattr(stream, "buffer", None)
    if isinstance(stream, io.TextIOWrapper) and isinstance(raw, io.RawIOBase):
        own = io.FileIO(raw.fileno(), "w", closefd=False)  # closing it leaves sys.__stdout__ intact
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(own), encoding=stream.encoding, errors=stream.errors,
                                      line_buffering=True)


def _tolerate_narrow_encodings() -> None:
    """With PYTHONIOENCODING=ascii or a latin-1 locale, text that does not fit is written as
    backslash escapes instead of failing (JSON is then written ASCII-only: see emit_json)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if stream is not None and encoding not in ("utf8", "utf8sig") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _refuse_undecodable(args: list[str]) -> None:
    """An argument that is not UTF-8 (the shell passed raw bytes) cannot be written into a
    UTF-8 file: exit 2 naming it, before anything is done."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"argument '{shown}' is not valid UTF-8 text") from None


def _broken_pipe() -> ExitStatus:
    """The reader of stdout went away (`sxctl cron list | head -1`): no message, no traceback,
    the status a shell reports for a process that SIGPIPE ended."""
    drop_stream(sys.stdout)
    return ExitStatus.BROKEN_PIPE


def _stdout_failing() -> bool:
    """Whether stdout itself cannot be written (an OSError came from printing, not from a file)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return False  # the next flush says so, and it is a broken pipe (141, silent)
    except OSError:
        return True
    return False


def _stdout_refused(error: OSError) -> int:
    """Stdout could not be written (`sxctl cron list > /dev/full`: ENOSPC, EIO): one line on
    stderr, never a JSON document on the stdout that failed, and exit 8 (the system refused)."""
    drop_stream(sys.stdout)
    return fail(SystemRefusedError.from_os_error(error, "cannot write standard output:"), [])


def wants(args: list[str], *flags: str) -> bool:
    return any(arg in flags for arg in args)


def fail(error: SxctlError, args: list[str]) -> int:
    """The error's one line on stderr (its values escaped: see `say`), or its JSON document."""
    if wants(args, "--json"):
        try:
            emit_json(error.document())
        except BrokenPipeError:
            return _broken_pipe()
        except OSError as refused:  # `--json > /dev/full`: the document cannot be written either
            return _stdout_refused(refused)
    elif error.verbatim:
        say(error.message, err=True)
    else:
        say(f"sxctl: {error.message}", err=True)
    hint = error.extra.get("hint")
    if hint and not wants(args, "--json"):
        say(f"sxctl: hint: {hint}", err=True)
    return error.exit_code

"""The `sxctl` command: a root group, the global options, and explicitly registered groups.

The groups are listed by name and imported only when used, so that `sxctl inbox send` (run in
shell loops) loads the inbox code and nothing else; for the same reason each command imports
the API function it calls where it runs (`sxctl --help` and shell completion load every group).
`main()` is the only place that turns failures into exit codes and error output.
"""

from __future__ import annotations

import importlib
import io
import os
import sys

import click

from ..api import __version__
from ..errors import ErrorCode, ExitStatus, SxctlError, SystemRefusedError, UsageError
from .output import Group, emit_json, say

#: every command of the root group: name -> "module:attribute" (explicit; nothing is scanned)
COMMANDS = {
    "session": "session:session", "config": "config:config", "callbacks": "callbacks:callbacks",
    "cb": "callbacks:callbacks", "inbox": "inbox:inbox", "cron": "cron:cron", "agent": "agent:agent",
    "status": "observe:status", "next": "observe:next_", "watch": "observe:watch_command", "demo": "demo:demo",
    "doctor": "doctor:doctor_command", "metrics": "observe:metrics",
}


class SxctlGroup(Group):
    """The root group: the one place that turns failures into exit codes and error output.

    Overriding `main` (rather than wrapping it) keeps click's CliRunner faithful in tests."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        if sys.stdout is None:  # started with stdout closed (`>&-`): say so, and do nothing
            if sys.stderr is not None:
                sys.stderr.write("sxctl: standard output is closed; nothing was done\n")
            sys.exit(ExitStatus.OS_REFUSED)
        _whole_writes()
        _tolerate_narrow_encodings()
        try:
            _refuse_undecodable(args)
            result = super().main(args=args, prog_name=prog_name or "sxctl", complete_var=complete_var,
                                  standalone_mode=False, **extra)
            code = result if isinstance(result, int) else ExitStatus.OK
        except SxctlError as error:
            code = _fail(error, args)
        except BrokenPipeError:
            code = _broken_pipe()
        except SystemExit:
            # click meets a broken pipe by wrapping stdout (PacifyFlushWrapper) and exiting 1
            if not type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
                raise
            code = _broken_pipe()
        except click.exceptions.Exit as exit_:
            code = exit_.exit_code
        except click.exceptions.NoArgsIsHelpError as shown:  # `sxctl`, `sxctl -q inbox`: help, not an error
            if _wants(args, "--json"):  # … unless a script asked for a document: help is none
                path = shown.ctx.command_path
                code = _fail(SxctlError(f"Missing command. (see '{path} --help')", code=ErrorCode.USAGE), args)
            else:
                click.echo(shown.ctx.get_help())
                code = ExitStatus.OK
        except click.ClickException as error:
            where = error.ctx.command_path if getattr(error, "ctx", None) else "sxctl"
            kind = ErrorCode.INVALID_VALUE if isinstance(error, click.BadParameter) else ErrorCode.USAGE
            message = f"{error.format_message()} (see '{where} --help')"
            code = _fail(SxctlError(message, code=kind), args)
        except (click.Abort, KeyboardInterrupt):
            code = _fail(SxctlError("interrupted", code=ErrorCode.INTERRUPTED), args)
        except OSError as error:  # what the disk or the system refused, named, never a traceback
            code = _stdout_refused(error) if _stdout_failing() else _fail(SystemRefusedError.from_os_error(error), args)
        except Exception as error:  # noqa: BLE001 - the last line of defence: exit 1, never a traceback
            if _wants(args, "-v", "--verbose"):
                import traceback  # only for a crash shown with -v (about 3 ms on every start-up otherwise)

                traceback.print_exc()
            code = _fail(SxctlError(f"internal error: {error.__class__.__name__}: {error}"), args)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = _broken_pipe()
        except OSError as error:  # `> /dev/full`: the output could not be written
            code = _stdout_refused(error)
        sys.exit(code)

    def _main_shell_completion(self, ctx_args, prog_name, complete_var=None) -> None:
        """Shell completion: a malformed request (a COMP_CWORD that is no number or beyond the
        words, a variable missing, fish's odd spacing) completes nothing, silently, exit 0 —
        a keypress never prints "internal error"."""
        try:
            super()._main_shell_completion(ctx_args, prog_name, complete_var)
        except SystemExit:
            raise
        except Exception:  # noqa: BLE001 - a completion never fails
            sys.exit(ExitStatus.OK)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """As click's, with "Did you mean …" drawn from the lazily imported commands too."""
        if args and args[0] not in COMMANDS and not args[0].startswith("-") and not ctx.resilient_parsing:
            raise click.exceptions.NoSuchCommand(args[0], possibilities=COMMANDS, ctx=ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


@click.group(name="sxctl", cls=SxctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="sxctl")
def cli() -> None:
    """Drive a running AI coding agent (SCORPIOX CODE, comis) through its files on disk.

    \b
    Examples:
      sxctl session which
      sxctl inbox send "run the tests and report" --wait 60
      echo "deploy finished" | sxctl inbox send - --mode queue --json
    """



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
    _drop_stdout()
    return ExitStatus.BROKEN_PIPE


def _drop_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered goes nowhere, and the interpreter's last
    flush cannot fail again (a traceback after the exit status was chosen)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (in tests): nothing to protect
        pass


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
    _drop_stdout()
    return _fail(SystemRefusedError.from_os_error(error, "cannot write standard output:"), [])


def _wants(args: list[str], *flags: str) -> bool:
    return any(arg in flags for arg in args)


def _fail(error: SxctlError, args: list[str]) -> int:
    """The error's one line on stderr (its values escaped: see `say`), or its JSON document."""
    if _wants(args, "--json"):
        emit_json(error.document())
    elif error.verbatim:
        say(error.message, err=True)
    else:
        say(f"sxctl: {error.message}", err=True)
    hint = error.extra.get("hint")
    if hint and not _wants(args, "--json"):
        say(f"sxctl: hint: {hint}", err=True)
    return error.exit_code


def main(argv: list[str] | None = None) -> None:
    """Run sxctl and exit with the status of docs/reference/json-and-exit-codes.md "Exit codes"."""
    cli.main(args=argv)

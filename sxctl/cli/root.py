"""The `sxctl` click command: a root group, the global options, and explicitly registered groups.

The groups are listed by name and imported only when used, so that a command loads its own group
and nothing else; for the same reason each command imports the API function it calls where it
runs (`sxctl --help` and shell completion load every group). What a run raises becomes an exit
status in `guard`, the one place for it.
"""

from __future__ import annotations

import importlib
import sys

import click

from ..api import __version__
from ..errors import ErrorCode, ExitStatus, SxctlError
from . import guard
from .output import Group

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
        parse_and_invoke = super().main

        def body() -> int:
            """click's run, its own exceptions turned into sxctl's (`guard` handles the rest)."""
            try:
                result = parse_and_invoke(args=args, prog_name=prog_name or "sxctl", complete_var=complete_var,
                                          standalone_mode=False, **extra)
            except SystemExit:
                # click meets a broken pipe by wrapping stdout (PacifyFlushWrapper) and exiting 1
                if not type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
                    raise
                raise BrokenPipeError from None
            except click.exceptions.Exit as exit_:
                return exit_.exit_code
            except click.exceptions.NoArgsIsHelpError as shown:  # `sxctl`, `sxctl -q inbox`: help, not an error
                if guard.wants(args, "--json"):  # … unless a script asked for a document: help is none
                    path = shown.ctx.command_path
                    raise SxctlError(f"Missing command. (see '{path} --help')", code=ErrorCode.USAGE) from None
                click.echo(shown.ctx.get_help())
                return ExitStatus.OK
            except click.ClickException as error:
                context = getattr(error, "ctx", None)
                where = context.command_path if context else "sxctl"
                kind = ErrorCode.INVALID_VALUE if isinstance(error, click.BadParameter) else ErrorCode.USAGE
                message = " ".join(error.format_message().split())  # click's own line breaks and tabs: one line
                raise SxctlError(f"{message} (see '{where} --help')", code=kind) from None
            except click.Abort:
                raise KeyboardInterrupt from None
            return result if isinstance(result, int) else ExitStatus.OK

        guard.run(args, body)

    def invoke(self, ctx: click.Context):
        """Ctrl-C is sxctl's `interrupted` (exit 130) here, before click's own handler would print
        an empty line first: the same output as the plain `inbox send`."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise SxctlError("interrupted", code=ErrorCode.INTERRUPTED) from None

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
        return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


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

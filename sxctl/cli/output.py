"""Options every command shares (`--json`, `-q`, `-v`, `--no-color`, the session and workspace
pickers) and the one place that renders results, notes and errors.

Global options are accepted before the group and on every leaf: `sxctl --json inbox list` and
`sxctl inbox list --json` are the same. rich is imported only when styling a TTY.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from ..api.scope import FAULT_POINTS, Reporter, arm_fault
from ..api.times import parse_duration_ms
from ..errors import NotFoundError, SystemRefusedError, UsageError
from .render import StderrReporter, emit_json, say
from .settings import Settings, settings
from .text import printable


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value == "":  # `--session "$SID"` with SID unset: refused, never taken for "not given"
            raise click.BadParameter("the value is empty", ctx=ctx, param=param)
        if value not in (None, False):
            setattr(settings(ctx), name, value)

    return callback


def completing(kind: str) -> Callable[[click.Context, click.Parameter, str], list[str]]:
    """A `shell_complete` callback that loads `sxctl.cli.complete` only when a shell asks."""

    def complete_lazily(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        from . import complete  # only when a shell asks: it loads the API parts it completes from

        return getattr(complete, kind)(ctx, param, incomplete)

    return complete_lazily


_GLOBAL_OPTIONS = [
    click.Option(["--project"], metavar="DIR", help="Project root (the folder holding .scorpiox/).",
                 expose_value=False, callback=_store("project"), is_eager=True),
    click.Option(["--session"], metavar="ID", help="Session id under .scorpiox/sessions/.",
                 expose_value=False, callback=_store("session"), is_eager=True,
                 shell_complete=completing("sessions")),
    click.Option(["--workspace"], metavar="DIR", help="comis workspace (the folder holding .scheduler/).",
                 expose_value=False, callback=_store("workspace"), is_eager=True),
    click.Option(["--agent"], metavar="ID", help="comis agentId for new jobs and claims.",
                 expose_value=False, callback=_store("agent"), is_eager=True),
    click.Option(["--json"], is_flag=True, help="Print one JSON document on stdout.",
                 expose_value=False, callback=_store("json"), is_eager=True),
    click.Option(["--no-color"], is_flag=True, help="No colour (also when NO_COLOR is set).",
                 expose_value=False, callback=_store("no_color"), is_eager=True),
    click.Option(["-q", "--quiet"], is_flag=True, help="Drop notes and warnings on stderr.",
                 expose_value=False, callback=_store("quiet"), is_eager=True),
    click.Option(["-v", "--verbose"], is_flag=True, help="More detail; a traceback on internal errors.",
                 expose_value=False, callback=_store("verbose"), is_eager=True),
]


def _arm_fault(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    arm_fault(value)


FAULT_INJECT = click.Option(
    ["--fault-inject"], type=click.Choice(FAULT_POINTS), hidden=True, expose_value=False,
    callback=_arm_fault, help="Test hook: exit 99 at the named point.",
)


def _json_option(streams: str) -> click.Option:
    """`--json` of a command whose JSON is a stream of JSON Lines (`streams`: when it streams)."""
    shown = "Print JSON Lines (one JSON document per event) on stdout" if streams == "always" else \
        f"Print one JSON document on stdout; JSON Lines (one per event) {streams}"
    return click.Option(["--json"], is_flag=True, help=f"{shown}.", expose_value=False, callback=_store("json"),
                        is_eager=True)


class _NamesItsCommand:
    """A usage error from click's parser names the command it happened in (`see 'sxctl inbox send
    --help'`): click leaves a missing value or `--flag=value` without one (`see 'sxctl --help'`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except click.UsageError as error:
            if error.ctx is None:
                error.ctx = ctx
            raise


class Command(_NamesItsCommand, click.Command):
    """Every sxctl command: it takes the global options, and, when `mutating=True` (it writes),
    the hidden `--fault-inject POINT` test hook. No list of commands is kept by hand.
    `streams="always"` (or "with --follow", …): its `--json` help says JSON Lines."""

    def __init__(self, *args: Any, mutating: bool = False, streams: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_GLOBAL_OPTIONS if streams is None else
                           [_json_option(streams) if "--json" in option.opts else option for option in _GLOBAL_OPTIONS])
        if mutating:
            self.params.append(FAULT_INJECT)


class Group(_NamesItsCommand, click.Group):
    """Every sxctl command group: the global options, and its commands and sub-groups are
    `Command`s and `Group`s too.

    A group given no command (`sxctl`, `sxctl -q`, `sxctl cron --no-color`) shows its help and
    exits 0 whatever global options came with it; with `--json` it is a usage error (exit 2, a
    JSON document), since a script that asked for JSON cannot read help (`sxctl.cli` decides)."""

    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_GLOBAL_OPTIONS)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """As click's, with "Did you mean …" for a mistyped command (`sxctl cron ad`)."""
        if args and not args[0].startswith("-") and not ctx.resilient_parsing \
                and self.get_command(ctx, args[0]) is None:
            raise click.exceptions.NoSuchCommand(args[0], possibilities=self.list_commands(ctx), ctx=ctx)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        if not (getattr(ctx, "_protected_args", []) or ctx.args or ctx.resilient_parsing):
            raise click.exceptions.NoArgsIsHelpError(ctx)  # options but no command: as no arguments at all
        return super().invoke(ctx)


Group.group_class = Group


class Duration(click.ParamType):
    """A DURATION: `90` (seconds), `250ms`, `30s`, `5m`, `1h30m`, `7d` -> seconds, as the API
    takes them. The one type of every option that takes a length of time (`--idle-exit 5m` as
    `--wait 5m`); `whole=True`: a whole number of seconds (an int), for the store's fields that
    hold one (`--timeout-seconds 2h`)."""

    name = "duration"

    def __init__(self, *, whole: bool = False) -> None:
        self.whole = whole

    def convert(self, value, param, ctx):
        if isinstance(value, int | float):
            return value
        what = "duration"  # click names the option: "Invalid value for '--wait': invalid duration '-1': …"
        try:
            ms = parse_duration_ms(value, what=what)
        except UsageError as error:
            self.fail(error.message, param, ctx)
        if not self.whole:
            return ms / 1000
        if ms % 1000:
            self.fail(f"invalid {what} {value!r}: a whole number of seconds (e.g. 90, 30s, 5m, 2h)", param, ctx)
        return ms // 1000


DURATION = Duration()
WHOLE_SECONDS = Duration(whole=True)


# --- rendering ---------------------------------------------------------------------------------

def color_enabled(s: Settings | None = None) -> bool:
    s = s or settings()
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and not s.no_color and not s.json


def reporter() -> Reporter:
    return StderrReporter(settings())


def emit(doc: dict[str, Any], human: Callable[[], None]) -> None:
    """Print a result: the JSON document with --json, else the human rendering."""
    if settings().json:
        emit_json(doc)
    else:
        human()


def markup(text: str) -> str:
    """A value for rich markup (a table cell, a line of a panel): `printable`, and its `[…]`
    escaped so that no value is read as a style."""
    from rich.markup import escape  # rich loads only when styling a TTY

    return escape(printable(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, fit: Sequence[str] = ()) -> None:
    """A plain aligned table, or a rich one when styling a TTY; every cell printable. `fit`: on a
    terminal, the headers of the columns that may be cut with `…`, first cut first, to keep the
    table within its width (`COLUMNS`), in colour as in plain — for a wide listing whose `--json`
    has every value; output into a pipe or a file keeps every value whole."""
    headers = list(headers)
    cells = [[("-" if v is None else printable(str(v))) for v in row] for row in rows]
    fitting = bool(fit) and sys.stdout.isatty()  # a pipe or a file keeps every value whole (grep, a log)
    if fitting:
        headers, cells = _fitted_table(headers, cells, fit)
    if color_enabled():
        from rich.console import Console  # rich loads only when styling a TTY
        from rich.table import Table

        rich_table = Table(box=None, header_style="bold", pad_edge=False)
        for header in headers:  # a fitted table is cut already: one line a row, as the plain one
            rich_table.add_column(header, no_wrap=fitting, overflow="ellipsis")
        for row in cells:
            rich_table.add_row(*(markup(cell) for cell in row))
        Console().print(rich_table)
        return
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    for row in [headers, *cells]:
        say("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def _fitted_table(headers: list[str], cells: list[list[str]], fit: Sequence[str]
                  ) -> tuple[list[str], list[list[str]]]:
    """The table within the terminal: a column of `fit` with nothing in it left out first
    (COUNTERS: `-` all down), then the columns of `fit` cut with `…` in turn."""
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    for name in fit:
        i = headers.index(name) if name in headers else -1
        if i >= 0 and _overflow(widths) > 0 and all(row[i] == "-" for row in cells):
            del headers[i], widths[i]
            cells = [row[:i] + row[i + 1:] for row in cells]
    widths = _fitted(widths, [headers.index(name) for name in fit if name in headers], headers)
    return headers, [[cell if len(cell) <= widths[i] else cell[: widths[i] - 1] + "…" for i, cell in enumerate(row)]
                     for row in cells]


def say_fitted(message: str) -> None:
    """A line of prose: on a terminal, wrapped at its width (`COLUMNS`), the lines after the
    first indented; whole into a pipe or a file."""
    if not sys.stdout.isatty():
        say(message)
        return
    import shutil  # only for a line that fits the terminal
    import textwrap

    width = shutil.get_terminal_size((100, 24)).columns
    for line in textwrap.wrap(printable(message), width=max(width, 20), subsequent_indent="  ",
                              break_on_hyphens=False) or [""]:
        say(line)


def _overflow(widths: list[int]) -> int:
    """By how many characters a row of these column widths overflows the terminal."""
    import shutil  # only for a table that fits the terminal

    return sum(widths) + 2 * (len(widths) - 1) - shutil.get_terminal_size((100, 24)).columns


def _fitted(widths: list[int], order: list[int], headers: Sequence[str]) -> list[int]:
    """Column widths within the terminal: the columns of `order` cut in turn, none narrower than
    its header or 8 characters."""
    over = _overflow(widths)
    widths = list(widths)
    for i in order:
        if over <= 0:
            break
        cut = min(over, max(0, widths[i] - max(len(headers[i]), 8)))
        widths[i] -= cut
        over -= cut
    return widths


# --- text given in a file or on stdin -----------------------------------------------------------

def read_text_input(path: Path | None, limit: int, what: str) -> str:
    """Text from `path` (None or `-`: stdin), UTF-8, one trailing line break removed (as `$(...)`
    would), at most `limit` bytes then: the read stops just past that (exit 2 beyond: `--text-file
    /dev/zero` or `yes |` must not run out of memory). A missing file is exit 3, like a missing
    image; a closed stdin is exit 2."""
    if path is None or str(path) == "-":
        origin = "stdin"
        if sys.stdin is None:  # started with `<&-`
            raise UsageError(f"{what}: standard input is closed")
        raw = sys.stdin.buffer.read(limit + 3)
    else:
        origin = str(path)
        try:
            with open(path, "rb") as handle:  # not only regular files: `--text-file <(cmd)` is a pipe
                raw = handle.read(limit + 3)
        except FileNotFoundError:
            raise NotFoundError(f"{what} {path} not found", file=path) from None
        except IsADirectoryError:
            raise UsageError(f"{what} {path} is a directory") from None
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, f"cannot read {what}") from None
    for ending in (b"\r\n", b"\n"):
        if raw.endswith(ending):
            raw = raw[: -len(ending)]
            break
    if len(raw) > limit:
        raise UsageError(f"{what} from {origin} is larger than {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"text from {origin} is not valid UTF-8") from None


# --- where a command acts ------------------------------------------------------------------------

def in_session(report: Reporter | None = None) -> dict[str, Any]:
    """The API keywords naming the session a command acts on (from --session, --project), its
    clock and where its notes go."""
    s = settings()
    return {"session": s.session, "project": s.project, "clock": s.clock, "report": report or reporter()}


def in_workspace() -> dict[str, Any]:
    """The API keywords naming the workspace a cron command acts on (--workspace, --project)."""
    s = settings()
    return {"workspace": s.workspace, "project": s.project, "session": s.session}

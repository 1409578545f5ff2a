"""Generate man pages (man/), shell completions (completions/) and the CLI reference
(docs/cli.md) from the click command tree, and the example output in the Markdown files (the
blocks between `[[[cog` and `[[[end]]]` markers, which run real commands through
tools/examples.py). The test suite fails when the checked-in files differ from what this script
produces, so run it after changing a command, an option, a help text or an output:

    python tools/gen_docs.py            # rewrite the files
    python tools/gen_docs.py --check    # exit 1 if any file is out of date
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import click
from cogapp import Cog

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # sxctl from this checkout; `import examples` in cog blocks

from sxctl import __version__  # noqa: E402
from sxctl.cli.environment import ENVIRONMENT  # noqa: E402
from sxctl.cli.root import cli  # noqa: E402
from sxctl.errors import EXIT_MEANINGS  # noqa: E402

WIDTH = 100
SHELLS = {"bash": "sxctl.bash", "zsh": "_sxctl", "fish": "sxctl.fish"}


def _context(command: click.Command, path: list[str], parent: click.Context | None = None) -> click.Context:
    """The context click itself makes for `--help` (with the command's context_settings, such as
    `-h`), at a fixed width so the output does not depend on the terminal."""
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return command.context_class(command, info_name=path[-1], parent=parent, **settings)


def walk(command: click.Command = cli, path: list[str] | None = None, parent: click.Context | None = None):
    """(path, command, context) for every command, depth first, in name order (aliases skipped)."""
    path = path or ["sxctl"]
    ctx = _context(command, path, parent)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub.name != name:  # `cb` is an alias of `callbacks`
                continue
            yield from walk(sub, [*path, name], ctx)


# --- man pages ----------------------------------------------------------------------------------

def _roff(text: str) -> str:
    """Escape for roff: backslashes, hyphens, leading dots, and non-ASCII as \\[uXXXX]."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(ch if ord(ch) < 128 else f"\\[u{ord(ch):04X}]" for ch in text)
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def _help_roff(help_text: str) -> list[str]:
    """click help text to roff: `\\b` blocks keep their lines (examples), the rest flows."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(click.unstyle(help_text or ""))):
        if block.startswith("\b"):
            lines = block.split("\n")[1:]
            out += [".PP", ".nf", *(_roff(line.rstrip()) for line in lines), ".fi"]
        else:
            out += [".PP", _roff(" ".join(line.strip() for line in block.split("\n")))]
    return out


def _options_roff(command: click.Command, ctx: click.Context) -> list[str]:
    out: list[str] = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        out += [".TP", f"\\fB{_roff(record[0])}\\fR", _roff(record[1] or "")]
    return out


def man_page(path: list[str], command: click.Command, ctx: click.Context) -> str:
    name = "-".join(path)
    summary = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())  # never cut
    lines = [f'.TH {name.upper()} 1 "" "sxctl {__version__}" "sxctl manual"', ".SH NAME",
             f"{_roff(name)} \\- {_roff(summary)}", ".SH SYNOPSIS",
             f".B {_roff(' '.join(path))}", _roff(" ".join(command.collect_usage_pieces(ctx))), ".SH DESCRIPTION",
             *_help_roff(command.help), ".SH OPTIONS", *_options_roff(command, ctx)]
    if isinstance(command, click.Group):
        lines.append(".SH COMMANDS")
        for sub_path, sub, sub_ctx in walk(command, path, ctx.parent):
            if sub is command:
                continue
            if isinstance(sub, click.Group) and len(path) == 1:
                lines += [".SS " + _roff(" ".join(sub_path)),
                          f"{_roff(sub.get_short_help_str(100))} See \\fB{'-'.join(sub_path)}\\fR(1)."]
                continue
            if len(sub_path) > len(path) + 1 and len(path) == 1:
                continue
            lines += [".SS " + _roff(" ".join(sub_path) + " " + " ".join(sub.collect_usage_pieces(sub_ctx))),
                      *_help_roff(sub.help), *_options_roff(sub, sub_ctx)]
    lines.append(".SH ENVIRONMENT")
    for variable, meaning in ENVIRONMENT.items():
        lines += [".TP", f"\\fB{_roff(variable)}\\fR", _roff(meaning)]
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_MEANINGS.items():
        lines += [".TP", f"\\fB{code}\\fR", _roff(meaning.replace("`", ""))]
    lines += [".SH SEE ALSO", "\\fBsxctl\\fR(1), the CLI reference docs/cli.md"]
    return "\n".join(lines) + "\n"


def man_pages() -> dict[str, str]:
    pages = {}
    for path, command, ctx in walk():
        if len(path) == 1 or (len(path) == 2 and isinstance(command, click.Group)):
            pages["-".join(path) + ".1"] = man_page(path, command, ctx)
    return pages


# --- completions and the reference ---------------------------------------------------------------

def completion(shell: str) -> str:
    env = {**os.environ, "_SXCTL_COMPLETE": f"{shell}_source"}
    return subprocess.run([sys.executable, "-m", "sxctl"], env=env, capture_output=True, text=True, cwd=REPO,
                          check=True).stdout


def cli_reference() -> str:
    parts = ["# sxctl command reference", "",
             "Generated from the help texts by `tools/gen_docs.py`; `sxctl COMMAND --help` prints the same.", ""]
    for path, command, ctx in walk():
        parts += [f"## {' '.join(path)}", "", "```", command.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(parts)


# --- example output in the Markdown files ---------------------------------------------------------

def with_examples() -> dict[Path, str]:
    """Every Markdown file with cog blocks, with their output regenerated."""
    files = {}
    for path in sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").rglob("*.md")]):
        text = path.read_text() if path.is_file() else ""
        if "<!-- [[[cog" in text:  # a block, not a mention (CONTRIBUTING.md)
            files[path] = Cog().process_string(text, fname=str(path.relative_to(REPO)))
    return files


def generated() -> dict[Path, str]:
    files = {REPO / "man" / name: text for name, text in man_pages().items()}
    files.update({REPO / "completions" / filename: completion(shell) for shell, filename in SHELLS.items()})
    files[REPO / "docs" / "cli.md"] = cli_reference()
    files.update(with_examples())
    return files


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in generated().items():
        current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    for path in stale:
        print(f"{'out of date' if check else 'wrote'}: {path.relative_to(REPO)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())

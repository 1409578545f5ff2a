"""Run real `sxctl` commands for the documentation's examples (cog calls `show` from the
Markdown files: see CONTRIBUTING.md). Each `show` builds a throw-away project with one live
session, a fixed clock and fixed ids, runs the commands in this process, and returns them as a
shell transcript. The project's folder is printed as /home/dev/myapp, so the output is the same on
every machine and `python tools/gen_docs.py --check` fails when a command's output changes."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from click.testing import CliRunner

from sxctl.cli.output import Settings
from sxctl.cli.root import cli
from sxctl.clock import FakeClock
from sxctl.errors import EXIT_BY_CODE

SHOWN_ROOT = "/home/dev/myapp"
SESSION = "2026_09_21_quiet_euler"
NOW_MS = 1_789_974_090_000  # 2026-09-21T06:21:30Z, the spec's examples' clock
#: the fixed environment: no user variables, UTC, no colour, a wide terminal
ENVIRONMENT = {"TZ": "UTC", "NO_COLOR": "1", "COLUMNS": "100", "LANG": "C.UTF-8"}


def _ids() -> Iterator[uuid.UUID]:
    """uuid4 replacement: the same ids, in the same order, on every run."""
    number = 0
    while True:
        number += 1
        yield uuid.UUID(int=number, version=4)


@contextlib.contextmanager
def _project() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sxctl-doc-") as folder:
        root = Path(os.path.realpath(folder)) / "myapp"
        session = root / ".scorpiox" / "sessions" / SESSION
        session.mkdir(parents=True)
        home = Path(folder) / "home"
        home.mkdir()
        stats = {"updated_ms": NOW_MS, "model": "sxctl-reference", "cwd": str(root)}
        (session / "stats.json").write_text(json.dumps(stats))
        ids = _ids()
        with mock.patch("uuid.uuid4", lambda: next(ids)):
            yield root


def _run(root: Path, clock: FakeClock, line: str) -> str:
    argv = shlex.split(line)
    assert argv[0] == "sxctl", line
    keep = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root.parent / "home")}
    env: dict[str, str | None] = dict.fromkeys(os.environ)
    env.update({**keep, **ENVIRONMENT})
    previous = os.getcwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(cli, argv[1:], env=env, obj=Settings(clock=clock), input=b"")
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.stdout.replace(str(root), SHOWN_ROOT)


def transcript(*lines: str, advance: float = 0) -> str:
    """`$ command` and its stdout for each line, run in one fresh project; the clock moves
    `advance` seconds after each command."""
    clock = FakeClock(NOW_MS)
    shown = []
    with _project() as root:
        for line in lines:
            shown.append(f"$ {line}\n{_run(root, clock, line)}")
            clock.advance(advance)
    return "".join(shown)


def show(*lines: str, advance: float = 0, lang: str = "console") -> None:
    """Print a fenced block for cog: the commands and what they printed."""
    import cog  # only importable while cogapp runs a block

    cog.out(f"```{lang}\n{transcript(*lines, advance=advance)}```\n")


def error_codes() -> None:
    """Print the table of `error.code` strings by exit status, for cog."""
    import cog  # only importable while cogapp runs a block

    codes: dict[int, list[str]] = {}
    for code, status in EXIT_BY_CODE.items():
        codes.setdefault(status, []).append(f"`{code}`")
    cog.out("| exit | codes |\n|---|---|\n")
    cog.out("".join(f"| {status} | {', '.join(names)} |\n" for status, names in sorted(codes.items())))

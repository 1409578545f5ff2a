"""The plain `inbox send` (sxctl/cli/plain_send.py) runs without click, and must do exactly what
the click command does with the same command line: the same files, the same stdout and stderr,
the same exit status. Random command lines drawn from plain and not-plain pieces run both ways,
in-process, each on a fresh copy of one project."""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import click
from click.testing import CliRunner

from sxctl.cli import main, plain_send
from sxctl.cli.output import _GLOBAL_OPTIONS
from sxctl.cli.root import cli
from tests.conftest import SID

#: a time-based stem, and an instant in milliseconds: what differs between two runs
VARYING = re.compile(rb"\d{10}_\d{9}|\b1\d{12}\b")

GLOBAL_PIECES = [["-q"], ["--quiet"], ["-v"], ["--verbose"], ["--json"], ["--no-color"], ["--session", SID],
                 [f"--session={SID}"], ["--session", "2026_01_01_no_such"], ["--session", ""], ["--project", "."],
                 ["--project=."], ["--project", "missing"], ["--agent", "x"], ["--workspace", "."], ["--session"],
                 ["-qv"], ["--json=yes"], ["-V"]]
SEND_PIECES = [["--mode", "queue"], ["--mode=interrupt"], ["--mode", "auto"], ["--mode", "QUEUE"], ["--mode", "later"],
               ["--priority", "3"], ["--priority=0"], ["--priority", "10"], ["--priority", "-1"], ["--priority", "03"],
               ["--priority", " 7"], ["--stem", "custom_01"], ["--stem", "bad stem!"], ["--stem", "-x"],
               ["--key", "k1"], ["--key="], ["--key", "k1"], ["--no-wait"], ["--no-wait=1"], ["--wait", "x"],
               ["--follow"], ["--text-file", "missing.txt"], ["-h"], ["--"]]
TEXTS = ["hi", "~later", "two words", "-x", "", "é ünïcode ✓", "a\x1b[2Jb", "line\nbreak", "-", "~", "x" * 70_000]


def _plain(piece: list[str]) -> bool:
    return plain_send.parse(["inbox", "send", "hi", *piece]) is not None


def command_line(rng: random.Random) -> list[str]:
    """Global pieces, `inbox`, global pieces, `send`, then a shuffle of send pieces, global pieces
    and (mostly) one text; now and then a piece is dropped, doubled or misplaced. Half the lines
    are drawn from the pieces a plain form takes only."""
    only_plain = rng.random() < 0.5

    def some(pieces: list[list[str]], most: int) -> list[str]:
        pieces = [piece for piece in pieces if _plain(piece)] if only_plain else pieces
        return [word for piece in rng.sample(pieces, rng.randint(0, most)) for word in piece]

    tail = [some(SEND_PIECES, 3), some(GLOBAL_PIECES, 1)]
    if rng.random() < 0.9:
        tail.append([rng.choice(TEXTS)])
    if rng.random() < 0.1:
        tail.append([rng.choice(TEXTS)])
    rng.shuffle(tail)
    args = [*some(GLOBAL_PIECES, 2), "inbox", *some(GLOBAL_PIECES, 1), "send", *[w for part in tail for w in part]]
    if rng.random() < 0.05:
        args.remove(rng.choice(["inbox", "send"]))
    return args


def run(way, args: list[str], folder: Path, env: dict[str, str]) -> tuple[int, bytes, bytes, dict[bytes, bytes]]:
    """(exit status, stdout, stderr, the project's files), the varying parts masked (times, and
    the folder of the copy)."""
    runner = CliRunner()
    previous = os.getcwd()
    os.chdir(folder)
    try:
        with runner.isolation(input=b"", env={**dict.fromkeys(os.environ), **env}) as (out, err, _):
            try:
                way(args)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        os.chdir(previous)

    def masked(data: bytes) -> bytes:
        return VARYING.sub(b"<t>", data.replace(os.fsencode(folder), b"<root>"))

    files = {masked(os.fsencode(path.relative_to(folder))): masked(path.read_bytes())
             for path in sorted(folder.rglob("*")) if path.is_file()}
    return code, masked(stdout), masked(stderr), files


def test_the_plain_send_does_what_the_click_command_does(project, tmp_path):
    seed = int(os.environ.get("SXCTL_TEST_SEED", random.randrange(1 << 30)))
    print(f"\nseed {seed} (SXCTL_TEST_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    project.session(live=None)  # no stats: no wait, and no age in a line that a second would change
    env = project.env()
    plain = 0
    for n in range(120):
        args = command_line(rng)
        results = []
        for name, way in (("click", lambda a: cli.main(args=a)), ("plain", main)):
            folder = tmp_path / f"{name}{n}"
            shutil.copytree(project.root, folder, symlinks=True)
            results.append(run(way, args, folder, env))
        assert results[0] == results[1], (seed, args)
        plain += plain_send.parse(args) is not None
    assert 30 <= plain <= 100, plain  # both kinds of command line were drawn


def test_the_plain_forms_are_the_ones_named_and_no_other():
    forms = {
        ("inbox", "send", "hi"): True,
        ("-q", "--session", SID, "inbox", "--json", "send", "--no-wait", "hi", "--mode=queue"): True,
        ("inbox", "send", "hi", "--priority", "9", "--key", "k", "--stem", "s", "-v"): True,
        ("--session", SID, "inbox", "send", "--follow", "hi"): True,
        ("inbox", "send"): False,  # no text: stdin, or an image
        ("inbox", "send", "-"): False,  # stdin
        ("inbox", "send", "a", "b"): False,
        ("inbox", "send", "hi", "--image", "x.png"): False,
        ("inbox", "send", "hi", "--wait", "5"): False,
        ("inbox", "send", "hi", "--priority", "10"): False,
        ("inbox", "send", "hi", "--mode", "Queue"): False,
        ("inbox", "send", "hi", "--key", "-q"): False,
        ("inbox", "send", "hi", "--"): False,
        ("inbox", "send", "hi", "-h"): False,
        ("inbox", "list"): False,
        ("send", "hi"): False,
        ("--no-wait", "inbox", "send", "hi"): False,  # a send option before `send`: click's error
        ("inbox", "send", "hi", "--session"): False,
    }
    assert {form: plain_send.parse(list(form)) is not None for form in forms} == forms


def test_completion_is_never_taken_for_a_plain_send(monkeypatch):
    monkeypatch.setenv("_SXCTL_COMPLETE", "bash_complete")
    assert plain_send.parse(["inbox", "send", "hi"]) is None


def test_the_options_named_are_the_click_commands_own():
    """Each option the plain form takes is an option of `sxctl inbox send` of the same kind (a flag
    or one value), and the global ones are exactly the click command's global options."""
    command = cli.get_command(click.Context(cli), "inbox").get_command(click.Context(cli), "send")
    kinds = {opt: param.is_flag for param in command.params if isinstance(param, click.Option) for opt in param.opts}
    named = {**dict.fromkeys(plain_send.GLOBAL_VALUES, False), **dict.fromkeys(plain_send.GLOBAL_FLAGS, True),
             **dict.fromkeys(plain_send.SEND_VALUES, False), **dict.fromkeys(plain_send.SEND_FLAGS, True)}
    assert {opt: kinds.get(opt) for opt in named} == named
    assert {opt for option in _GLOBAL_OPTIONS for opt in option.opts} == \
        set(plain_send.GLOBAL_VALUES) | set(plain_send.GLOBAL_FLAGS)

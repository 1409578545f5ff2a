"""The command-line contract: help, global options, JSON errors, exit codes, start-up imports."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import click
import pytest

from sxctl.cli.root import cli
from tests.conftest import REPO


def _leaves(group: click.Group, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = (*prefix, name)
        yield path, command
        if isinstance(command, click.Group):
            yield from _leaves(command, path)


ALL_COMMANDS = list(_leaves(cli))


@pytest.mark.parametrize(("path", "command"), ALL_COMMANDS, ids=[" ".join(p) for p, _ in ALL_COMMANDS])
def test_every_command_has_help_and_an_example(path, command):
    assert command.help and command.help.strip(), f"sxctl {' '.join(path)} has no help"
    assert "Example" in command.help, f"sxctl {' '.join(path)} has no example in its help"
    names = {opt for param in command.params for opt in getattr(param, "opts", [])}
    assert {"--json", "--project", "--session", "-q", "-v", "--no-color"} <= names


def test_help_and_version(project):
    result = project.run("--help")
    assert result.code == 0 and "inbox" in result.out and "session" in result.out
    assert project.run("inbox", "send", "--help").code == 0
    assert "--fault-inject" not in project.run("inbox", "send", "--help").out
    version = project.run("--version")
    assert version.code == 0 and re.match(r"sxctl, version \d+\.\d+\.\d+", version.out)


def test_global_options_before_the_group_and_on_the_leaf(project):
    project.session("2026_09_20_cool_newton")
    project.session("2026_09_21_quiet_euler")
    before = project.run("--json", "--session", "2026_09_20_cool_newton", "session", "which")
    after = project.run("session", "which", "--json", "--session", "2026_09_20_cool_newton")
    middle = project.run("session", "--json", "which", "--session", "2026_09_20_cool_newton")
    assert before.json() == after.json() == middle.json()
    assert before.json()["session"] == "2026_09_20_cool_newton"


def test_usage_errors_are_exit_2_one_line_and_json_when_asked(project):
    result = project.run("inbox", "frobnicate")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1
    assert result.err.startswith("sxctl: ") and "sxctl inbox --help" in result.err
    doc = project.run("inbox", "send", "--nope", "--json").json()
    assert doc["ok"] is False and doc["error"]["code"] == "usage" and doc["error"]["exit"] == 2
    bad_value = project.run("inbox", "list", "--limit", "x", "--json").json()
    assert bad_value["error"]["code"] == "invalid_value"


def test_json_output_is_exactly_one_document(project):
    project.session()
    result = project.run("session", "list", "--json")
    assert result.out.count("\n") == 1 and json.loads(result.out)["ok"] is True
    assert "\x1b[" not in result.out


def test_no_color_env_and_non_tty_output_is_plain(project):
    project.session()
    for env in (project.env(), project.env(NO_COLOR="")):
        assert "\x1b[" not in project.run("session", "list", env=env).out


def test_internal_errors_are_exit_1_without_traceback(project, tmp_path):
    folder = project.session()
    (folder / "inbox").write_text("a file where the inbox folder should be")
    result = project.run("inbox", "send", "x", "--no-wait")
    assert result.code in (1, 5) and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) <= 2


def _imports_of(module_file) -> set[str]:
    tree = ast.parse(module_file.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_never_imports_click_or_rich():
    core = [p for p in (REPO / "sxctl").rglob("*.py") if "cli" not in p.relative_to(REPO / "sxctl").parts]
    assert core
    for path in core:
        assert not _imports_of(path) & {"click", "rich"}, path


def test_inbox_send_imports_no_heavy_module(project):
    project.session(live=False)
    code = (
        "import sys\nfrom sxctl.cli import main\n"
        "try:\n    main(['inbox', 'send', 'x', '--no-wait', '-q'])\n"
        "except SystemExit as e:\n"
        "    heavy = sorted(m for m in ('rich', 'croniter', 'dateutil', 'filelock') if m in sys.modules)\n"
        "    print(e.code, heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=project.root, env=project.env(),
                            capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "0 []", result.stderr


def test_readme_setup_commands_and_ci_agree():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", readme, re.S)
    assert blocks, "README has no command block"
    setup = [line for line in blocks[0].splitlines() if line.strip() and not line.startswith("#")]
    assert len(setup) == 2, "the first README block must hold exactly the two set-up commands"
    assert "sxctl demo" in setup[0] and "pytest" in setup[1]
    # .ci/run takes its commands from the README with this awk program: the same two lines
    ci = (REPO / ".ci" / "run").read_text()
    program = re.search(r"awk '([^']*)' README.md", ci).group(1)
    extracted = subprocess.run(["awk", program, str(REPO / "README.md")], capture_output=True, text=True, check=True)
    assert extracted.stdout.splitlines() == setup
    assert "git clone" in ci and "mktemp -d" in ci  # in a fresh clone, away from this checkout


@pytest.mark.parametrize("args", [[], ["-q"], ["--no-color", "-v"], ["cron"], ["cron", "-q"], ["inbox", "--no-color"]])
def test_a_group_without_a_command_shows_its_help_and_exits_0(project, args):
    result = project.run(*args)
    assert result.code == 0 and result.out.startswith("Usage: sxctl") and result.err == ""


@pytest.mark.parametrize("args", [["--json"], ["--json", "cron"], ["cron", "--json"], ["inbox", "--json", "-q"]])
def test_a_group_without_a_command_with_json_is_a_json_usage_error(project, args):
    result = project.run(*args)
    assert result.code == 2
    error = result.json()["error"]
    assert error["code"] == "usage" and error["message"].startswith("Missing command. (see 'sxctl")


def test_every_length_of_time_option_takes_one_duration_type():
    from sxctl.cli.output import Duration

    parsed_by_the_api = {"--every", "--in"}  # a job's schedule: the API parses it with the same DURATION grammar
    seen = set()
    for path, command in ALL_COMMANDS:
        for param in command.params:
            where = f"sxctl {' '.join(path)} {getattr(param, 'opts', ['?'])[0]}"
            assert param.metavar != "SECONDS", where
            if param.metavar == "DURATION" and param.opts[0] not in parsed_by_the_api:
                assert isinstance(param.type, Duration), where
                seen.add(param.opts[0])
    assert {"--idle-exit", "--turn-seconds", "--timeout-seconds", "--wake-gate-timeout", "--wait", "--verify",
            "--lock-wait", "--duration", "--catchup-after"} <= seen


def test_idle_exit_and_the_job_seconds_take_units(project):
    project.session("s1", live=False)
    assert project.run("--session", "s1", "agent", "run", "--idle-exit", "5x").code == 2
    result = project.run("--session", "s1", "agent", "run", "--idle-exit", "50ms", "--json")
    assert result.code == 0, result.err
    assert project.run("cron", "init", "-q").code == 0
    project.run("cron", "add", "u", "--every", "1h", "--payload", "agent-turn", "--text", "hi", "--timeout-seconds", "10m")
    job = next(j for j in json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())["jobs"]
               if j["name"] == "u")
    assert job["payload"]["timeoutSeconds"] == 600
    half = project.run("cron", "add", "v", "--every", "1h", "--payload", "agent-turn", "--text", "hi",
                       "--timeout-seconds", "1.5s")
    assert half.code == 2 and "a whole number of seconds" in half.err


def test_json_help_says_json_lines_on_the_commands_that_stream(project):
    for args in (["watch"], ["agent", "run"], ["demo"]):
        assert "Print JSON Lines (one JSON document per event)" in " ".join(project.run(*args, "--help").out.split())
    assert "JSON Lines (one per event) with --follow" in " ".join(project.run("inbox", "wait", "--help").out.split())
    for args in (["inbox", "list"], ["cron", "list"], ["status"]):
        shown = " ".join(project.run(*args, "--help").out.split())
        assert "--json Print one JSON document on stdout." in shown and "JSON Lines" not in shown


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["cron", "ad"], "sxctl: No such command 'ad'. Did you mean 'add'? (see 'sxctl cron --help')", None),
    (["--session", "2026_09_21_quiet_eulr", "inbox", "list"], None,
     "did you mean 2026_09_21_quiet_euler? (`sxctl session list` shows them)"),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x"], "sxctl: Invalid cron schedule input",
     "a job needs one schedule: --cron EXPR, --every DURATION, --at TIME or --in DURATION"),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x", "--at", "next week"],
     "sxctl: Invalid naive wall-clock timestamp", "accepted: 2026-09-21T09:00 (a wall time, read in --tz"),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x", "--at", "tomorrow"],
     "sxctl: Invalid naive wall-clock timestamp", "sxctl reads a date and a time of day, not words: tomorrow in "),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x", "--at", "2026-12-03T25:00"],
     "sxctl: Invalid naive wall-clock timestamp", "25:00 is not a time of day (hours 00-23, minutes 00-59)"),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x", "--at", "2026-12-03T10:00 CEST"],
     "sxctl: Invalid naive wall-clock timestamp", "zone abbreviations such as 'CEST' are ambiguous"),
    (["cron", "add", "j", "--payload", "agent-turn", "--text", "x", "--cron", "0 9 * * *", "--tz", "America/NewYork"],
     "sxctl: Invalid cron timezone", "did you mean America/New_York?"),
])
def test_mistakes_get_a_did_you_mean_or_the_accepted_forms(project, args, message, hint):
    project.session("2026_09_21_quiet_euler", live=False)
    project.run("cron", "init", "-q")
    result = project.run(*args)
    assert result.code in (2, 3) and "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    if message is not None:
        assert lines[0] == message
    if hint is not None:
        assert lines[-1].startswith(f"sxctl: hint: {hint}"), lines
        assert result.code == project.run(*args, "--json").json()["error"]["exit"]

"""Every scheduler line of the docs, the man pages and `--help` runs the way cron runs it, after
the README's own install: under `env -i` with only what cron sets (HOME, SHELL=/bin/sh,
PATH=/usr/bin:/bin, LOGNAME), from the home folder, through /bin/sh -c. Nothing that cron would
not have is put on PATH, and no PYTHONPATH: the line itself must find sxctl.

The scheduler guide's lines (docs/guides/scheduler.md) are what `sxctl cron export` writes for a
clone in /home/dev/sxctl (the README's first command makes /home/dev/sxctl/.venv) and a project in /home/dev/myapp; the test
replaces those two paths, as a reader would, with a real project and a clone whose `.venv` is the
virtual environment this suite runs in."""

from __future__ import annotations

import json
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sxctl import engines
from tests.conftest import REPO, heartbeat_file, now_ms
from tests.core.engines.test_engines_hostile import cron_runs

CLONE, PROJECT = "/home/dev/sxctl", "/home/dev/myapp"
_NUMBERS, _NAMES = r"[0-9*][0-9*/,-]*", r"[0-9A-Za-z*/,-]+"
#: a crontab entry: five time fields (minute, hour and day of month in numbers) or an @keyword,
#: then the command
ENTRY = re.compile(rf"^\s*(?:@[a-z]+|(?:{_NUMBERS}[ \t]+){{3}}{_NAMES}[ \t]+{_NAMES})[ \t]+(?P<command>.*\S)")


GUIDE = REPO / "docs" / "guides" / "scheduler.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), re.S)


def _help_texts() -> dict[str, str]:
    """Every command's --help, as click renders it (what the man pages and docs/cli.md show), in
    the contexts click makes (click caches each command's help option from its first context)."""
    import click

    from sxctl.cli.root import cli

    texts: dict[str, str] = {}

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = command.context_class(command, info_name=path[-1], parent=parent, **command.context_settings)
        texts[" ".join(path)] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name], ctx)

    walk(cli, ["sxctl"], None)
    return texts


def _roff_text(page: str) -> str:
    return page.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")


def scheduler_lines() -> dict[str, list[str]]:
    """source -> the scheduler lines it shows: crontab entries that run sxctl, and ExecStart=."""
    sources = {str(path.relative_to(REPO)): path.read_text()
               for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]}
    sources.update({f"man/{page.name}": _roff_text(page.read_text()) for page in sorted((REPO / "man").glob("*.1"))})
    sources.update({f"{path} --help": text for path, text in _help_texts().items()})
    found: dict[str, list[str]] = {}
    for source, text in sources.items():
        for line in text.splitlines():
            entry = ENTRY.match(line)
            if (entry and "sxctl" in entry["command"]) or line.strip().startswith("ExecStart="):
                found.setdefault(source, []).append(line.strip())
    return found


# --- the README's install, and cron's environment -----------------------------------------------

@pytest.fixture
def cron_world(project, tmp_path):
    """(the project with a due job and a live session, the clone folder, cron's environment)."""
    venv = Path(sys.prefix)
    assert sys.prefix != sys.base_prefix and (venv / "bin" / "python").exists(), (
        "run the suite from the README's install (.venv/bin/python -m pytest): the scheduler lines name "
        "the venv's interpreter")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(venv)  # /home/dev/sxctl/.venv, as the README's first command made it
    for path in (project.root, clone):
        assert shlex.quote(str(path)) == str(path), "the test's paths must need no quoting"
    home = tmp_path / "cron-home"
    home.mkdir()
    (home / "myapp").symlink_to(project.root)  # `~/myapp`, for a line written that way
    user = pwd.getpwuid(__import__("os").getuid()).pw_name
    env = {"HOME": str(home), "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin", "LOGNAME": user}
    folder = project.session()
    assert project.run("cron", "add", "ping", "--every", "1h", "--payload", "heartbeat-event",
                       "--text", "from cron").code == 0
    store = project.root / ".scheduler" / "cron-jobs.json"
    data = json.loads(store.read_text())
    data["jobs"][0]["lifecycle"]["nextRunAtMs"] = now_ms() - 1000
    store.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return project, folder, clone, env


def _replaced(text: str, project, clone: Path) -> str:
    return text.replace(CLONE, str(clone)).replace(PROJECT, str(project.root))


def _dispatched(folder: Path) -> list[str]:
    return [json.loads(p.read_text())["text"] for p in sorted((folder / "inbox").glob("*.json"))]


def _as_cron(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """What cron does with an entry's command: `SHELL -c command`, in HOME, with only its variables."""
    return subprocess.run(["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", command],
                          capture_output=True, text=True, timeout=120, cwd=env["HOME"])


def _run_entry(line: str, world) -> None:
    project, folder, clone, env = world
    command, stdin = cron_runs(ENTRY.match(line)["command"])
    assert stdin is None, f"cron cuts {line!r} at a '%'"
    done = _as_cron(_replaced(command, project, clone), env)
    assert done.returncode == 0, (line, done.stderr)
    assert (done.stdout, done.stderr) == ("", ""), line  # cron would mail anything printed
    assert _dispatched(folder) == ["from cron"], line
    beat = json.loads(heartbeat_file(project.root).read_text())
    assert beat["outcome"] == "ok" and beat["detail"].startswith("1 run(s)")


def _run_exec_start(line: str, world, workdir: str) -> None:
    project, folder, clone, env = world
    argv = shlex.split(_replaced(line.split("=", 1)[1], project, clone))
    done = subprocess.run(["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv], capture_output=True,
                          text=True, timeout=120, cwd=_replaced(workdir, project, clone))
    assert done.returncode == 0, (line, done.stderr)
    assert done.stdout.startswith("ran ping (scheduled): dispatched"), done.stdout
    assert _dispatched(folder) == ["from cron"], line


# --- the scheduler guide's lines ---------------------------------------------------------------------------

@pytest.mark.real_time
def test_the_guides_crontab_entry_runs_under_crons_environment_and_logs(cron_world):
    project, folder, clone, env = cron_world
    [entry] = [line for line in _blocks("crontab")[0].splitlines() if ENTRY.match(line)]
    _run_entry(entry, cron_world)
    [log] = (Path(env["HOME"]) / ".local" / "state" / "sxctl").glob("tick-*.log")  # its folder did not exist
    [line] = log.read_text().splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d ran ping \(scheduled\): dispatched → \S+ \(\w+\)", line)


@pytest.mark.real_time
def test_the_guides_systemd_service_runs_under_a_bare_environment(cron_world, tmp_path):
    project, folder, clone, env = cron_world
    [service] = [b for b in _blocks("ini") if "[Service]" in b]
    [timer] = [b for b in _blocks("ini") if "[Timer]" in b]
    settings = dict(line.split("=", 1) for line in service.splitlines() if "=" in line and not line.startswith("#"))
    assert settings["Type"] == "oneshot"
    units = tmp_path / "units"
    units.mkdir()
    for block in (service, timer):
        name = Path(block.splitlines()[0].split()[1]).name
        (units / name).write_text(_replaced(block.split("\n", 1)[1], project, clone))
    if shutil.which("systemd-analyze"):  # .ci/run installs it: the interpreter named must exist and run
        verify = subprocess.run(["systemd-analyze", "verify", *map(str, sorted(units.iterdir()))],
                                capture_output=True, text=True, cwd=units, timeout=60)
        assert verify.returncode == 0 and verify.stderr == "", verify.stderr
    _run_exec_start(f"ExecStart={settings['ExecStart']}", cron_world, settings["WorkingDirectory"])


def test_the_guide_shows_what_cron_export_writes_under_the_names_it_writes():
    tick = engines.TickCommand(Path(PROJECT), Path(PROJECT), python=f"{CLONE}/.venv/bin/python")
    assert _blocks("crontab") == [engines.crontab_block(tick)]
    units = engines.systemd_units(tick)
    shown = {}
    for block in _blocks("ini"):
        where, text = block.split("\n", 1)
        assert where.startswith("# ~/.config/systemd/user/"), where
        shown[where.rsplit("/", 1)[1]] = text
    assert shown == units
    guide = " ".join(GUIDE.read_text().split())
    default = engines.systemd_unit_dir(False, {"HOME": "/home/dev"})
    assert engines.command_line(engines.enable_commands(tick, False, default, {"HOME": "/home/dev"})) in guide
    assert "sxctl-tick.service" not in guide and "sxctl-tick.timer" not in guide


# --- every scheduler line anywhere ----------------------------------------------------------------

@pytest.mark.real_time
def test_every_scheduler_line_in_the_docs_man_pages_and_help_runs_under_crons_environment(cron_world):
    """A line that says `python3 -m sxctl` (or a bare `sxctl`) finds no sxctl under cron: the
    README's first command installs into .venv/, which cron's PATH does not have."""
    project, folder, clone, env = cron_world
    found = scheduler_lines()
    guide = str(GUIDE.relative_to(REPO))
    assert [line for line in found[guide] if ENTRY.match(line)], "the scheduler guide shows a crontab entry"
    assert [line for line in found[guide] if line.startswith("ExecStart=")], "and a systemd service"
    for source, lines in found.items():
        for line in lines:
            for message in (folder / "inbox").glob("*.json"):  # each line must dispatch the job itself
                message.unlink()
            store = project.root / ".scheduler" / "cron-jobs.json"
            data = json.loads(store.read_text())
            data["jobs"][0]["lifecycle"]["nextRunAtMs"] = now_ms() - 1000
            store.write_text(json.dumps(data, separators=(",", ":")) + "\n")
            try:
                if line.startswith("ExecStart="):
                    _run_exec_start(line, cron_world, PROJECT)
                else:
                    _run_entry(line, cron_world)
            except AssertionError as error:
                raise AssertionError(f"{source}: {line}\n{error}") from None

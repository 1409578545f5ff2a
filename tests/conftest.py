"""Shared fixtures, defined once for the whole suite: the hermetic environment every test runs in,
a throw-away project with sessions, the CLI run in-process (`invoke`, `project.run`) or as a real
process (`project.process`), and the stress figures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.forks import Forks

EXAMPLES = Path(__file__).resolve().parent / "data"  # the spec's example files, byte for byte
REPO = Path(__file__).resolve().parent.parent
SID = "2026_09_21_quiet_euler"  # the session of the examples, and of every test that needs one

# --- the hermetic environment ----------------------------------------------------------------------

# Every variable sxctl (or the agent and the scheduler it talks to) could read is one of these.
SCRUBBED_PREFIXES = ("SXCTL_", "SX_", "SCORPIOX_", "COMIS_")
# ... except the suite's own knobs, which sxctl never reads (a test checks that).
TEST_KNOBS = frozenset({"SXCTL_TEST_SEED", "SXCTL_MODEL_EXAMPLES", "SXCTL_MODEL_STEPS", "SXCTL_MODEL_SHRINK",
                        "SXCTL_STRESS_FIGURES", "SXCTL_TEST_INSTANT", "SXCTL_TEST_WORLDS"})
# What a terminal, a locale or a user's shell would change in the output: removed ...
SCRUBBED = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "ACTIVE_PROFILE", "PYTHONIOENCODING", "LANGUAGE", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR", "MANPAGER", "PAGER")
# ... or pinned.
PINNED = {"TZ": "UTC", "COLUMNS": "100", "LINES": "40", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


# The programs sxctl runs that act on the user's own machine: a test meets stand-ins first on
# PATH, never the user's crontab or systemd. The crontab stand-in keeps the table in a file beside
# the test's HOME (as crontab(1) of Debian's cron does: `-l` says "no crontab for USER" until `-`
# installed one); the systemctl stand-in refuses, so a test that wants systemctl brings its own.
STAND_INS = {
    "crontab": """#!/bin/sh
table='{table}'
case "$1" in
  -l) [ -f "$table" ] || {{ echo "no crontab for $(id -un)" >&2; exit 1; }}; cat "$table" ;;
  -) cat > "$table.new" && mv "$table.new" "$table" ;;
  *) echo "crontab stand-in: unsupported arguments: $*" >&2; exit 2 ;;
esac
""",
    "systemctl": """#!/bin/sh
echo "systemctl stand-in: the tests never run the real systemctl" >&2
exit 1
""",
}


def written_after_reads(folder: Path) -> None:
    """An agent reports after it reads: the session's stats.json is dated (on the file system's
    clock, which the spend attribution compares) after every message in its inbox/done/, even
    when the test wrote both within one tick of a coarse file clock."""
    try:
        newest = max((entry.stat(follow_symlinks=False).st_ctime_ns for entry in os.scandir(folder / "inbox" / "done")),
                     default=0)
    except OSError:
        return
    stats = folder / "stats.json"
    if stats.stat().st_mtime_ns // 1_000_000 <= newest // 1_000_000:
        later = (newest // 1_000_000 + 1) * 1_000_000
        os.utime(stats, ns=(later, later))


def example_table(dest: Path) -> Path:
    """The examples' callbacks.json copied to `dest`, dated at its own `updated_ms`, as the agent
    that wrote it left it: a copy dated now is a table changed after its recorded write, which a
    live agent ignores (callbacks.table.unpublished_edit)."""
    data = (EXAMPLES / "callbacks.json").read_bytes()
    dest.write_bytes(data)
    written = json.loads(data)["updated_ms"] * 1_000_000
    os.utime(dest, ns=(written, written))
    return dest


def heartbeat_file(root: Path) -> Path:
    """The heartbeat a pass on this host writes in the workspace at `root` (cron/run/heartbeat.py)."""
    from sxctl.cron.policy.hosts import this_host

    return root / ".scheduler" / "sxctl-tick" / f"{this_host(os.environ)}.json"


def scrubbed(name: str) -> bool:
    return (name.startswith(SCRUBBED_PREFIXES) and name not in TEST_KNOBS) or name in SCRUBBED


def hermetic_environ(base: Path, environ) -> dict[str, str]:
    """The environment of the `hermetic` fixture made from `environ`, in the folder `base` (its
    `home/`, `cwd/` and `bin/` with the stand-ins are made here)."""
    home = base / "home"
    home.mkdir()
    (base / "cwd").mkdir()
    stand_ins = base / "bin"
    stand_ins.mkdir()
    for program, script in STAND_INS.items():
        (stand_ins / program).write_text(script.format(table=base / "crontab"))
        (stand_ins / program).chmod(0o755)
    env = {name: value for name, value in environ.items() if not scrubbed(name)}
    env["HOME"] = str(home)
    env["PATH"] = f"{stand_ins}{os.pathsep}{environ.get('PATH', os.defpath)}"
    env.update(PINNED)
    return env


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test runs as a user with no sxctl/scorpiox/comis variables, a private empty HOME
    (the project fixture's too), UTC, a 100-column terminal that asked for nothing, a UTF-8 locale,
    stand-ins for crontab(1) and systemctl first on PATH, and a throw-away working folder; HOME
    and the folder are beside `tmp_path`, which stays the test's own. It is `os.environ` that is scrubbed, so the in-process CLI and every subprocess
    started from `os.environ` (or `project.env()`) see the same."""
    base = tmp_path_factory.mktemp("hermetic")
    env = hermetic_environ(base, os.environ)
    for name in list(os.environ):
        if name not in env:
            monkeypatch.delenv(name)
    for name, value in env.items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(base / "cwd")
    time.tzset()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield base / "home"
    monkeypatch.undo()
    time.tzset()
    leaked = [signal.Signals(n).name for n, handler in handlers.items() if signal.getsignal(n) is not handler]
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    assert not leaked, f"the test left its own handler of {', '.join(leaked)}: a later test's Ctrl-C would go to it"


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user with no sxctl/SCORPIOX variables and a private HOME (the hermetic
    environment, for a test that builds its own: a hypothesis test or one HOME per worker)."""
    env = {k: v for k, v in os.environ.items() if not scrubbed(k)}
    env.update(PINNED)
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Project:
    root: Path
    home: Path

    def session(self, session_id: str = SID, *, live: bool | None = True,
                age_ms: int = 0, stats: dict | None = None) -> Path:
        """A session folder; `live=None` means no stats.json (state unknown)."""
        folder = self.root / ".scorpiox" / "sessions" / session_id
        folder.mkdir(parents=True, exist_ok=True)
        if live is not None:
            updated = now_ms() - (age_ms if live else max(age_ms, 60_000))
            body = {"updated_ms": updated, "model": "test-model", "cwd": str(self.root), **(stats or {})}
            (folder / "stats.json").write_text(json.dumps(body))
            written_after_reads(folder)
        return folder

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(self.home, **extra)

    def run(self, *args: str, input: str | bytes | None = None, env: dict | None = None,
            cwd: Path | None = None, timeout: float = 60, clock=None, color: bool = False) -> Result:
        """`sxctl ARGS` in the project folder, in this process (click's CliRunner); `color=True`:
        the output as a terminal gets it.

        `--fault-inject` ends the process it runs in, so those runs always get one of their own."""
        if "--fault-inject" in args:
            return self.fork(*args, input=input, env=env, cwd=cwd, timeout=timeout)
        return run_cli(list(args), input=input, env=env or self.env(), cwd=cwd or self.root, clock=clock, color=color)

    def fork(self, *args: str, input: str | bytes | None = None, env: dict | None = None,
             cwd: Path | None = None, timeout: float = 60) -> Result:
        """`sxctl ARGS` in a process of its own, forked with sxctl imported (`tests/forks.py`):
        for kills and racing processes, where the interpreter's start is not what is tested."""
        return forks().run(list(args), input=input, env=env or self.env(), cwd=cwd or self.root, timeout=timeout)

    def process(self, *args: str, input: str | bytes | None = None, env: dict | None = None,
                cwd: Path | None = None, timeout: float = 60) -> Result:
        """`python -m sxctl ARGS` as a new interpreter: for start-up, signals, the program's
        streams as they come."""
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(
            [sys.executable, "-m", "sxctl", *args],
            input=data if data is not None else b"",
            capture_output=True, cwd=cwd or self.root, env=env or self.env(), timeout=timeout,
        )
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


_forks: list[Forks] = []


def forks() -> Forks:
    """This pytest process's fork server (`tests/forks.py`), started at its first command and
    stopped at the end of the run."""
    if not _forks:
        _forks.append(Forks(REPO))
    return _forks[0]


#: a racer (`python -c RACER GUN ARGS...`): a process that says it is up, then waits for the gun
#: (the file GUN) before it runs on; by itself, it then runs `sxctl ARGS`
RACER = r"""
import os, sys, time
open(f"{sys.argv[1]}.ready-{os.getpid()}", "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
"""
RACE_SXCTL = RACER + "from sxctl.cli import main\nmain(sys.argv[2:])\n"


def start_together(project: Project, argvs: list[list[str]], gun: Path, racer: str = RACE_SXCTL,
                   envs: list[dict[str, str]] | None = None) -> list:
    """One process per ARGS in `argvs` (forks with sxctl imported; `envs`: each one's environment,
    else the project's), each running `racer` with them, released together once every one is up;
    wait for each (`.wait()`)."""
    runs = [forks().start([str(gun), *argv], cwd=project.root, env=envs[n] if envs else project.env(), python=racer)
            for n, argv in enumerate(argvs)]
    deadline = time.monotonic() + 60
    while len(list(gun.parent.glob(f"{gun.name}.ready-*"))) < len(runs):
        assert time.monotonic() < deadline, "the racers did not come up"
        time.sleep(0.005)
    gun.touch()
    return runs


def run_cli(args: list[str], *, input: str | bytes | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None, clock=None, color: bool = False) -> Result:
    """The CLI in-process with exactly `env` as its environment (everything else unset), `cwd` as
    its working folder, `clock` (default: the real one) as its clock, and `color=True` for output
    as a terminal gets it (click strips nothing). Use the `invoke` fixture or `project.run`; this
    is for what cannot take a fixture (hypothesis tests, the model test)."""
    from click.testing import CliRunner

    from sxctl import faults, project
    from sxctl.cli.output import Settings
    from sxctl.cli.root import cli
    from sxctl.inbox import sending

    sending._switch_cache.clear()  # per-process caches: a new process would start without them
    project.cascade._exe_dir_on.cache_clear()
    faults.arm(None)
    overrides: dict[str, str | None] = dict.fromkeys(os.environ)
    overrides.update(env if env is not None else {})
    overrides.pop("PYTHONPATH", None)
    settings = Settings(clock=clock) if clock is not None else None
    previous = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, args, input=input if input is not None else b"", env=overrides, obj=settings,
                                    color=color)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def invoke(hermetic: Path):
    """`invoke(*args, input=, env=, cwd=, clock=, color=)`: `sxctl ARGS` in-process, outside any
    project (the hermetic working folder and HOME) unless `cwd`/`env`/`--project` say otherwise.
    `env` adds to (or, with None values, removes from) the hermetic environment."""

    def run(*args: str, input: str | bytes | None = None, env: dict[str, str | None] | None = None,
            cwd: Path | None = None, clock=None, color: bool = False) -> Result:
        merged: dict = clean_env(hermetic)
        merged.update(env or {})
        return run_cli(list(args), input=input, env={k: v for k, v in merged.items() if v is not None},
                       cwd=cwd or Path.cwd(), clock=clock, color=color)

    return run


@pytest.fixture
def project(tmp_path: Path, hermetic: Path) -> Project:
    root = tmp_path / "proj"
    (root / ".scorpiox" / "sessions").mkdir(parents=True)
    return Project(Path(os.path.realpath(root)), hermetic)


@pytest.fixture
def ws(project: Project) -> Path:
    """The examples' workspace: the project root with the example store and ledger (its
    `.scheduler` folder is returned)."""
    import shutil

    scheduler = project.root / ".scheduler"
    scheduler.mkdir(mode=0o700)
    shutil.copy(EXAMPLES / "cron-jobs.json", scheduler / "cron-jobs.json")
    shutil.copy(EXAMPLES / "cron-executions.jsonl", scheduler / "cron-executions.jsonl")
    return scheduler


class Killed(BaseException):
    """A command "killed" at a fault point, in this process (the files are left as a kill leaves them)."""


def killed_at(monkeypatch: pytest.MonkeyPatch, point: str, command, nth: int = 1) -> None:
    """Run `command()` with the `nth` hit of the fault point `point` raising `Killed`, and check
    that it did."""
    from sxctl import faults

    hits = 0

    def hit(at: str) -> None:
        nonlocal hits
        hits += at == point
        if at == point and hits == nth:
            raise Killed(at)

    with monkeypatch.context() as patched:
        patched.setattr(faults, "hit", hit)
        with pytest.raises(Killed):
            command()


def inbox_messages(folder: Path) -> list[dict]:
    """Every message of a session's inbox, pending then read, each with its `stem`."""
    found = []
    for sub in ("inbox", "inbox/done"):
        for path in sorted((folder / sub).glob("*.json")):
            found.append({"stem": path.stem, **json.loads(path.read_text())})
    return found


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes: a snapshot to prove 'nothing was written'."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class Agent:
    """`sxctl agent run --json` in a project, with its events collected by a reader thread."""

    def __init__(self, project, *args, session=SID):
        self.project = project
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sxctl", "--session", session, "agent", "run", "--init", "--json",
             "--poll-ms", "50", *args],
            cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.wait_for(lambda e: e["event"] == "started")
        self.dir = project.root / ".scorpiox" / "sessions" / session

    def _read(self):
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def wait_for(self, predicate, timeout=20.0, count=1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in list(self.events) if predicate(e)]
            if len(found) >= count:
                return found
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"event not seen; events so far: {self.events}; stderr: {self._stderr()}")

    def _stderr(self):
        return self.proc.stderr.read() if self.proc.poll() is not None else ""

    def named(self, name):
        return [e for e in self.events if e["event"] == name]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
        return self.proc.returncode


@pytest.fixture
def agents():
    """`agents(project, *args, session=SID)`: a running reference agent (`Agent`), killed at the
    end of the test if it is still running."""
    started: list[Agent] = []

    def start(project: Project, *args: str, session: str = SID) -> Agent:
        agent = Agent(project, *args, session=session)
        started.append(agent)
        return agent

    yield start
    _kill_running(started)


class Consumer:
    """The stand-in agent consumer (tests/consumer.py) running as a separate process."""

    def __init__(self, session_dir: Path, tmp: Path, poll: float = 0.005) -> None:
        self.log = tmp / f"consumer-{session_dir.name}.jsonl"
        self.stop_file = tmp / f"stop-{session_dir.name}"
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("consumer.py")), str(session_dir),
             str(self.log), str(self.stop_file), str(poll)]
        )
        deadline = time.monotonic() + 10
        while not (session_dir / "stats.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> list[dict]:
        """Drain what is pending, stop, and return every record the consumer logged."""
        self.stop_file.touch()
        self.proc.wait(timeout=60)
        return self.records()

    def records(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@pytest.fixture
def consumer_factory(tmp_path):
    started: list[Consumer] = []

    def start(session_dir: Path, poll: float = 0.005) -> Consumer:
        consumer = Consumer(session_dir, tmp_path, poll)
        started.append(consumer)
        return consumer

    yield start
    _kill_running(started)


def _kill_running(started: list) -> None:
    """End the processes a fixture started (each has `.proc`) that are still running."""
    for each in started:
        if each.proc.poll() is None:
            each.proc.kill()
            each.proc.wait()


def follow_json(project: Project, *args: str, first_within: float = 20.0) -> tuple[subprocess.Popen, list[dict]]:
    """`sxctl ARGS` as a process in the project whose JSON Lines collect in a list as they arrive;
    returns once the first line is there (or `first_within` seconds passed)."""
    process = subprocess.Popen([sys.executable, "-m", "sxctl", *args], cwd=project.root, env=project.env(),
                               stdout=subprocess.PIPE, text=True)
    events: list[dict] = []
    threading.Thread(target=lambda: events.extend(json.loads(line) for line in process.stdout), daemon=True).start()
    deadline = time.monotonic() + first_within
    while not events and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, events


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def worktree_pair(project, tmp_path):
    """A main checkout and a linked worktree, both with the same session folder."""
    _git("init", "-q", "-b", "main", cwd=project.root)
    (project.root / "README").write_text("x")
    _git("add", "README", cwd=project.root)
    _git("commit", "-qm", "init", cwd=project.root)
    wt = tmp_path / "wt"
    _git("worktree", "add", "-q", str(wt), cwd=project.root)
    wt = Path(os.path.realpath(wt))
    sid = "2026_09_21_quiet_euler"
    mirror = project.session(sid, stats={"cwd": str(wt)})
    worktree = wt / ".scorpiox" / "sessions" / sid
    worktree.mkdir(parents=True)
    (worktree / "stats.json").write_text((mirror / "stats.json").read_text())
    return wt, worktree, mirror


# --- stress figures: tests add to them, the run prints their sum at the end -----------------------

FIGURES_ENV = "SXCTL_STRESS_FIGURES"


@pytest.hookimpl(optionalhook=True)  # a run without xdist (tests/test_hermetic.py) has no such hook
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: three workers a core (at most 12). Most of the suite waits on real processes —
    agents taking turns, kills, timers, the demo's tour — so workers beyond the cores overlap
    those waits with the tests that compute (on 2 cores: 85 s instead of 170 s)."""
    return min(12, 3 * (os.cpu_count() or 1))


#: set by tools/at_instant.py: the wall clock was moved to this instant for the whole run
INSTANT_ENV = "SXCTL_TEST_INSTANT"


def pytest_collection_modifyitems(config, items):
    """The slow tests first, so that the quick ones fill the end of a run and no worker is left
    alone with a long test; the demo's check last (its tour started with the run, `start_demo`).
    Under a moved wall clock (tools/at_instant.py), skip the tests that need the machine's own
    time: the file system stamps files with it, and a bare environment drops the moved clock."""
    items.sort(key=lambda item: 2 if item.nodeid == DEMO_TEST else 0 if item.get_closest_marker("slow") else 1)
    instant = os.environ.get(INSTANT_ENV)
    if not instant:
        return
    skip = pytest.mark.skip(reason=f"needs the machine's own clock; the run is at {instant} (tools/at_instant.py)")
    for item in items:
        if item.get_closest_marker("real_time"):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """pytest keeps each test module with its asserts rewritten (`__pycache__/*-pytest-*.pyc`)
    unless writing bytecode is off: under PYTHONDONTWRITEBYTECODE (set on many CI images and
    containers) every worker of every run rewrote the whole suite again, 8 s of each worker's
    start. The cache is written anyway, while the suite is collected (the subprocesses of the
    tests still follow the variable)."""
    writing_off = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writing_off


#: where the temporary folders go when the caller did not choose (TMPDIR), if it has room
MEMORY = Path("/dev/shm")


def in_memory() -> bool:
    """A tmpfs with room for the run (the suite writes 100 MB, pytest keeps three runs)."""
    try:
        room = os.statvfs(MEMORY)
    except OSError:
        return False
    return os.access(MEMORY, os.W_OK) and room.f_bavail * room.f_frsize >= 2 << 30


def pytest_configure(config):
    """The temporary folders in memory, and one folder for the figures of every worker (xdist
    workers inherit the environment). The tests kill processes, never the machine: what they
    check is what the page cache holds, and the fsyncs of sxctl's writes (tens of thousands a
    run) stop waiting on a disk another job may be flushing to (on disk: 2 to 4 times slower).

    `-n`: tests go to the workers two at a time from one queue (xdist's `--maxschedchunk 2`, unless
    given), not in chunks of an eighth of the run: a worker handed a chunk of the slow tests
    kept them while the other ran out of work. (Here, not in pyproject.toml's addopts: a run
    with `-p no:xdist` would refuse the option.)"""
    import tempfile

    if config.pluginmanager.hasplugin("xdist") and config.getoption("maxschedchunk", None) is None:
        config.option.maxschedchunk = 2

    if not hasattr(config, "workerinput") and "TMPDIR" not in os.environ and in_memory():
        os.environ["TMPDIR"] = str(MEMORY)
        tempfile.tempdir = None  # asked again
    if not hasattr(config, "workerinput") and FIGURES_ENV not in os.environ:
        os.environ[FIGURES_ENV] = tempfile.mkdtemp(prefix="sxctl-stress-")
        config._sxctl_figures_made = os.environ[FIGURES_ENV]  # removed at the end of the run


def pytest_unconfigure(config):
    for pool in _forks:
        pool.close()
    for tour in _early_demo:  # the run ended before its test took it (-x, Ctrl-C)
        if tour.poll() is None:
            os.killpg(tour.pid, signal.SIGTERM)  # the demo removes its project
        tour.wait()
    made = getattr(config, "_sxctl_figures_made", None)
    if made:
        import shutil

        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(FIGURES_ENV, None)


# --- the demo's tour, started with the run --------------------------------------------------------

#: `sxctl demo --fast` takes 40 s, nearly all of it waiting for the reference agent's turns: a
#: run that has this test starts both forms of the tour it checks as soon as it knows, and the
#: test then reads what they did (a worker would otherwise wait the 40 s doing nothing else)
DEMO_TEST = "tests/cli/test_demo.py::test_demo_passes_as_json_and_keeps_the_project_when_asked"
DEMO_FORMS = {"json": ["--json"], "human": ["--keep"]}
_early_demo: list[subprocess.Popen] = []


def start_demo(folder: Path) -> list[subprocess.Popen]:
    """Both forms of `sxctl demo --fast`, side by side, in the hermetic environment (their
    projects, the kept one too, in `folder`): FORM.out, FORM.err, then FORM.status in `folder`."""
    (folder / "hermetic").mkdir(parents=True)
    env = {**hermetic_environ(folder / "hermetic", os.environ), "PYTHONPATH": str(REPO), "TMPDIR": str(folder)}
    record = '"$@" >"$0.out" 2>"$0.err"; echo $? >"$0.tmp" && mv "$0.tmp" "$0.status"'
    return [subprocess.Popen(["/bin/sh", "-c", record, str(folder / form), sys.executable, "-m", "sxctl", "demo",
                              "--fast", *args], cwd=folder / "hermetic" / "cwd", env=env, start_new_session=True)
            for form, args in DEMO_FORMS.items()]


def demo_tours(tmp_path: Path, timeout: float = 120) -> dict[str, Result]:
    """What each form of the tour did: the run's, started early (`start_demo`), else run now."""
    folder = Path(os.environ.get(FIGURES_ENV, tmp_path)) / "demo"
    started = [] if folder.is_dir() else start_demo(folder := tmp_path / "demo")
    try:
        deadline = time.monotonic() + timeout
        while not all((folder / f"{form}.status").exists() for form in DEMO_FORMS):
            assert time.monotonic() < deadline, f"the demo ran past {timeout} s"
            time.sleep(0.1)
    finally:
        for tour in started:
            if tour.poll() is None:
                os.killpg(tour.pid, signal.SIGTERM)
            tour.wait()
    return {form: Result(int((folder / f"{form}.status").read_text()), (folder / f"{form}.out").read_text(),
                         (folder / f"{form}.err").read_text()) for form in DEMO_FORMS}


def _start_demo_early(ids) -> None:
    folder = os.environ.get(FIGURES_ENV)
    if DEMO_TEST in ids and folder and not _early_demo:
        _early_demo.extend(start_demo(Path(folder) / "demo"))


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput"):  # without xdist (its workers have their own hook)
        _start_demo_early([item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """xdist's controller, as a worker reports what it collected (before any test is sent)."""
    _start_demo_early(ids)


@pytest.fixture
def figures():
    """A Counter a stress test fills (operations, crashes injected, files checked, problems)."""
    import collections
    import uuid

    counter: collections.Counter = collections.Counter()
    yield counter
    folder = os.environ.get(FIGURES_ENV)
    if folder and counter:
        Path(folder, f"{uuid.uuid4()}.json").write_text(json.dumps(counter))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    folder = os.environ.get(FIGURES_ENV)
    if not folder or not Path(folder).is_dir():
        return
    import collections

    total: collections.Counter = collections.Counter()
    for path in Path(folder).glob("*.json"):
        total.update(json.loads(path.read_text()))
    if total:
        terminalreporter.write_sep("-", "sxctl stress figures")
        terminalreporter.write_line(
            f"operations {total['operations']}, crashes injected {total['crashes']} "
            f"({total['kills_mid_write']} random kills mid-write), files checked "
            f"{total['files_checked']}, problems found: {total['problems']}")


class RandomKiller:
    """Start a command and SIGKILL it at a random moment of its run (`low`..`high` times how long
    a run takes). How long a run takes is learnt from the runs that finished before their kill:
    a slow first run on a loaded machine would otherwise let every later run finish first.

    The runs are forks with sxctl imported (`tests/forks.py`): the kill lands in the command's
    own work, not in an interpreter's start-up."""

    def __init__(self, rng, full_s: float, low: float, high: float) -> None:
        self.rng, self.full, self.low, self.high = rng, full_s, low, high
        self.kills = 0

    def run(self, args: list[str], *, cwd, env) -> bool:
        """`sxctl ARGS`; True when the run was killed."""
        began = time.monotonic()
        run = forks().start(args, cwd=cwd, env=env)
        time.sleep(self.rng.uniform(self.low, self.high) * self.full)
        killed = run.kill()
        if killed:
            self.kills += 1
        else:
            self.full = min(self.full, time.monotonic() - began)
        return killed


def timed_run(args: list[str], *, cwd, env) -> tuple[float, Result]:
    """How long `sxctl ARGS` takes, start to end, in a fork as `RandomKiller` runs it, and its result."""
    began = time.monotonic()
    result = forks().run(args, cwd=cwd, env=env)
    return time.monotonic() - began, result

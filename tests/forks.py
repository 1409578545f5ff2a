"""sxctl in processes forked from a server that has it imported: real processes (their own pid,
files and locks; SIGKILL ends one where it stands; many run at once) without an interpreter's
start-up each, which costs ten times the command. For the tests where processes are needed but
their start is not what is tested: SIGKILL at random moments, racing writers, `--fault-inject`.
Start-up imports, the program on PATH, a terminal and signals keep `project.process`.

The server (one per pytest worker, started at its first use) is single-threaded, so its forks
inherit no held lock; it reaps its children itself, so a SIGKILL it sends on a test's behalf
never reaches a reused pid. A fork gets the command's working folder, its whole environment (its
zone too), a stdin file and output files, then runs the program's entry (`sxctl.cli.main`) as
`python -m sxctl` does, or the click command with a FakeClock (`now_ms`), or a Python snippet
(`python`, as `python -c`); it ends as that program would, with its exit status."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SERVER = r"""
import atexit, io, json, os, select, signal, sys, threading, time, traceback
from sxctl import faults
from sxctl.cli import main as entry
from sxctl.cli.output import Settings
from sxctl.cli.root import cli
from sxctl.clock import FakeClock
# what commands import when they run, imported once here rather than in every fork
import sxctl.cli.plain_send, sxctl.cli.guard, sxctl.cli.render, sxctl.cli.inbox, sxctl.cli.callbacks
import sxctl.cli.cron, sxctl.cli.cron.tick, sxctl.api.jobs, sxctl.api.scheduler, sxctl.api.scope
import sxctl.cron.run.tick, sxctl.cron.run.heartbeat, sxctl.cron.store.file, sxctl.inbox.sending
import croniter, dateutil.parser, filelock, rich.console
import sxctl.timeparse
sxctl.timeparse._zone_names()  # the system's zone names (a walk of its zone folder, 20 ms): no test changes them

woken, wake = os.pipe()
os.set_blocking(wake, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake)
running, pending = set(), b""


def reply(**fields):
    os.write(1, json.dumps(fields).encode() + b"\n")


def redirect(fd, name, flags):
    opened = os.open(name, flags, 0o600)
    os.dup2(opened, fd)
    os.close(opened)


def child(request):  # the command, in the fork: it never returns to the server's loop
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(woken)
        os.close(wake)
        redirect(0, request["input"] or os.devnull, os.O_RDONLY)
        redirect(1, request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        redirect(2, request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=sys.stdin.encoding,
                                     errors=sys.stdin.errors)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        if request["kill_at"]:
            hits = [0]

            def hit(point, target=request["kill_at"][0], nth=request["kill_at"][1]):
                if point == target:
                    hits[0] += 1
                    if hits[0] == nth:
                        os.kill(os.getpid(), signal.SIGKILL)

            faults.hit = hit
        code = 0
        if request["python"] is not None:
            sys.argv = ["-c", *request["argv"]]
            exec(compile(request["python"], "<string>", "exec"), {"__name__": "__main__"})
        elif request["now_ms"] is not None:
            cli.main(args=request["argv"], obj=Settings(clock=FakeClock(request["now_ms"])))
        else:
            entry(request["argv"])
    except SystemExit as exit_:  # as the interpreter reads it
        code = exit_.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        # the interpreter's exit, less its tear-down (40 ms a fork, all of it copying pages): the
        # threads that are no daemons are waited for, the exit functions run, the streams flushed
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(code & 0xFF)


while True:
    ready, _, _ = select.select([0, woken], [], [])
    if woken in ready:
        os.read(woken, 4096)
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        running.discard(pid)
        reply(ended=pid, signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None)
    if 0 not in ready:
        continue
    data = os.read(0, 1 << 16)
    if not data:
        break
    *lines, pending = (pending + data).split(b"\n")
    for line in lines:
        request = json.loads(line)
        if "kill" in request:
            if request["kill"] in running:  # not reaped yet: the pid is still this child's
                os.kill(request["kill"], signal.SIGKILL)
            continue
        pid = os.fork()
        if pid == 0:
            child(request)  # it ends there
        running.add(pid)
        reply(started=request["id"], pid=pid)
for pid in running:
    os.kill(pid, signal.SIGKILL)
"""


class Forked:
    """One command running in a fork of the server."""

    def __init__(self, forks: Forks, pid: int, files: dict[str, Path]) -> None:
        self.forks, self.pid, self.files = forks, pid, files
        self.ended = threading.Event()
        self.signal: int | None = None
        self.code: int | None = None

    def running(self) -> bool:
        return not self.ended.is_set()

    def kill(self, timeout: float = 60) -> bool:
        """SIGKILL it unless it ended; True when the kill ended it."""
        if not self.ended.is_set():
            self.forks.send({"kill": self.pid})
        self._wait(timeout)
        for path in self.files.values():
            path.unlink(missing_ok=True)
        return self.signal == signal.SIGKILL

    def wait(self, timeout: float = 60):
        """Its exit status (a signal as a negative one, as subprocess gives it), stdout and stderr:
        a `conftest.Result`."""
        from tests.conftest import Result

        self._wait(timeout)
        code = -self.signal if self.signal is not None else self.code
        out, err = (self.files[name].read_bytes().decode(errors="replace") for name in ("out", "err"))
        for path in self.files.values():
            path.unlink(missing_ok=True)
        return Result(1 if code is None else code, out, err)

    def _wait(self, timeout: float) -> None:
        if not self.ended.wait(timeout):
            self.forks.send({"kill": self.pid})
            self.ended.wait(30)
            raise TimeoutError(f"sxctl (pid {self.pid}) still ran after {timeout} s")


class Forks:
    """The fork server of one pytest worker, started at the first command."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.folder = Path(tempfile.mkdtemp(prefix="sxctl-forks-"))
        self.server: subprocess.Popen | None = None
        self.lock = threading.Lock()  # one writer of requests at a time
        self.serial = itertools.count()
        self.starting: dict[int, tuple[threading.Event, dict[str, Path]]] = {}  # by request id
        self.started: dict[int, Forked] = {}  # by request id, until `start` returns it
        self.forked: dict[int, Forked] = {}  # by pid, until it ends

    def start(self, argv: list[str], *, cwd: Path, env: dict[str, str], input: str | bytes | None = None,
              now_ms: int | None = None, kill_at: tuple[str, int] | None = None,
              python: str | None = None) -> Forked:
        """`python -m sxctl ARGV` (or, with `python`, `python -c PYTHON ARGV`) in a new fork; it
        runs until it ends, or `kill()` ends it."""
        n = next(self.serial)
        files = {name: self.folder / f"{n}.{name}" for name in ("in", "out", "err")}
        if input is not None:
            files["in"].write_bytes(input.encode() if isinstance(input, str) else input)
        started = threading.Event()
        self.starting[n] = (started, files)
        self.send({"id": n, "argv": argv, "cwd": str(cwd), "env": env, "now_ms": now_ms, "python": python,
                   "input": str(files["in"]) if input is not None else None, "out": str(files["out"]),
                   "err": str(files["err"]), "kill_at": list(kill_at) if kill_at else None})
        if not started.wait(60):
            raise RuntimeError("the fork server did not answer")
        return self.started.pop(n)

    def run(self, argv: list[str], *, timeout: float = 60, **options):
        """`start`, then `wait`: the command's exit status, stdout and stderr."""
        return self.start(argv, **options).wait(timeout)

    def send(self, request: dict) -> None:
        with self.lock:
            if self.server is None:
                self.server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, cwd=self.repo,
                                               env={**os.environ, "PYTHONPATH": str(self.repo)})
                threading.Thread(target=self._replies, args=(self.server,), daemon=True).start()
            assert self.server.stdin is not None
            self.server.stdin.write(json.dumps(request).encode() + b"\n")
            self.server.stdin.flush()

    def _replies(self, server: subprocess.Popen) -> None:
        assert server.stdout is not None
        for line in server.stdout:
            reply = json.loads(line)
            if "started" in reply:
                event, files = self.starting.pop(reply["started"])
                self.started[reply["started"]] = self.forked[reply["pid"]] = Forked(self, reply["pid"], files)
                event.set()
            else:
                ended = self.forked.pop(reply["ended"])
                ended.signal, ended.code = reply["signal"], reply["code"]
                ended.ended.set()

    def close(self) -> None:
        if self.server is not None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            self.server.wait(timeout=30)
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

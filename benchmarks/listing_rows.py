"""The listing rows of issue #27: what a long history adds to `inbox list --done --limit 20` and to
`status` (the agent having read 100 messages in the last hour), against what it adds to a bare
`python -c` that imports click and lists `done/` once — the cost of one listing is the floor.
Measured in CPU seconds of each process (user + system, from `wait4`): the difference of two
wall-clock medians on a shared, loaded machine was mostly noise (1.05 and 1.65 in two runs)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RECENT = 100


def sxctl_at(at_ms: int, *args: str) -> list[str]:
    """`sxctl ARGS` with the clock at `at_ms` (the injectable clock the tests use)."""
    code = ("import sys\nfrom sxctl.cli.root import cli\nfrom sxctl.cli.output import Settings\n"
            "from sxctl.clock import FakeClock\n"
            f"cli.main(args=sys.argv[1:], obj=Settings(clock=FakeClock({at_ms})))\n")
    return [sys.executable, "-c", code, *args]


def add_recent(done: Path, count: int) -> int:
    """`count` messages read just now (newest names), a second after the history: returns the
    instant from which "the last hour" holds exactly them."""
    time.sleep(1.1)
    since_ms = time.time_ns() // 1_000_000 - 500
    now = time.time_ns() // 1_000_000 + 60_000
    for n in range(count):
        (done / f"{now // 1000 + n:010d}_{n:09d}.json").write_text('{"text": "read just now", "mode": "queue"}\n')
    return since_ms


def cpu_timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    usage = os.wait4(child.pid, 0)[2]
    return usage.ru_utime + usage.ru_stime


def listing_rows(root: Path, runs: int, env: dict[str, str]) -> list[tuple[str, float, str, bool]]:
    from history import make_consumed, make_session

    projects: dict[int, tuple[Path, Path, int]] = {}
    for consumed in (1_000, 100_000):
        project = root / f"listing{consumed}"
        session = make_session(project, "2026_09_21_quiet_euler")
        make_consumed(session, consumed)
        since_ms = add_recent(session / "inbox" / "done", RECENT)
        projects[consumed] = (project, session / "inbox" / "done", since_ms)
    rows = []
    for label, args in (("inbox list --done --limit 20", ["inbox", "list", "--done", "--limit", "20", "--json"]),
                        (f"status, {RECENT} read in the last hour", ["status", "--json"])):
        samples: dict[str, list[float]] = {}
        commands = {}
        for consumed, (project, done, since_ms) in projects.items():
            commands[f"sx{consumed}"] = (sxctl_at(since_ms + 3_600_000, "--project", str(project), *args), project)
            commands[f"bare{consumed}"] = ([sys.executable, "-c", f"import click, os; os.listdir({str(done)!r})"],
                                           project)
        for argv, cwd in commands.values():
            cpu_timed(argv, cwd, env)  # warm
        for _ in range(runs):
            for name, (argv, cwd) in commands.items():
                samples.setdefault(name, []).append(cpu_timed(argv, cwd, env))
        median = {name: statistics.median(values) for name, values in samples.items()}
        extra = median["sx100000"] - median["sx1000"]
        floor = max(median["bare100000"] - median["bare1000"], 1e-6)
        ratio = extra / floor
        rows.append((f"(g) {label}: 100k over 1k consumed / bare listing's", ratio, "<= 1.5", ratio <= 1.5))
    return rows

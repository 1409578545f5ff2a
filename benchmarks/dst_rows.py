"""Benchmark rows for an every-second cron job across a DST change (issue #27): `cron next` of 15
fires, in CPU seconds of the command once Python and click have started (a loaded machine
stretches wall time, not this; start-up is rows (a), (b)), and the missed count of a job 5
occurrences late."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

EVERY_SECOND = "* * * * * *"
#: 5 s before each 2026 change of Europe/Berlin (spring forward, fall back)
CHANGES = {"spring": "2026-03-29T00:59:55Z", "fall": "2026-10-25T00:59:55Z"}


_TIMED = ("import sys, time\nfrom sxctl.cli import main\nstarted = time.process_time()\ntry:\n"
          "    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
          "print(time.process_time() - started, file=sys.stderr)\n")


def cpu_seconds(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", _TIMED, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    return float(done.stderr.strip().splitlines()[-1])


def dst_rows(root: Path, runs: int, env: dict[str, str]) -> list[tuple[str, float | int, str, bool]]:
    rows: list[tuple[str, float | int, str, bool]] = []
    for name, start in CHANGES.items():
        argv = ["cron", "next", "--cron", EVERY_SECOND, "--tz", "Europe/Berlin",
                "--from", start, "-n", "15", "--json"]
        cpu_seconds(argv, root, env)  # warm
        seconds = statistics.median(cpu_seconds(argv, root, env) for _ in range(runs))
        rows.append((f"(k) cron next '* * * * * *' across DST ({name}), 15 fires, CPU s", seconds, "<= 0.2",
                     seconds <= 0.2))
    from sxctl.cron.timeline.catchup import missed_between

    schedule = {"kind": "cron", "expr": EVERY_SECOND, "tz": "Europe/Berlin"}
    due = 1_774_746_000_000 - 2_000  # 2 s before the spring change: the run at due stands for 5 more
    span = missed_between(schedule, due, due + 5_000)
    count = span[0] if span is not None else 0
    rows.append(("(l) every-second job 5 late (Berlin, across DST): missed count", count if isinstance(count, int)
                 else 10_000, "== 5", count == 5))
    return rows

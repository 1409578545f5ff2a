"""sxctl benchmarks: ratios against baselines measured in the same run, interleaved.

    python benchmarks/run.py            # the full table (some minutes: it runs the test suite once)
    python benchmarks/run.py --quick    # fewer repetitions

Each row is a median of at least 15 runs (5 with --quick), taken in turn with its baseline so
that machine noise hits both alike. Targets come from the performance issue; the last column
says whether the ratio meets its target.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dst_rows import dst_rows  # noqa: E402 (the folder is on the path only now)
from listing_rows import listing_rows  # noqa: E402

HEAVY = ("rich", "croniter", "dateutil", "filelock")


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SXCTL_", "SX_")) and k != "PYTHONDONTWRITEBYTECODE"}
    clean["PYTHONPATH"] = str(REPO)
    return clean


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def sxctl_later(hours: float, *args: str) -> list[str]:
    """`sxctl ARGS` as if run `hours` after now (the injectable clock the tests use): a history
    written by the benchmark a moment ago is then as old as a real one (the kernel sets the ctime
    of a consumed message when it is moved, and nothing can set it back)."""
    code = ("import sys, time\nfrom sxctl.cli.root import cli\nfrom sxctl.cli.output import Settings\n"
            "from sxctl.clock import FakeClock\n"
            f"clock = FakeClock(time.time_ns() // 1_000_000 + {int(hours * 3_600_000)})\n"
            "cli.main(args=sys.argv[1:], obj=Settings(clock=clock))\n")
    return [sys.executable, "-c", code, *args]


def measured(argv: list[str], cwd: Path) -> tuple[float, int]:
    """(wall seconds, peak resident KiB) of one run of a command. The peak is taken by a small
    helper process that starts the command: Linux counts the memory of the process that forked
    a child into the child's peak, and this benchmark process is large."""
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - started
    helper = ("import os, subprocess, sys\n"
              "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "print(os.wait4(child.pid, 0)[2].ru_maxrss)\n")
    peak = subprocess.run([sys.executable, "-c", helper, *argv], cwd=cwd, env=env(), capture_output=True,
                          text=True, check=True).stdout
    return elapsed, int(peak)


def until_first_line(argv: list[str], cwd: Path) -> float:
    """Seconds from starting a long-running command to its first line of output (then it is ended)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    return elapsed


def interleaved(commands: dict[str, list[str]], cwd: Path, runs: int) -> dict[str, float]:
    """Median wall time of each command, the commands taken in turn `runs` times."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # warm the page cache and .pyc files
        timed(argv, cwd)
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv, cwd))
    return {name: statistics.median(values) for name, values in samples.items()}


def sxctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "sxctl", *args]


# --- fixtures -------------------------------------------------------------------------------------

def make_project(root: Path) -> Path:
    session = root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler"
    (session / "inbox").mkdir(parents=True)
    (session / "callbacks.json").write_text(json.dumps({"rev": 1, "updated_ms": 0, "paused": False, "slots": []}))
    return session


def make_store(root: Path, jobs: int, due: int = 0) -> None:
    from sxctl.jsondata import compact_json

    now = time.time_ns() // 1_000_000
    store = {"formatVersion": 1, "agentSchedulerSeed": str(uuid.uuid4()), "activeClaims": [], "jobs": []}
    for n in range(jobs):
        store["jobs"].append({
            "id": str(uuid.uuid4()), "name": f"job-{n:05d}", "agentId": "default",
            "schedule": {"kind": "every", "everyMs": 3_600_000, "anchorMs": now},
            "lifecycle": {"status": "scheduled", "nextRunAtMs": now - 1000 if n < due else now + 3_600_000,
                          "consecutiveDependencyErrors": 0},
            "source": "authored", "payload": {"kind": "heartbeat_event", "text": f"beat {n}", "wakeMode": "now"},
        })
    scheduler = root / ".scheduler"
    scheduler.mkdir(exist_ok=True)
    (scheduler / "cron-jobs.json").write_bytes(compact_json(store))
    store["jobs"] = store["jobs"][:1]


def make_ledger(root: Path, size: int, job_id: str) -> None:
    """A ledger of complete runs of several jobs, about `size` bytes, newest rows for `job_id`."""
    scheduler = root / ".scheduler"
    scheduler.mkdir(exist_ok=True)
    lines = []
    total = 0
    when = 1_700_000_000_000
    n = 0
    while total < size:
        job = job_id if n % 3 == 0 else f"other-{n % 7}"
        execution = str(uuid.uuid4())
        base = {"executionId": execution, "bootId": "sxctl-bench", "jobId": job, "agentId": "default",
                "scheduledForMs": when, "trigger": "scheduled"}
        start = {**base, "recordType": "started", "workKind": "heartbeat_event", "rootRunId": None,
                 "startedAtMs": when + 5}
        end = {**base, "recordType": "terminal", "workKind": "heartbeat_event", "terminalAtMs": when + 25,
               "durationMs": 20, "outcome": {"kind": "inbox_dispatch", "sessionId": "s", "stem": "1_000000000",
                                             "mode": "queue"}}
        for row in (start, end):
            line = json.dumps(row, separators=(",", ":")) + "\n"
            lines.append(line)
            total += len(line)
        when += 60_000
        n += 1
    (scheduler / "cron-executions.jsonl").write_text("".join(lines))


def heavy_imports(args: list[str], cwd: Path) -> list[str]:
    """Which heavy modules a command imports (run in-process, then sys.modules is inspected)."""
    code = ("import sys\nfrom sxctl.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env(), capture_output=True, text=True)
    line = next(line for line in out.stdout.splitlines() if line.startswith("HEAVY="))
    return [m for m in line[len("HEAVY="):].split(",") if m]


def send_loop(session_dir: Path, count: int) -> float:
    """The API as a long-running script uses it: find the session once, then send."""
    from sxctl.api import find_session, send_message

    started = time.perf_counter()
    session = find_session(session_dir.name, project=session_dir.parents[2])
    for n in range(count):
        send_message(f"message {n}", session=session, soft_wait=False)
    return time.perf_counter() - started


def bare_loop(folder: Path, count: int) -> float:
    started = time.perf_counter()
    for n in range(count):
        temp = folder / f"{n}.json.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, json.dumps({"text": f"message {n}", "mode": "auto"}).encode() + b"\n")
        os.fsync(fd)
        os.close(fd)
        os.rename(temp, folder / f"{n}.json")
        dir_fd = os.open(folder, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)
    return time.perf_counter() - started


# --- the table ------------------------------------------------------------------------------------

def main() -> int:
    quick = "--quick" in sys.argv
    # measure what users run: an installed package has its bytecode compiled
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "sxctl")], check=True)
    runs = 5 if quick else 25
    rows: list[tuple[str, float | int, str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="sxctl-bench-") as tmp:
        root = Path(tmp)
        session = make_project(root)
        sid = session.name

        # (a) start-up of the command called in loops
        times = interleaved({
            "pass": [sys.executable, "-c", "pass"],
            "click": [sys.executable, "-c", "import click"],
            "send": sxctl("--session", sid, "inbox", "send", "hello", "--no-wait", "-q"),
        }, root, runs)
        rows.append(("(a) inbox send / import click", times["send"] / times["click"], "<= 1.25",
                     times["send"] / times["click"] <= 1.25))
        rows.append(("(a) inbox send / python -c pass", times["send"] / times["pass"], "(context)", True))

        # (b) heavy modules on the hot paths
        make_store(root, 3)
        for label, args in (("inbox send", ["--session", sid, "inbox", "send", "x", "--no-wait", "-q"]),
                            ("callbacks list", ["--session", sid, "callbacks", "list"]),
                            ("cron list", ["cron", "list"])):
            found = heavy_imports(args, root)
            rows.append((f"(b) {label}: heavy imports {', '.join(found) or 'none'}", len(found),
                         "0 for inbox send" if label == "inbox send" else "(context)",
                         not found if label == "inbox send" else True))

        rows += list_rows(root, max(5, runs // 3))

        # (d) cron runs on a 2 MB and a 30 MB ledger
        ledger_medians = {}
        for size in (2_000_000, 30_000_000):
            folder = root / f"ledger{size}"
            folder.mkdir()
            make_store(folder, 1)
            job = json.loads((folder / ".scheduler" / "cron-jobs.json").read_text())["jobs"][0]
            make_ledger(folder, size, job["id"])
            ledger_medians[size] = interleaved({"runs": sxctl(
                "--workspace", str(folder), "cron", "runs", job["name"], "--limit", "20",
                "--max-log-bytes", str(32 * 1024 * 1024), "--json")}, root, max(5, runs // 3))["runs"]
        ratio = ledger_medians[30_000_000] / ledger_medians[2_000_000]
        rows.append(("(d) cron runs --limit 20, 30 MB / 2 MB ledger", ratio, "<= 1.5", ratio <= 1.5))

        # (e) a dry-run tick over 10,000 jobs, 50 due
        folder = root / "tick"
        folder.mkdir()
        make_project(folder)
        make_store(folder, 10_000, due=50)
        tick = interleaved({"tick": sxctl("--workspace", str(folder), "--project", str(folder), "cron", "tick",
                                          "--dry-run", "--max-per-pass", "50", "--json"),
                            "bare": [sys.executable, "-c", "import json; json.load(open("
                                     f"{str(folder / '.scheduler' / 'cron-jobs.json')!r}))"]},
                           root, max(5, runs // 3))
        rows.append(("(e) cron tick --dry-run, 10k jobs / bare json.load", tick["tick"] / tick["bare"], "(context)",
                     True))

        # (f) the API's send loop against a bare write+fsync+rename loop
        count = 100 if quick else 300
        ratios = []
        for rep in range(3 if quick else 7):  # fresh folders: both loops write into equally full ones
            api_time = send_loop(make_project(root / f"api{rep}"), count)
            (root / f"bare{rep}").mkdir()
            ratios.append(bare_loop(root / f"bare{rep}", count) / api_time)  # each pair measured back to back
        throughput = statistics.median(ratios)
        rows.append(("(f) API send loop throughput / bare loop", throughput, ">= 0.8", throughput >= 0.8))

        rows += rehearsal_rows(root, 1 if quick else 3)
        rows.append(suite_row())
        rows += scale_rows(root, quick)
        rows += dst_rows(root, max(5, runs // 3), env())

    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'ratio':>7}  {'target':<16}  ok")
    for label, ratio, target, ok in rows:
        value = f"{ratio:7.2f}" if isinstance(ratio, float) else f"{ratio:7d}"
        print(f"{label.ljust(width)}  {value}  {target:<16}  {'yes' if ok else 'NO'}")
    return 0 if all(ok for *_, ok in rows) else 1


def list_rows(root: Path, runs: int) -> list[tuple[str, float, str, bool]]:
    """`cron list --json` of stores as users write them (benchmarks/stores.py: 50 cron expressions
    in 6 zones, every and at jobs) at 1,000 and 10,000 jobs, against a bare `json.load` of the
    10,000-job store, and with a policy file that gives 1 job in 70 active hours opening 2-6 hours
    ahead (its previews must jump to the next window, not step through the hours before it)."""
    from stores import make_varied_store

    now = time.time_ns() // 1_000_000
    commands: dict[str, list[str]] = {}
    for name, jobs, policies in (("1k", 1000, False), ("10k", 10_000, False), ("10k policies", 10_000, True)):
        folder = root / f"list-{name.replace(' ', '-')}"
        make_varied_store(folder, jobs, now, policies=policies)
        commands[name] = sxctl("--workspace", str(folder), "cron", "list", "--json")
    store_file = root / "list-10k" / ".scheduler" / "cron-jobs.json"
    commands["bare"] = [sys.executable, "-c", f"import json; json.load(open({str(store_file)!r}))"]
    medians = interleaved(commands, root, runs)
    scale = medians["10k"] / medians["1k"]
    versus = medians["10k"] / medians["bare"]
    policies = medians["10k policies"] / medians["10k"]
    return [("(c) cron list --json 10k / 1k jobs (50 expressions, 6 zones)", scale, "<= 3", scale <= 3),
            ("(c) cron list --json 10k / bare json.load process", versus, "<= 8", versus <= 8),
            ("(c) cron list --json 10k, 1 in 70 with active hours / none", policies, "<= 2", policies <= 2)]


def scale_rows(root: Path, quick: bool) -> list[tuple[str, float, str, bool]]:
    """Speed that does not decay with history: each row compares a long history with a short one,
    measured in turn in this run (medians of time; the largest peak memory of each side)."""
    from history import make_consumed, make_session, make_sessions

    runs = 3 if quick else 9
    rows: list[tuple[str, float, str, bool]] = []
    projects = {}
    for consumed in (1_000, 100_000):
        project = root / f"history{consumed}"
        session = make_session(project, "2026_09_21_quiet_euler")
        make_consumed(session, consumed)
        make_store(project, 3)
        projects[consumed] = project
    for label, args in (("status", ["status", "--json"]),
                        ("inbox list --done --limit 20", ["inbox", "list", "--done", "--limit", "20", "--json"]),
                        ("next -n 20", ["next", "-n", "20", "--json"])):
        samples: dict[int, list[tuple[float, int]]] = {1_000: [], 100_000: []}
        for project in projects.values():
            measured(sxctl_later(2, "--project", str(project), *args), project)  # warm
        for _ in range(runs):
            for consumed, project in projects.items():
                samples[consumed].append(measured(sxctl_later(2, "--project", str(project), *args), project))
        time_ratio = statistics.median(t for t, _ in samples[100_000]) / statistics.median(t for t, _ in samples[1_000])
        memory_ratio = max(m for _, m in samples[100_000]) / max(m for _, m in samples[1_000])
        if label == "next -n 20":  # the other two: listing_rows, against a bare listing
            rows.append((f"(g) {label}: 100k / 1k consumed, time", time_ratio, "<= 1.5", time_ratio <= 1.5))
        rows.append((f"(g) {label}: 100k / 1k consumed, peak memory", memory_ratio, "<= 1.5", memory_ratio <= 1.5))
    for label, args in (("agent run: first event", ["agent", "run", "--json", "--force"]),
                        ("watch --json: first event", ["watch", "--json"])):
        firsts: dict[int, list[float]] = {1_000: [], 100_000: []}
        for _ in range(runs):
            for consumed, project in projects.items():
                firsts[consumed].append(until_first_line(sxctl("--project", str(project), *args), project))
        ratio = statistics.median(firsts[100_000]) / statistics.median(firsts[1_000])
        rows.append((f"(h) {label}, 100k / 1k consumed", ratio, "<= 1.5", ratio <= 1.5))
    rows += listing_rows(root, runs, env())
    lists = {}
    for count in (20, 2_000):
        project = root / f"sessions{count}"
        make_sessions(project, count)
        lists[count] = project
    timed_lists = interleaved({f"{count}": sxctl("--project", str(project), "session", "list", "--json")
                               for count, project in lists.items()}, root, runs)
    ratio = timed_lists["2000"] / timed_lists["20"]
    rows.append(("(i) session list, 2,000 / 20 session folders", ratio, "<= 3 or --limit", True))
    limited = interleaved({f"{count}": sxctl("--project", str(project), "session", "list", "--limit", "20", "--json")
                           for count, project in lists.items()}, root, runs)
    ratio = limited["2000"] / limited["20"]
    rows.append(("(i) session list --limit 20, 2,000 / 20 session folders", ratio, "<= 3", ratio <= 3))
    rows.append(tick_row(root, runs))
    return rows


def tick_row(root: Path, runs: int) -> tuple[str, float, str, bool]:
    """A real pass (50 due, dispatched) on 10,000 jobs and a ledger at 90 % of its ceiling, against
    100 jobs and an empty ledger; every run on a fresh copy of its workspace."""
    import shutil

    from history import make_session

    templates = {}
    for jobs, ledger in ((100, 0), (10_000, 1_800_000)):
        folder = root / f"tick-template-{jobs}"
        make_session(folder, "2026_09_21_quiet_euler")
        make_store(folder, jobs, due=50)
        if ledger:
            job = json.loads((folder / ".scheduler" / "cron-jobs.json").read_text())["jobs"][-1]
            make_ledger(folder, ledger, job["id"])
        templates[jobs] = folder
    samples: dict[int, list[float]] = {100: [], 10_000: []}
    for n in range(runs + 1):
        for jobs, template in templates.items():
            copy = root / f"tick-{jobs}-{n}"
            shutil.copytree(template, copy, symlinks=True)
            make_session(copy, "2026_09_21_quiet_euler")  # live now: the 50 due jobs are dispatched
            elapsed = timed(sxctl("--project", str(copy), "cron", "tick", "--max-per-pass", "50", "-q"), copy)
            if n:  # the first is the warm-up
                samples[jobs].append(elapsed)
            shutil.rmtree(copy)
    ratio = statistics.median(samples[10_000]) / statistics.median(samples[100])
    return ("(j) cron tick (50 dispatched), 10k jobs + 90% ledger / 100 jobs", ratio, "<= 5", ratio <= 5)


def suite_row() -> tuple[str, float, str, bool]:
    """The whole test suite, slow tests included, on 2 workers (the README's second command, as
    the machine has 2 cores), in seconds: a tool developers run many times a day."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:randomly"], cwd=REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    seconds = time.perf_counter() - started
    return ("(n) the whole test suite on 2 workers, seconds", seconds, "<= 120", seconds <= 120)


def rehearsal_rows(root: Path, runs: int) -> list[tuple[str, float, str, bool]]:
    """A day and a week of `cron simulate --pass-every 1m` (1,440 and 10,080 passes) of the 20 jobs
    of benchmarks/stores.py (periods of 15 minutes to a day; 5 with spend guards, the agent's
    figures from a usage file), against one `cron tick --dry-run` process on the same workspace;
    and the same day with no guards."""
    from stores import rehearsed_jobs

    folders = {}
    for guarded in (True, False):
        folder = root / f"rehearse-{'guarded' if guarded else 'plain'}"
        make_project(folder)
        code = ("import sys, json\nfrom click.testing import CliRunner\nfrom sxctl.cli.root import cli\n"
                "for args in json.loads(sys.argv[1]):\n"
                "    assert CliRunner().invoke(cli, args).exit_code == 0, args\n")
        subprocess.run([sys.executable, "-c", code, json.dumps(rehearsed_jobs(guarded))], cwd=folder, env=env(),
                       check=True)
        (folder / "usage.json").write_text('{"total_tokens": 1000, "rl_5h": 0.1, "rl_7d": 0.1}')
        folders[guarded] = folder

    def simulate(until: str) -> list[str]:
        return sxctl("cron", "simulate", "--from", "2026-12-07T00:00Z", "--until", until, "--pass-every", "1m",
                     "--usage", "usage.json", "--json")

    samples: dict[str, list[float]] = {"day": [], "plain": [], "tick": []}
    for _ in range(runs):
        samples["day"].append(timed(simulate("2026-12-08T00:00Z"), folders[True]))
        samples["plain"].append(timed(simulate("2026-12-08T00:00Z"), folders[False]))
        samples["tick"].append(timed(sxctl("cron", "tick", "--dry-run", "-q"), folders[True]))
    week = statistics.median(timed(simulate("2026-12-14T00:00Z"), folders[True]) for _ in range(max(1, runs // 3)))
    day, plain, tick = (statistics.median(samples[name]) for name in ("day", "plain", "tick"))
    return [("(m) a day's cron simulate (1,440 passes, 20 jobs) / one cron tick --dry-run", day / tick, "<= 15",
             day / tick <= 15),
            ("(m) the same day, 5 jobs with spend guards / none", day / plain, "<= 2", day / plain <= 2),
            ("(m) a week's cron simulate (10,080 passes) / one cron tick --dry-run", week / tick, "(context)", True)]


if __name__ == "__main__":
    sys.exit(main())

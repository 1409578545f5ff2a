"""Mixed load, a bounded number of operations: senders, timer edits, cron edits and ticks against a
running reference agent, each a process of its own; then everything is checked for consistency."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from sxctl.callbacks.table import parse_table
from sxctl.cron.run.ledger import scan_ledger
from tests.comis_strict import check_store_bytes
from tests.conftest import Agent

pytestmark = pytest.mark.slow

#: each kind of operation at least as often as 12 s of new interpreters made it on a quiet machine
#: (90 to 190 operations in all); forks (tests/forks.py), ten times cheaper to start, make them in
#: a few seconds, all at once as before. The passes run until the rest is done.
QUOTA = {"sends": 150, "timer_edits": 8, "cron_edits": 16}
SID = "2026_09_21_quiet_euler"


def test_mixed_load_then_full_consistency(project, figures):
    agent = Agent(project, "--turn-seconds", "0.05")
    last_add = time.monotonic()
    sent: list[str] = []
    keyed: dict[str, str] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def count(kind: str) -> None:
        with lock:
            figures["operations"] += 1
            figures[kind] += 1

    def made(*kinds: str) -> bool:
        with lock:
            return all(figures[kind] >= QUOTA[kind] for kind in kinds)

    def sender(worker: int) -> None:
        n = 0
        while not made("sends"):
            key = f"w{worker}-{n // 3}" if n % 3 == 0 else None  # some sends repeat a key
            args = ["inbox", "send", f"w{worker}-{n}", "--no-wait", "--json"]
            if key:
                args[2] = f"keyed {key}"
                args += ["--key", key]
            result = project.fork(*args)
            count("sends")
            if result.code != 0:
                errors.append(f"send: {result.err}")
            else:
                doc = result.json()
                with lock:
                    if key:
                        if key in keyed and keyed[key] != doc["stem"]:
                            errors.append(f"key {key} gave two stems")
                        keyed[key] = doc["stem"]
                    if not doc["duplicate"]:
                        sent.append(doc["stem"])
            n += 1

    def timers(seed: int) -> None:  # a live agent's table is watched for 1 s after each write: two at once
        rng = random.Random(seed)
        while not made("timer_edits"):
            if rng.random() < 0.7:
                result = project.fork("cb", "set", "load timer", "--every", "1", "--repeat", "2", "--first-in", "0")
            else:
                result = project.fork("cb", "cancel-all")
            count("timer_edits")
            if result.code not in (0, 4):  # 4: slots full, or a lost update reported as such
                errors.append(f"timer: {result.err}")

    def cron_edits() -> None:
        nonlocal last_add
        n = 0
        while not made("cron_edits"):
            result = project.fork("cron", "add", f"job-{n}", "--in", "1", "--payload", "heartbeat-event", "--text",
                                  f"cron {n}")
            last_add = time.monotonic()
            count("cron_edits")
            if result.code != 0:
                errors.append(f"cron add: {result.err}")
            if n % 4 == 3:
                project.fork("cron", "remove", f"job-{n - 1}", "--yes")
                count("cron_edits")
            n += 1

    def ticks() -> None:
        while not made(*QUOTA):
            result = project.fork("cron", "tick", "--busy-ok", "--lock-wait", "2", "-q")
            count("ticks")
            if result.code != 0:
                errors.append(f"tick: {result.err}")
            time.sleep(0.05)

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=timers, args=(seed,)) for seed in (1, 2)]
    threads += [threading.Thread(target=f) for f in (cron_edits, ticks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    time.sleep(max(0.0, last_add + 1.5 - time.monotonic()))  # the last one-shot jobs (`--in 1`) come due
    assert project.run("cron", "tick", "--max-runs", "1000").code == 0
    assert project.run("cb", "cancel-all").code in (0, 4)
    folder = agent.dir
    deadline = time.monotonic() + 60
    while list((folder / "inbox").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    agent.stop()

    assert errors == []
    # every message written was consumed exactly once (by the agent's claim-by-rename)
    done = {p.stem for p in (folder / "inbox" / "done").glob("*.json")}
    assert not list((folder / "inbox").glob("*.json"))
    assert set(sent) <= done
    turns = [e["ref"] for e in agent.events if e["event"] == "turn_start" and e["source"] == "inbox"]
    interrupts = [e for e in agent.events if e["event"] == "inbox" and e["action"] in ("interrupt", "queued")]
    assert len(turns) == len(set(turns)) and len(turns) + len(interrupts) == len(done)
    # timers: a valid table, nothing lost silently
    parse_table(folder / "callbacks.json", (folder / "callbacks.json").read_bytes())
    # cron: a strictly valid store and ledger, no claim left, one start and one terminal per run
    assert check_store_bytes((project.root / ".scheduler" / "cron-jobs.json").read_bytes()) == []
    assert json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())["activeClaims"] == []
    ledger = scan_ledger(project.root / ".scheduler" / "cron-executions.jsonl")
    assert all(g.start and g.terminal for g in ledger.groups.values())
    assert project.run("cron", "validate").code == 0
    figures["files_checked"] += len(done) + len(ledger.groups) + 3
    print(f"\nKINDS {dict(figures)}\nload: {figures['operations']} operations, {len(done)} messages consumed, "
          f"{len(ledger.groups)} cron runs, problems found: 0")

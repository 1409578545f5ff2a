"""Histories for the scale rows of `benchmarks/run.py`, built in seconds by writing the files an
agent leaves behind directly (not through 100,000 CLI calls): consumed messages in `inbox/done/`
spread over months, many session folders, a full ledger, a big store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DAY_MS = 86_400_000


def make_session(project: Path, sid: str, *, live: bool = True) -> Path:
    session = project / ".scorpiox" / "sessions" / sid
    (session / "inbox" / "done").mkdir(parents=True, exist_ok=True)
    stats = {"updated_ms": time.time_ns() // 1_000_000 if live else 0, "model": "bench"}
    (session / "stats.json").write_text(json.dumps(stats))
    (session / "callbacks.json").write_text(json.dumps({"rev": 1, "updated_ms": 0, "paused": False, "slots": []}))
    return session


def make_consumed(session: Path, count: int, *, days: int = 90) -> None:
    """`count` consumed messages, sent (their names say when) evenly over the last `days` days."""
    done = session / "inbox" / "done"
    now = time.time_ns() // 1_000_000
    step = days * DAY_MS // max(count, 1)
    body = json.dumps({"text": "a consumed message of the benchmark history", "mode": "queue"}).encode() + b"\n"
    folder = os.open(done, os.O_RDONLY)
    try:
        for n in range(count):
            sent = now - days * DAY_MS + n * step
            name = f"{sent // 1000:010d}_{(sent % 1000) * 1_000_000 + n % 1_000_000:09d}.json"
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=folder)
            os.write(fd, body)
            os.close(fd)
    finally:
        os.close(folder)


def make_sessions(project: Path, count: int) -> None:
    """`count` session folders, one a day back from today, each with a few pending messages."""
    today = time.time()
    for n in range(count):
        day = time.strftime("%Y_%m_%d", time.gmtime(today - n * 86_400))
        session = make_session(project, f"{day}_bench_{n:05d}", live=n == 0)
        for m in range(2):
            (session / "inbox" / f"{1_700_000_000 + n:010d}_{m:09d}.json").write_text(
                '{"text": "pending", "mode": "queue"}\n')

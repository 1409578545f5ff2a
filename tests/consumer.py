"""A strict stand-in for the agent's inbox consumer, written from the upstream docs
(SCORPIOX CODE docs/send-messages.md), not from sxctl's code:

- poll the inbox every frame; ignore `*.tmp` and anything that is not `<stem>.json`;
- sort the pending names and take ONE file per pass, in name order;
- read it, then move it (and its image sidecar, same stem) to `inbox/done/`.

Strictness: every read must be a complete, valid message object; anything else is logged as a
violation. It also refreshes `stats.json` so the session counts as live.

Run: python consumer.py SESSION_DIR LOG_FILE STOP_FILE [POLL_SECONDS]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

IMAGE_EXTS = ("png", "jpg", "jpeg", "gif", "webp")


def write_stats(session: Path) -> None:
    temp = session / "stats.json.consumer.tmp"
    temp.write_text(json.dumps({"updated_ms": time.time_ns() // 1_000_000, "model": "stand-in"}))
    os.replace(temp, session / "stats.json")


def one_pass(inbox: Path, log) -> bool:
    try:
        names = sorted(n for n in os.listdir(inbox) if n.endswith(".json"))
    except FileNotFoundError:
        return False
    if not names:
        return False
    name = names[0]
    stem = name[: -len(".json")]
    path = inbox / name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        log.write(json.dumps({"violation": f"{name} vanished between listing and reading"}) + "\n")
        return True
    record: dict = {"stem": stem, "bytes": len(raw)}
    try:
        message = json.loads(raw)
        if not isinstance(message, dict) or message.get("mode") not in ("auto", "interrupt", "queue"):
            raise ValueError("not a message object")
        record.update(text=message.get("text"), mode=message["mode"])
    except ValueError as exc:
        record["violation"] = f"torn or invalid read of {name}: {exc}: {raw[:80]!r}"
    sidecars = [ext for ext in IMAGE_EXTS if (inbox / f"{stem}.{ext}").exists()]
    record["image"] = sidecars[0] if sidecars else None
    done = inbox / "done"
    done.mkdir(exist_ok=True)
    os.rename(path, done / name)
    for ext in sidecars:
        os.rename(inbox / f"{stem}.{ext}", done / f"{stem}.{ext}")
    log.write(json.dumps(record) + "\n")
    log.flush()
    return True


def main() -> None:
    session, log_path, stop_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    poll = float(sys.argv[4]) if len(sys.argv) > 4 else 0.005
    inbox = session / "inbox"
    last_stats = 0.0
    with open(log_path, "a") as log:
        while True:
            if time.monotonic() - last_stats > 0.5:
                write_stats(session)
                last_stats = time.monotonic()
            busy = one_pass(inbox, log)
            if not busy:
                if stop_file.exists():
                    return
                time.sleep(poll)


if __name__ == "__main__":
    main()

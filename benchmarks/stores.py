"""Stores for the scale rows of `benchmarks/run.py` (issue #41): jobs as users write them, not one
job copied — about 50 distinct cron expressions in several zones, `every` and `at` jobs — written
straight into the comis store (and sxctl's policy file) instead of through 10,000 `cron add`s."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "America/Sao_Paulo")
MINUTES = ("0", "5", "15", "30", "45", "*/5", "*/15", "10,40", "7")
HOURS = ("*", "9", "9-17", "*/2", "0", "6,18", "12", "22")
DAYS = ("* * *", "* * 1-5", "* * mon-fri", "1 * *", "* * 0,6", "1,15 * *")
EXPRESSIONS = 50
#: the policy file of the "with policies" store: 1 job in this many has active hours that open
#: 2 to 6 hours from now (a preview must find the next window, not step to it)
ACTIVE_HOURS_EVERY = 70


def expressions(seed: int = 41) -> list[str]:
    rng = random.Random(seed)
    found: set[str] = set()
    while len(found) < EXPRESSIONS:
        found.add(f"{rng.choice(MINUTES)} {rng.choice(HOURS)} {rng.choice(DAYS)}")
    return sorted(found)


def make_varied_store(root: Path, jobs: int, now_ms: int, *, policies: bool = False, seed: int = 41) -> None:
    """A workspace store of `jobs` jobs: 80 % cron (the 50 expressions, each in one of the zones),
    15 % every, 5 % at; with `policies`, sxctl's policy file gives 1 job in ACTIVE_HOURS_EVERY
    active hours in its zone that open 2–6 hours ahead of `now_ms`."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from sxctl.jsondata import compact_json

    rng = random.Random(seed)
    exprs = expressions(seed)
    store: dict = {"formatVersion": 1, "agentSchedulerSeed": str(uuid.UUID(int=rng.getrandbits(128))),
                   "activeClaims": [], "jobs": []}
    entries: dict = {}
    for n in range(jobs):
        job_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        zone = rng.choice(ZONES)
        pick = rng.random()
        if pick < 0.80:
            schedule = {"kind": "cron", "expr": exprs[n % len(exprs)], "tz": zone}
            next_run = now_ms + rng.randrange(60_000, 86_400_000)  # the pass sets it; previews recompute
        elif pick < 0.95:
            every = rng.choice((60_000, 300_000, 900_000, 3_600_000, 86_400_000))
            schedule = {"kind": "every", "everyMs": every, "anchorMs": now_ms - rng.randrange(every)}
            next_run = schedule["anchorMs"] + every
        else:
            schedule = {"kind": "at", "atMs": now_ms + rng.randrange(3_600_000, 30 * 86_400_000)}
            next_run = schedule["atMs"]
        store["jobs"].append({
            "id": job_id, "name": f"job-{n:05d}", "agentId": "default", "schedule": schedule,
            "lifecycle": {"status": "scheduled", "nextRunAtMs": next_run, "consecutiveDependencyErrors": 0},
            "source": "authored", "payload": {"kind": "heartbeat_event", "text": f"beat {n}", "wakeMode": "now"},
        })
        if policies and n % ACTIVE_HOURS_EVERY == 0 and schedule["kind"] != "at":
            local = datetime.fromtimestamp(now_ms / 1000, UTC).astimezone(ZoneInfo(zone))
            opens = (local.hour + rng.randrange(2, 7)) % 24
            entry = {"activeHours": f"{opens:02d}:00-{(opens + 1) % 24:02d}:00"}
            if schedule["kind"] == "every":
                entry["tz"] = zone
            entries[job_id] = entry
    scheduler = root / ".scheduler"
    scheduler.mkdir(parents=True, exist_ok=True)
    (scheduler / "cron-jobs.json").write_bytes(compact_json(store))
    if entries:
        (scheduler / "sxctl-policy.json").write_text(json.dumps({"formatVersion": 2, "jobs": entries}))


#: the rehearsal of issue #41: 20 jobs as a workspace has them (periods of 15 minutes to a day, 4 of
#: each), 5 of them with spend guards
REHEARSED = (("every", "15m"), ("every", "30m"), ("cron", "7 * * * *"), ("every", "2h"), ("cron", "30 6 * * *"))
GUARDS = ("--max-tokens-per-day", "1000000000", "--max-session-tokens", "1000000000", "--rate-limit-ceiling", "0.99")


def rehearsed_jobs(guarded: bool) -> list[list[str]]:
    """The `cron add` arguments of the rehearsal's 20 jobs (anchored a few minutes apart)."""
    adds = []
    for n in range(20):
        kind, value = REHEARSED[n % len(REHEARSED)]
        schedule = ["--every", value, "--anchor", f"2026-12-06T00:{n:02d}Z"] if kind == "every" else ["--cron", value]
        adds.append(["cron", "add", f"job{n}", *schedule, "--payload", "heartbeat-event", "--text", f"job {n}", "-q",
                     *(GUARDS if guarded and n < 5 else ())])
    return adds

"""One timeline, checked differentially (docs/timeline.md): random jobs and policies, random
machine-off and agent-down spans over two days. Real passes, driven by the injectable clock, do
occurrence by occurrence what `cron simulate` predicted; and before every pass, the next run and
mark that `cron list` shows for each job is what the pass then does with it. The seed is printed
on failure and on a timeout (`SXCTL_TEST_SEED=N` replays one world; `SXCTL_TEST_WORLDS=N` hunts
in N of them)."""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes

pytestmark = pytest.mark.slow

SID = "2026_12_01_differential"
MIN = 60_000
HOUR = 60 * MIN
START = int(datetime(2026, 12, 1, 6, 0, tzinfo=UTC).timestamp() * 1000)  # a Tuesday
SPAN = 48 * HOUR
PASS_EVERY = 15 * MIN
WORLDS = int(os.environ.get("SXCTL_TEST_WORLDS") or 3)  # more: a longer hunt


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _span(rng: random.Random) -> tuple[int, int]:
    start = START + rng.randrange(0, SPAN - 2 * HOUR, 5 * MIN)
    return start, min(START + SPAN, start + rng.randrange(1, 20) * 37 * MIN)


def _world(rng: random.Random) -> tuple[list[list[str]], list[tuple[int, int]], list[tuple[int, int]]]:
    """Jobs (each a `cron add` argument list), machine-off spans and agent-down spans."""
    jobs = []
    for index in range(rng.randint(2, 4)):
        zone = rng.choice(["UTC", "Europe/Berlin", "America/New_York"])
        if rng.random() < 0.5:
            schedule = ["--cron", rng.choice(["0 */3 * * *", "30 9 * * 1-5", "0 22 * * *", "15 8,13,18 * * *",
                                              "*/40 * * * *"]), "--tz", zone]
        else:
            schedule = ["--every", rng.choice(["45m", "1h", "90m", "2h"]), "--tz", zone]
        policy: list[str] = []
        hold = rng.choice([None, "0", "30m", "2h", "24h"])
        if hold is not None:
            policy += ["--hold-max", hold]
        if rng.random() < 0.3:
            policy += ["--catch-up", "skip", "--stale-after", rng.choice(["20m", "2h"])]
        if rng.random() < 0.4:
            policy += ["--active-hours", rng.choice(["08:00-18:00", "22:00-06:00", "09:30-12:00"])]
            if rng.random() < 0.5:
                policy += ["--active-days", "mon-fri"]
        if rng.random() < 0.3:
            policy += ["--max-runs-per-day", rng.choice(["1", "2"])]
        if rng.random() < 0.2:
            policy += ["--max-runs", rng.choice(["3", "6"])]
        if rng.random() < 0.3:
            policy += ["--jitter", "7m"]
        payload = rng.choice(["agent-turn", "heartbeat-event"])
        jobs.append([f"job{index}", *schedule, "--payload", payload, "--text", f"job {index}", *policy])
    machine = sorted(_span(rng) for _ in range(rng.randint(0, 2)))
    agent = sorted(_span(rng) for _ in range(rng.randint(0, 2)))
    return jobs, machine, agent


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    return any(start <= at < end for start, end in spans)


def _events(doc: dict, at: int, held: set) -> list[tuple]:
    """One pass's occurrences as `cron simulate` lists them (sxctl.cron.run.rehearsal._events)."""
    events = []
    for skip in doc["skippedOccurrences"]:
        events.append((at, skip["name"], "skipped", skip["firstMs"], skip["count"], skip["reason"]))
    for wait in doc["waiting"]:
        if (wait["jobId"], wait["dueSinceMs"]) not in held:
            held.add((wait["jobId"], wait["dueSinceMs"]))
            events.append((at, wait["name"], "held", wait["dueSinceMs"], 1, wait["reason"]))
    for paused in doc["paused"]:
        events.append((at, paused["name"], "paused", None, 1, paused["reason"]))
    given_up = {row["jobId"] for row in doc["givenUp"]}
    for run in doc["runs"]:
        skipped = run.get("skipped_occurrences", 0)
        fate = ("given_up" if run["jobId"] in given_up else "failed" if run.get("reason")
                else "catch_up" if run["trigger"] == "catchup" else "dispatched")
        events.append((at, run["name"], fate, run["scheduledForMs"], 1 + (skipped if isinstance(skipped, int)
                                                                          else 10_000), run.get("reason")))
    for deferred in doc["deferred"]:
        events.append((at, deferred["name"], "deferred", deferred["nextRunAtMs"], 1,
                       "--max-catchup" if deferred.get("reason") == "max_catchup" else "--max-per-pass"))
    return events


def _check_views(rows: list[dict], doc: dict, at: int, where: str) -> None:
    """What `cron list` showed just before the pass at `at` is what the pass did with each job."""
    ran = {run["name"] for run in doc["runs"]} | {row["name"] for row in doc["deferred"]}
    waiting = {row["name"] for row in doc["waiting"]}
    given_up = {row["name"] for row in doc["givenUp"]}
    for row in rows:
        name, first, mark = row["job"]["name"], row["next_run_ms"], row.get("next_mark")
        if row["state"] != "scheduled":
            continue
        did = ("ran" if name in ran - given_up else "held" if name in waiting
               else "given up" if name in given_up else "nothing")
        if first is None or first > at:
            expected = "nothing"
        else:
            expected = {"waiting for agent": "held", "given up": "given up", "due": "ran", "overdue": "ran"}.get(mark or "", mark)
            if (mark or "").startswith("held:"):
                expected = "held"
        assert did == expected, f"{where}: cron list showed {name} next at {first and _iso(first)} ({mark}); " \
                                f"the pass at {_iso(at)} {did}"


def _read_all(folder) -> None:
    """The agent reads every pending message at once (as the simulated agent does)."""
    inbox = folder / "inbox"
    if inbox.is_dir():
        (inbox / "done").mkdir(exist_ok=True)
        for path in sorted(inbox.glob("*.json")):
            path.rename(inbox / "done" / path.name)


@pytest.mark.parametrize("world_no", range(WORLDS))
def test_real_passes_do_what_cron_simulate_predicted_and_what_the_views_showed(project, world_no):
    seed = int(os.environ.get("SXCTL_TEST_SEED") or random.randrange(2**32))
    where = f"seed {seed} (SXCTL_TEST_SEED={seed} replays it)"
    print(where)  # shown by a timeout too
    rng = random.Random(seed)
    jobs, machine, agent = _world(rng)
    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    for args in jobs:
        added = project.run("cron", "add", *args, clock=FakeClock(START - HOUR))
        assert added.code == 0, f"{where}: {args}: {added.err}"
    spans = [f"{_iso(a)}..{_iso(b)}" for a, b in machine]
    downs = [f"{_iso(a)}..{_iso(b)}" for a, b in agent]
    simulated = project.run("cron", "simulate", "--from", _iso(START), "--until", _iso(START + SPAN),
                            "--pass-every", "15m", *(x for s in spans for x in ("--machine-down", s)),
                            *(x for s in downs for x in ("--agent-down", s)), "--json", clock=FakeClock(START))
    assert simulated.code == 0, f"{where}: {simulated.err}"
    predicted = sorted((e["pass_ms"], e["job"], e["fate"], e["occurrence_ms"], e["count"], e["reason"])
                       for e in simulated.json()["events"] if e["fate"] != "elsewhere")

    happened: list[tuple] = []
    held: set = set()
    store = project.root / ".scheduler" / "cron-jobs.json"
    for at in range(START, START + SPAN + 1, PASS_EVERY):
        if _inside(machine, at):
            continue
        up = not _inside(agent, at)
        if up:
            (folder / "stats.json").write_text(json.dumps({"updated_ms": at, "model": "differential"}))
        listed = project.run("cron", "list", "--json", clock=FakeClock(at))
        assert listed.code == 0, f"{where}: {listed.err}"
        ticked = project.run("cron", "tick", "--json", clock=FakeClock(at))
        assert ticked.code == 0, f"{where}: pass at {_iso(at)}: {ticked.err}"
        assert check_store_bytes(store.read_bytes()) == [], where  # comis still loads it
        doc = ticked.json()
        _check_views(listed.json()["jobs"], doc, at, where)
        happened += _events(doc, at, held)
        if up:
            _read_all(folder)
    happened.sort(key=lambda e: tuple((x is None, x) for x in e))
    predicted.sort(key=lambda e: tuple((x is None, x) for x in e))
    assert happened, f"{where}: no occurrence came due in two days"
    first_difference = next((i for i, (a, b) in enumerate(zip(happened, predicted, strict=False)) if a != b),
                            min(len(happened), len(predicted)))
    assert happened == predicted, (f"{where}: jobs {jobs}, machine off {spans}, agent down {downs}; first "
                                   f"difference at {first_difference}: real {happened[first_difference:][:3]} "
                                   f"simulated {predicted[first_difference:][:3]}")

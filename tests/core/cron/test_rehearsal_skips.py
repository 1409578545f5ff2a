"""`cron simulate` counts, without running it, a pass in which nothing can happen (issue #41: a
day of 1,440 passes took 3 minutes). What it tells must be what running every pass tells: each
workspace below, drawn at random from the policies a pass decides by, is rehearsed both ways and
the two results must be equal, event for event."""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from sxctl.cron.run import rehearsal
from sxctl.cron.store.workspace import Workspace

START = int(datetime(2026, 12, 5, 22, 0, tzinfo=UTC).timestamp() * 1000)  # a Saturday night, UTC
MIN, HOUR = 60_000, 3_600_000
SEEDS = [int(s) for s in os.environ.get("SXCTL_TEST_SEED", "").split(",") if s] or [41, 4102, 7, 10]

POLICIES = (
    (), ("--active-hours", "08:00-18:00", "--tz", "Europe/Berlin"), ("--active-days", "mon-fri"),
    ("--max-runs-per-day", "2"), ("--max-runs", "3"), ("--until", "2026-12-06T20:00Z"),
    ("--hold-max", "40m"), ("--hold-max", "0"), ("--catch-up", "skip", "--stale-after", "15m"),
    ("--jitter", "9m"), ("--overlap", "skip"), ("--max-unconsumed", "2"), ("--host", "elsewhere"),
    ("--rate-limit-ceiling", "0.5", "--hold-max", "3h"), ("--max-tokens-per-day", "400"),
)
SCHEDULES = (("--every", "20m"), ("--every", "45m"), ("--every", "3h"), ("--cron", "*/30 7-19 * * *"),
             ("--cron", "0 9 * * 1-5", "--tz", "America/New_York"), ("--cron", "15 */2 * * *"),
             ("--at", "2026-12-06T09:05Z"))


def workspace(project, rng: random.Random, tokens: bool) -> None:
    folder = project.root / ".scorpiox" / "sessions" / "2026_12_05_quiet_euler"
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": START, "model": "m"}))
    fixed = {0: (("--every", "20m"), ("--max-tokens-per-day", "400") if tokens else ()),  # the runs' tokens
             1: (("--every", "45m"), ("--to", folder.name))}  # sent while the agent is away, read on its return
    for n in range(rng.randrange(6, 11)):
        schedule = rng.choice(SCHEDULES)
        policy = () if schedule[0] == "--at" else rng.choice(POLICIES)
        schedule, policy = fixed.get(n, (schedule, policy))
        if "--tz" in schedule and "--tz" in policy:
            policy = ()
        payload = ("agent-turn",) if "--to" in policy else ("heartbeat-event",)
        args = ("cron", "add", f"job{n}", *schedule, *policy, "--payload", *payload, "--text", f"job {n}")
        result = project.run(*args, clock=FakeClock(START - rng.randrange(1, 90) * MIN))
        assert result.code == 0, (args, result.err)
    if rng.random() < 0.5:
        assert project.run("cron", "pause", "--all", "--until", "2026-12-06T01:00Z", "--reason", "upgrade",
                           clock=FakeClock(START)).code == 0


def usage_steps(rng: random.Random) -> list[tuple[int, dict]]:
    """The agent's figures: its rate over the ceiling for a while, its tokens growing."""
    steps, tokens = [], 1000
    for at in range(START, START + 40 * HOUR, 10 * MIN):
        tokens += rng.randrange(30, 200)
        steps.append((at, {"total_tokens": tokens, "rl_5h": rng.choice((0.1, 0.7)), "rl_7d": 0.1}))
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("tokens", [True, False], ids=["tokens", "no-usage"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_rehearsal_that_skips_quiet_passes_tells_what_running_every_pass_tells(project, seed, tokens, monkeypatch):
    """With the agent's token counters, every run opens an attribution the next pass may close;
    without them, only the jobs' own times and the agent's comings and goings wake a pass."""
    rng = random.Random(seed)
    workspace(project, rng, tokens)
    monkeypatch.setenv("SXCTL_HOST", "here")
    hours = sorted(rng.sample(range(4, 38), 4))  # the agent away after the maintenance window
    options = {
        "from_ms": START, "until_ms": START + 40 * HOUR, "pass_every_ms": rng.choice((3 * MIN, 5 * MIN, 10 * MIN)),
        "agent_down": [(START + hours[0] * HOUR, START + hours[1] * HOUR + 7 * MIN)],
        "machine_down": [(START + hours[2] * HOUR + 3 * MIN, START + hours[3] * HOUR)],
        "usage": usage_steps(rng) if tokens else None, "max_per_pass": rng.choice((1, 3)), "environ": {"SXCTL_HOST": "here"},
    }
    ws = Workspace(project.root)
    counted = rehearsal.rehearse(ws, project.root, **options)
    every = rehearsal.rehearse(ws, project.root, every_pass=True, **options)
    assert counted.passes == every.passes > 0, f"seed {seed}"
    assert counted.pings == every.pings, f"seed {seed}"
    for n, (mine, theirs) in enumerate(zip(counted.events, every.events, strict=False)):
        assert mine == theirs, f"seed {seed}: event {n} differs"
    assert len(counted.events) == len(every.events), f"seed {seed}"
    fates = {event["fate"] for event in every.events}
    assert {"skipped", "held"} <= fates and fates & {"dispatched", "catch_up"}, \
        f"seed {seed}: a rehearsal that tests little: {fates}"
    reasons = {event["reason"] for event in every.events}
    assert "max_tokens_per_day" in reasons or not tokens, f"seed {seed}: no run was held to its tokens: {reasons}"
    late = [e for e in every.events if e.get("read_ms") and e["read_ms"] > e["pass_ms"]]
    assert late, f"seed {seed}: no message waited for the agent's return"


def test_a_message_sent_while_the_agent_is_away_is_read_at_the_first_pass_after_it_returns(project):
    """Only a job for a named session, sent while its agent is away: no pass is due when the
    agent returns, yet the rehearsal must show the message read then, as running every pass does."""
    folder = project.root / ".scorpiox" / "sessions" / "2026_12_05_quiet_euler"
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": START, "model": "m"}))
    assert project.run("cron", "add", "report", "--every", "2h", "--anchor", "2026-12-05T23:00Z", "--to", folder.name,
                       "--payload", "agent-turn", "--text", "report", clock=FakeClock(START)).code == 0
    options = {"from_ms": START, "until_ms": START + 6 * HOUR, "pass_every_ms": MIN, "environ": {},
               "agent_down": [(START + 30 * MIN, START + 90 * MIN)]}  # away 22:30-23:30: the 23:00 run waits
    for every_pass in (False, True):
        found = rehearsal.rehearse(Workspace(project.root), project.root, every_pass=every_pass, **options)
        sent = next(event for event in found.events if event["occurrence_ms"] == START + HOUR)
        assert (sent["fate"], sent["read_ms"]) == ("dispatched", START + 90 * MIN), (every_pass, sent)


def test_a_rehearsal_copies_of_a_long_history_only_the_read_messages_of_the_runs_it_knows(project, monkeypatch):
    """A session that has read 3,000 messages: 433 passes over a big inbox took 1 m 43 s. The
    passes look up only messages of the runs the ledger or the store knows; the copy holds those
    sent since the oldest of them (less a day), not the rest, and no transcript-sized file."""
    from sxctl.cron.run import rehearsal_copy

    folder = project.root / ".scorpiox" / "sessions" / "2026_12_05_quiet_euler"
    (folder / "inbox" / "done").mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": START, "model": "m"}))
    for n in range(3000):
        (folder / "inbox" / "done" / f"{1_700_000_000 + n}_{n:09d}.json").write_text('{"text": "old", "mode": "queue"}')
    with open(folder / "transcript.jsonl", "wb") as transcript:  # 8 MiB, sparse: 8 MiB of memory in a copy
        transcript.truncate(8 * 1024 * 1024)
    assert project.run("cron", "add", "beat", "--every", "1h", "--overlap", "skip", "--payload", "heartbeat-event",
                       "--text", "beat", clock=FakeClock(START - 2 * HOUR)).code == 0
    for at in (START - HOUR, START):  # two runs, read by the agent: the ledger names their messages
        (folder / "stats.json").write_text(json.dumps({"updated_ms": at, "model": "m"}))
        assert "ran beat" in project.run("cron", "tick", clock=FakeClock(at)).out
        for sent in (folder / "inbox").glob("*.json"):
            sent.rename(folder / "inbox" / "done" / sent.name)
    copied: list[str] = []
    real_copy = rehearsal_copy.shutil.copy2
    monkeypatch.setattr(rehearsal_copy.shutil, "copy2", lambda src, dst, **kw: (copied.append(str(src)),
                                                                               real_copy(src, dst, **kw))[1])
    found = rehearsal.rehearse(Workspace(project.root), project.root, from_ms=START + MIN, until_ms=START + 3 * HOUR,
                               pass_every_ms=MIN, agent_down=[], environ={})
    read = [path for path in copied if f"{os.sep}done{os.sep}" in path]
    assert len(read) == 2, read
    assert not [path for path in copied if path.endswith("transcript.jsonl")]
    assert [event["fate"] for event in found.events] == ["dispatched"] * 3  # its last message was read: no overlap


def test_a_message_sent_by_a_killed_pass_and_read_is_in_the_copy(project, monkeypatch):
    """A pass killed after it sent `beat`'s message; the agent read it; the next pass settled the
    run as unknown (no terminal row names the message: a pass finds it by its key). The copy must hold it, as a copy of every read message
    does: without it the rehearsal counted the killed run for nothing."""
    import time

    from sxctl.cron.run import rehearsal_copy

    folder = project.session()
    assert project.run("cron", "add", "beat", "--every", "30m", "--max-runs", "2", "--payload", "heartbeat-event",
                       "--text", "beat").code == 0
    assert project.process("cron", "run", "beat", "--fault-inject", "after-dispatch").code == 99
    [sent] = (folder / "inbox").glob("*.json")
    (folder / "inbox" / "done").mkdir(exist_ok=True)
    sent.rename(folder / "inbox" / "done" / sent.name)
    assert project.run("cron", "tick").code == 0  # settles the killed run: unknown, no stem in its terminal
    start = time.time_ns() // 1_000_000 + 2 * MIN
    options = {"from_ms": start, "until_ms": start + 3 * HOUR, "pass_every_ms": MIN, "agent_down": [], "environ": {}}
    found = rehearsal.rehearse(Workspace(project.root), project.root, **options)
    monkeypatch.setattr(rehearsal_copy, "_oldest_run_s", lambda sim_ws: None)  # every read message copied
    everything = rehearsal.rehearse(Workspace(project.root), project.root, **options)
    assert found.events == everything.events
    assert found.events[0]["fate"] == "dispatched" and "expired" in [e["reason"] for e in found.events]


@pytest.mark.slow
@pytest.mark.real_time
@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_ends_a_rehearsal_as_ctrl_c_does_and_removes_its_copy(project, tmp_path, signum):
    """A CI runner cancelling its step sends SIGTERM, a closed terminal SIGHUP: the copy (in
    memory, when /dev/shm has room) stayed behind for good. It ends as Ctrl-C does (exit 130), the
    copy removed, and says nothing was written (a send cut in the copy said a message "was written
    and is pending" in the user's inbox)."""
    import signal
    import subprocess
    import sys
    import time

    project.session()
    for n in range(20):
        assert project.run("cron", "add", f"j{n}", "--every", "2m", "--payload", "heartbeat-event",
                           "--text", "x").code == 0
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(Path(rehearsal.__file__).parents[3])}
    started = subprocess.Popen([sys.executable, "-m", "sxctl", "--project", str(project.root), "cron", "simulate",
                                "--from", "2030-01-01T00:00Z", "--until", "2030-01-07T00:00Z", "--json"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list(scratch.glob("sxctl-simulate-*/*/.scheduler")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the copy is made: its passes run
    assert list(scratch.glob("sxctl-simulate-*")), "the rehearsal never started"
    started.send_signal(getattr(signal, signum))
    out, err = started.communicate(timeout=60)
    assert started.returncode == 130, err
    assert list(scratch.iterdir()) == [], list(scratch.iterdir())
    error = json.loads(out.decode().strip().splitlines()[-1])["error"]
    assert error["message"] in ("interrupted", "interrupted (nothing was written in the project)"), error

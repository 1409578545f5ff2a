"""Host pinning (`--host NAME|any`): a pinned job is run only by a pass on its host; every host
keeps its own heartbeat (`.scheduler/sxctl-tick/<host>.json`), and doctor and the metrics see
each host's last pass."""

from __future__ import annotations

import json

import pytest

from sxctl.clock import FakeClock
from tests.core.cron.test_scheduling import MIN, NINE
from tests.core.observe.test_metrics import parse

from . import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

HEARTBEAT = ("--payload", "heartbeat-event", "--text", "x")


def on(sched, host: str, ms: int, *args: str):
    return sched.run(ms, *args, env=sched.env(SXCTL_HOST=host))


def tick_on(sched, host: str, ms: int) -> dict:
    sched.agent_at(ms)  # a live agent: a run is not held
    result = on(sched, host, ms, "cron", "tick", "--json")
    assert result.code == 0, result.err
    return result.json()


def store_job(sched, name: str) -> dict:
    store = json.loads((sched.root / ".scheduler" / "cron-jobs.json").read_text())
    return next(job for job in store["jobs"] if job["name"] == name)


def checks(result, name: str) -> list[dict]:
    return [c for c in result.json()["checks"] if c["check"] == name]


def test_a_pinned_job_is_run_only_by_its_host_and_the_other_host_says_so(sched):
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "pinned", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--host", "alpha", *HEARTBEAT)
    sched.add(NINE - MIN, "free", "--every", "1h", "--anchor", "2026-12-01T09:00Z", *HEARTBEAT)
    assert sched.job("pinned")["policy"]["host"] == "alpha" and sched.job("free")["policy"]["host"] == "any"
    listing = sched.run(NINE, "cron", "list", "--json").json()
    assert {row["job"]["name"]: (row["policy"] or {}).get("host") for row in listing["jobs"]} == {
        "pinned": "alpha", "free": None}  # no entry: every default
    report = tick_on(sched, "beta", NINE + MIN)
    assert [run["name"] for run in report["runs"]] == ["free"]
    assert report["host"] == "beta"
    assert [(row["name"], row["host"], row["nextRunAtMs"]) for row in report["pinnedElsewhere"]] == [
        ("pinned", "alpha", NINE)]
    assert store_job(sched, "pinned")["lifecycle"]["nextRunAtMs"] == NINE  # left alone: not claimed, not skipped
    assert tick_on(sched, "beta", NINE + 2 * MIN)["runs"] == []
    report = tick_on(sched, "alpha", NINE + 3 * MIN)
    assert [run["name"] for run in report["runs"]] == ["pinned"] and report["pinnedElsewhere"] == []
    assert store_job(sched, "pinned")["lifecycle"]["nextRunAtMs"] == NINE + 60 * MIN
    beats = sched.root / ".scheduler" / "sxctl-tick"
    assert sorted(p.name for p in beats.iterdir()) == ["alpha.json", "beta.json"]
    assert json.loads((beats / "beta.json").read_text())["host"] == "beta"
    upcoming = sched.run(NINE + 3 * MIN, "cron", "next", "--json", "-n", "4").json()["fires"]
    assert {(f["name"], f["host"]) for f in upcoming} == {("pinned", "alpha"), ("free", None)}
    assert "on host alpha" in sched.run(NINE + 3 * MIN, "cron", "next", "-n", "4").out
    assert "only on host alpha" in sched.run(NINE + 3 * MIN, "cron", "show", "pinned").out
    assert sched.run(NINE + 4 * MIN, "cron", "update", "pinned", "--host", "any").code == 0
    assert sched.job("pinned")["policy"]["host"] == "any"


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".hidden", "x\ny", "tab\there", "a" * 254, "any", "", "é"])
def test_a_host_name_that_could_leave_its_folder_or_lie_is_refused(sched, name):
    sched.add(NINE, "job", "--every", "1h", *HEARTBEAT)
    result = sched.run(NINE, "cron", "update", "job", "--host", name)
    if name.lower() == "any":
        assert result.code == 0
        return
    assert result.code == 2 and "invalid --host" in result.err and "Traceback" not in result.err
    if name:
        tick = on(sched, name, NINE, "cron", "tick")
        assert tick.code == 2 and "SXCTL_HOST" in tick.err
    assert not (sched.root / ".scheduler" / "sxctl-tick").exists()
    assert not (sched.root / ".scheduler" / "x.json").exists() and not (sched.root / "x.json").exists()


def test_doctor_shows_every_host_and_fails_a_pinned_job_whose_host_stopped(sched):
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "pinned", "--every", "1h", "--host", "alpha", *HEARTBEAT)
    tick_on(sched, "beta", NINE)
    doctor = sched.run(NINE + MIN, "doctor", "--json")
    [hosts] = checks(doctor, "hosts")
    assert doctor.code == 9 and hosts["status"] == "fail" and "pinned to host alpha, which has never run a pass" \
        in hosts["message"] and "--host any" in hosts["fix"]
    tick_on(sched, "alpha", NINE + MIN)
    doctor = sched.run(NINE + 2 * MIN, "doctor", "--json")
    [hosts] = checks(doctor, "hosts")
    assert hosts["status"] == "ok" and "alpha 1m0s ago (ok)" in hosts["message"] and "beta 2m0s ago" in hosts["message"]
    tick_on(sched, "beta", NINE + 5 * MIN)  # beta still ticks; alpha stopped 4 minutes ago
    doctor = sched.run(NINE + 5 * MIN, "doctor", "--json")
    [hosts] = checks(doctor, "hosts")
    [scheduler] = checks(doctor, "scheduler")
    assert scheduler["status"] == "ok"  # a pass runs here ...
    assert hosts["status"] == "fail" and "has not run a pass for 4m0s" in hosts["message"]  # ... not on alpha


def test_doctor_warns_when_two_hosts_tick_one_workspace_without_pins(sched):
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "free", "--every", "1h", *HEARTBEAT)
    tick_on(sched, "alpha", NINE)
    assert checks(sched.run(NINE + MIN, "doctor", "--json"), "hosts") == []  # one host, no pin: nothing to say
    tick_on(sched, "beta", NINE + MIN)
    [hosts] = checks(sched.run(NINE + 2 * MIN, "doctor", "--json"), "hosts")
    assert hosts["status"] == "warn" and "2 hosts (alpha, beta)" in hosts["message"] and "free" in hosts["message"]


def test_the_old_single_heartbeat_is_still_read(sched):
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "free", "--every", "1h", *HEARTBEAT)
    doc = {"formatVersion": 1, "lastPassMs": NINE, "host": "old-host", "pid": 1, "sxctlVersion": "0.9",
           "outcome": "ok", "detail": None, "workspace": str(sched.root.resolve())}
    (sched.root / ".scheduler" / "sxctl-tick.json").write_text(json.dumps(doc))
    [scheduler] = checks(sched.run(NINE + MIN, "doctor", "--json"), "scheduler")
    assert scheduler["status"] == "ok" and "old-host" in scheduler["message"]
    families = parse(sched.run(NINE + MIN, "metrics").out)
    assert families["sxctl_cron_last_pass_age_seconds"] == [({"host": "old-host"}, 60.0)]


def test_metrics_give_the_last_pass_age_per_host(sched):
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "free", "--every", "1h", *HEARTBEAT)
    tick_on(sched, "alpha", NINE)
    tick_on(sched, "beta", NINE + MIN)
    families = parse(sched.run(NINE + 2 * MIN, "metrics").out)
    assert sorted(families["sxctl_cron_last_pass_age_seconds"], key=lambda s: s[0]["host"]) == [
        ({"host": "alpha"}, 120.0), ({"host": "beta"}, 60.0)]
    folder = sched.root / ".scheduler" / "sxctl-tick"
    lying = {**json.loads((folder / "beta.json").read_text()), "host": "delta"}  # gamma's file names delta
    (folder / "gamma.json").write_text(json.dumps(lying))
    families = parse(sched.run(NINE + 2 * MIN, "metrics").out)
    assert families["sxctl_cron_heartbeat_invalid"] == [({}, 1.0)]
    assert {s[0]["host"] for s in families["sxctl_cron_last_pass_age_seconds"]} == {"alpha", "beta"}
    (folder / "gamma.json").write_text("{}")
    families = parse(sched.run(NINE + 2 * MIN, "metrics").out)
    assert families["sxctl_cron_heartbeat_invalid"] == [({}, 1.0)]
    assert len(families["sxctl_cron_last_pass_age_seconds"]) == 2


def test_cron_simulate_on_another_host_shows_the_pinned_job_left_alone(sched):
    sched.add(NINE - 60 * MIN, "pinned", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--host", "alpha",
              *HEARTBEAT)
    args = ("cron", "simulate", "--from", "2026-12-01T08:59Z", "--until", "2026-12-01T09:05Z", "--tz", "UTC", "--json")
    events = on(sched, "beta", NINE - 60 * MIN, *args).json()["events"]
    assert [(e["fate"], e["occurrence_ms"], e["reason"]) for e in events] == [
        ("elsewhere", NINE, "pinned to host alpha, not beta")]
    events = on(sched, "alpha", NINE - 60 * MIN, *args).json()["events"]
    assert [e["fate"] for e in events] == ["dispatched"]
    assert "other host" in on(sched, "beta", NINE - 60 * MIN, *args[:-1]).out


def test_an_older_policy_format_with_a_host_is_refused(sched):
    sched.add(NINE, "job", "--every", "1h", "--host", "alpha", *HEARTBEAT)
    path = sched.policy_file
    doc = json.loads(path.read_text())
    assert doc["formatVersion"] == 3
    path.write_text(json.dumps({**doc, "formatVersion": 2}))
    assert sched.run(NINE, "cron", "list").code == 5
    assert FakeClock  # the clock of every command is the fixture's


def test_a_heartbeat_folder_that_is_a_symbolic_link_is_not_written_through(sched, tmp_path):
    sched.add(NINE - MIN, "free", "--every", "1h", *HEARTBEAT)
    outside = tmp_path / "outside"
    outside.mkdir()
    (sched.root / ".scheduler" / "sxctl-tick").symlink_to(outside)
    result = on(sched, "alpha", NINE, "cron", "tick")
    assert result.code == 0 and "could not record its heartbeat" in result.err and "symbolic link" in result.err
    assert list(outside.iterdir()) == []


def test_doctor_reads_the_hosts_that_passed_last_however_many_came_before(sched):
    """A new host each pass (a Kubernetes pod) left more than 64 heartbeat files: only the first
    64 by name were read, so doctor kept showing an old pod's pass and would fail as it aged."""
    import os

    sched.add(NINE - MIN, "hourly", "--every", "1h", *HEARTBEAT)
    folder = sched.root / ".scheduler" / "sxctl-tick"
    for n in range(70):
        tick_on(sched, f"pod-{n:03d}", NINE + n * 1000)
        os.utime(folder / f"pod-{n:03d}.json", ns=(0, (NINE + n * 1000) * 1_000_000))
    tick_on(sched, "zz-last", NINE + 10 * MIN)
    [scheduler] = checks(sched.run(NINE + 10 * MIN, "doctor", "--json"), "scheduler")
    assert scheduler["status"] == "ok" and "on zz-last" in scheduler["message"], scheduler

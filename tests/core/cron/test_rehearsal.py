"""One truth about the schedule: the previews (`cron next/list`, `next`), `cron simulate` and the
real pass agree on every occurrence's fate, and `cron simulate` writes nothing in the project."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sxctl.clock import FakeClock

SID = "2026_12_01_steady_hopper"
NINE = int(datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp() * 1000)  # 04:00 in New York
HOUR, MIN = 3_600_000, 60_000
DAY_END = NINE + 24 * HOUR


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


@pytest.fixture
def policies(project):
    """A project whose agent is live at NINE, with one job for every policy."""
    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"updated_ms": NINE, "model": "m"}))
    for args in (
        ("office", "--every", "30m", "--anchor", "2026-12-01 04:00", "--tz", "America/New_York",
         "--active-hours", "08:00-18:00"),
        ("daily", "--every", "1h", "--max-runs-per-day", "3", "--tz", "America/New_York"),
        ("thrice", "--every", "2h", "--max-runs", "3"),
        ("until", "--every", "1h", "--until", "2026-12-01T12:30Z"),
    ):
        result = project.run("cron", "add", *args, "--payload", "heartbeat-event", "--text", f"from {args[0]}",
                             clock=FakeClock(NINE - MIN))
        assert result.code == 0, result.err
    return project


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            files[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else b"",  # not a FIFO
                                                  path.lstat().st_mtime_ns)
    return files


def simulate(project, *args: str) -> dict:
    result = project.run("cron", "simulate", "--from", iso(NINE), "--until", iso(DAY_END - 1), "--tz", "UTC",
                         "--pass-every", "30m", *args, "--json", clock=FakeClock(NINE))
    assert result.code == 0, result.err
    return result.json()


def by_job(pairs) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for name, at in pairs:
        found.setdefault(name, []).append(at)
    return {name: sorted(times) for name, times in found.items()}


def test_previews_simulate_and_the_real_pass_agree_on_every_policy(policies):
    project = policies
    fires = project.run("cron", "next", "-n", "200", "--json", clock=FakeClock(NINE)).json()["fires"]
    previewed = by_job((f["name"], f["at_ms"]) for f in fires if f["at_ms"] < DAY_END)
    rehearsed = simulate(project)
    simulated = by_job((e["job"], e["occurrence_ms"]) for e in rehearsed["events"] if e["fate"] == "dispatched")
    for step in range(48):  # the real pass, every 30 minutes for a day, the agent live and reading
        at = NINE + step * 30 * MIN
        (project.root / ".scorpiox" / "sessions" / SID / "stats.json").write_text(
            json.dumps({"updated_ms": at, "model": "m"}))
        assert project.run("cron", "tick", clock=FakeClock(at)).code == 0
    ledger = project.root / ".scheduler" / "cron-executions.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    names = {job["job"]["id"]: job["job"]["name"]
             for job in project.run("cron", "list", "--json", clock=FakeClock(NINE)).json()["jobs"]}
    ran = by_job((names[r["jobId"]], r["scheduledForMs"]) for r in rows if r["recordType"] == "started")
    assert previewed == simulated == ran
    assert len(ran["office"]) == 20  # 08:00-17:30 in New York, not UTC
    assert len(ran["daily"]) == 6  # three a New York day: the 1st ends at 05:00 UTC on the 2nd
    assert len(ran["thrice"]) == 3 and len(ran["until"]) == 3  # 09:59, 10:59, 11:59: none after 12:30
    skipped = {(e["job"], e["reason"]) for e in rehearsed["events"] if e["fate"] == "skipped"}
    assert skipped == {("office", "inactive_hours"), ("daily", "max_runs_per_day")}
    paused = sorted((e["job"], e["reason"]) for e in rehearsed["events"] if e["fate"] == "paused")
    assert paused == [("thrice", "expired"), ("until", "expired")]
    told = [e["told"] for e in rehearsed["events"] if e["job"] == "office" and e["fate"] == "dispatched"]
    assert told and all(text == "from office" for text in told)


def test_cron_list_and_next_show_what_waits_not_a_run_the_pass_skips(policies):
    project = policies
    listing = project.run("cron", "list", "--tz", "UTC", clock=FakeClock(NINE + MIN))
    office = next(line for line in listing.out.splitlines() if line.startswith("office"))
    assert "13:00:00 UTC" in office and "after active hours 08:00-18:00 America/New_York" in office
    row = next(r for r in project.run("cron", "list", "--json", clock=FakeClock(NINE + MIN)).json()["jobs"]
               if r["job"]["name"] == "office")
    assert row["next_run_ms"] == NINE + 4 * HOUR and row["next_note"] == "active hours 08:00-18:00 America/New_York"
    shown = project.run("cron", "show", "office", clock=FakeClock(NINE + MIN))
    assert "after active hours 08:00-18:00 America/New_York" in shown.out.splitlines()[0]
    upcoming = project.run("next", "-n", "50", "--json", clock=FakeClock(NINE + MIN)).json()["rows"]
    office_rows = [r for r in upcoming if r["source"] == "cron" and r["name"] == "office"]
    assert office_rows[0]["at_ms"] == NINE + 4 * HOUR and office_rows[0]["skipped_before"] == 8


def test_an_expired_job_shows_why_instead_of_a_next_run(policies):
    project = policies
    for step in range(8):
        at = NINE + step * HOUR
        (project.root / ".scorpiox" / "sessions" / SID / "stats.json").write_text(
            json.dumps({"updated_ms": at, "model": "m"}))
        assert project.run("cron", "tick", clock=FakeClock(at)).code == 0
    rows = {r["job"]["name"]: r for r in project.run("cron", "list", "--json",
                                                     clock=FakeClock(NINE + 8 * HOUR)).json()["jobs"]}
    assert rows["until"]["state"] == "paused:expired" and "--until" in rows["until"]["next_note"]
    assert rows["thrice"]["state"] == "paused:expired" and "--max-runs 3" in rows["thrice"]["next_note"]
    assert rows["thrice"]["next_run_ms"] is None and rows["until"]["next_run_ms"] is None
    listing = project.run("cron", "list", clock=FakeClock(NINE + 8 * HOUR)).out
    assert "paused by sxctl: it has run 3 time(s) (--max-runs 3)" in listing


def test_a_held_run_waits_for_the_agent_and_is_given_up_past_its_hold_limit(project):
    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    for name, hold in (("patient", "1d"), ("hasty", "30m")):
        assert project.run("cron", "add", name, "--every", "1h", "--hold-max", hold, "--payload", "heartbeat-event",
                           "--text", name, clock=FakeClock(NINE - MIN)).code == 0
    doc = simulate(project, "--agent-down", f"{iso(NINE + 30 * MIN)}..{iso(NINE + 4 * HOUR)}")
    fates = {(e["job"], e["fate"]) for e in doc["events"] if e["pass_ms"] < NINE + 4 * HOUR}
    assert fates == {("patient", "held"), ("hasty", "held"), ("hasty", "given_up")}
    back = next(e for e in doc["events"] if e["job"] == "patient" and e["fate"] == "catch_up")
    assert back["pass_ms"] == NINE + 4 * HOUR and back["read_ms"] == NINE + 4 * HOUR
    assert not folder.joinpath("stats.json").exists()  # the simulated agent lived in the copy only


def test_cron_simulate_writes_nothing_in_the_project(policies):
    project = policies
    before = snapshot(project.root)
    simulate(project, "--agent-down", f"{iso(NINE + HOUR)}..{iso(NINE + 5 * HOUR)}")
    human = project.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + 6 * HOUR),
                        clock=FakeClock(NINE))
    assert human.code == 0 and "dispatched" in human.out and "nothing was written" in human.out
    assert snapshot(project.root) == before


@pytest.mark.parametrize(("args", "message"), [
    (("--from", "2026-12-02T00:00Z", "--until", "2026-12-01T00:00Z"), "is before --from"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--agent-down", "10:00"), "FROM..TO"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--agent-down",
      "2026-12-01T12:00Z..2026-12-01T11:00Z"), "ends before it starts"),
    (("--from", "someday", "--until", "2026-12-02T00:00Z"), "invalid --from 'someday'"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--machine-down", "10:00"),
     "invalid --machine-down '10:00': FROM..TO"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--machine-down",
      "2026-12-01T12:00Z..2026-12-01T11:00Z"),
     "invalid --machine-down '2026-12-01T12:00Z..2026-12-01T11:00Z': it ends before it starts"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--machine-down", "friday..monday"),
     "invalid --machine-down 'friday'"),
    (("--from", "2026-12-01T00:00Z", "--until", "2026-12-02T00:00Z", "--machine-down", "2026-12-01T11:00Z.."),
     "invalid --machine-down '2026-12-01T11:00Z..': FROM..TO"),
])
def test_cron_simulate_refuses_bad_spans_in_one_line(policies, args, message):
    result = policies.run("cron", "simulate", *args, clock=FakeClock(NINE))
    lines = [line for line in result.err.strip().splitlines() if not line.startswith("sxctl: hint: ")]
    assert result.code == 2 and message in result.err and len(lines) == 1


@pytest.mark.parametrize(("value", "hint"), [("tomorrow", "not words"), ("2026-12-01", "has no time of day")])
def test_a_word_or_a_bare_date_for_a_simulated_span_gets_the_hint_the_other_commands_give(policies, value, hint):
    """A newcomer's `--from tomorrow` got "Invalid naive wall-clock timestamp" and nothing else."""
    result = policies.run("cron", "simulate", "--from", value, "--until", "2026-12-03T00:00Z", clock=FakeClock(NINE))
    assert result.code == 2 and f"invalid --from {value!r}" in result.err
    assert hint in result.err.splitlines()[-1] and result.err.splitlines()[-1].startswith("sxctl: hint: ")


def test_the_header_says_where_a_cut_rehearsal_stopped_even_with_q(policies, monkeypatch):
    """With -q the warning is gone; the header said "N passes from X to <the span asked for>"."""
    import sxctl.cron.run.rehearsal
    monkeypatch.setattr(sxctl.cron.run.rehearsal, "MAX_PASSES", 5)
    result = policies.run("-q", "cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + 48 * HOUR),
                          "--pass-every", "10m", "--tz", "UTC", clock=FakeClock(NINE))
    assert result.code == 0 and result.err == ""
    assert result.out.splitlines()[0] == ("5 pass(es) from 2026-12-01 09:00 UTC, cut before 2026-12-01 09:50 UTC (the "
                                          "most one rehearsal runs), not to 2026-12-03 09:00 UTC; nothing was written")


def test_a_machine_down_all_along_is_said_so_not_that_nothing_came_due(policies):
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR), "--machine-down",
                          f"{iso(NINE - HOUR)}..{iso(NINE + 2 * HOUR)}", clock=FakeClock(NINE))
    assert result.code == 0 and "no pass ran: the machine was down all along" in result.out
    assert "no occurrence came due" not in result.out


def test_a_huge_span_runs_a_capped_number_of_passes_and_says_so(policies, monkeypatch):
    import sxctl.api.simulate
    import sxctl.cron.run.rehearsal
    for module in (sxctl.cron.run.rehearsal, sxctl.api.simulate):
        monkeypatch.setattr(module, "MAX_PASSES", 5)  # the rule, not the real cap's minutes of passes
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + 400 * 24 * HOUR),
                          "--pass-every", "10m", "--json", clock=FakeClock(NINE))
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["truncated"] and doc["passes"] == 5 and "only the first 5 run" in doc["warnings"][0]
    assert doc["stopped_at_ms"] == NINE + 5 * 10 * MIN


def test_a_rehearsal_never_writes_to_another_projects_inbox_or_runs_the_delivery_command(project, tmp_path):
    other = tmp_path / "other"
    (other / ".scorpiox" / "sessions" / SID).mkdir(parents=True)
    (other / ".scorpiox" / "sessions" / SID / "stats.json").write_text(  # live when the first run is due
        json.dumps({"updated_ms": NINE + HOUR, "model": "m"}))
    marker = tmp_path / "delivered"
    for args in (("away", "--to-project", str(other), "--payload", "agent-turn", "--text", "hello"),
                 ("post", "--payload", "delivery", "--text", "hi")):
        added = project.run("cron", "add", args[0], "--every", "1h", *args[1:], clock=FakeClock(NINE - MIN))
        assert added.code == 0, added.err
    before = snapshot(other)
    env = project.env(SXCTL_DELIVER_CMD=f"touch {marker}")
    result = project.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + 3 * HOUR), "--json",
                         env=env, clock=FakeClock(NINE))
    assert result.code == 0, result.err
    fates = {(e["job"], e["fate"]) for e in result.json()["events"]}
    assert ("away", "failed") in fates and ("away", "dispatched") not in fates and ("post", "dispatched") in fates
    failed = next(e for e in result.json()["events"] if e["fate"] == "failed")
    assert "outside the project: not rehearsed" in failed["reason"]
    assert snapshot(other) == before and not marker.exists()


def test_the_examples_of_its_help_run_and_name_no_throw_away_path(project):
    """Every example in `cron simulate --help` runs as written (the man page and docs/cli.md are
    made from it), and no reason it prints names the copy the rehearsal ran in."""
    import shlex

    before = FakeClock(int(datetime(2026, 12, 1, 5, tzinfo=UTC).timestamp() * 1000))  # the examples' day
    assert project.run("cron", "add", "away", "--every", "1h", "--payload", "agent-turn", "--text", "x",
                       "--to", "2026_01_01_gone", clock=before).code == 0
    helps = project.run("cron", "simulate", "--help").out.replace("\\\n", " ")
    examples = [line.split() for line in helps.splitlines() if line.strip().startswith("sxctl cron simulate")]
    assert len(examples) >= 2
    for words in examples:
        result = project.run(*shlex.split(" ".join(words))[1:], clock=before)
        assert result.code == 0, (words, result.err)
        assert "sxctl-simulate-" not in result.out + result.err
        assert str(project.root) in result.out  # the failing target is named in the project's own folder


def test_a_rehearsal_never_writes_through_links_and_refuses_what_the_pass_refuses(project, tmp_path):
    """Links, FIFOs in a session folder are never followed (the simulated agent writes nothing where
    they point); a linked inbox fails the runs sent to it as `cron tick` does (the rehearsal
    dispatched them: the copy had left the link out); a linked policy file is exit 5 as for
    `cron tick`; a delivery with no SXCTL_DELIVER_CMD fails as in the pass."""
    before = FakeClock(int(datetime(2026, 12, 1, 5, tzinfo=UTC).timestamp() * 1000))
    outside = tmp_path / "outside"
    (outside / "inbox").mkdir(parents=True)
    (outside / "inbox" / "v1.json").write_text('{"text": "x"}')
    (outside / "stats").write_text("ORIGINAL")
    session = project.root / ".scorpiox" / "sessions" / "2026_12_01_linked"
    session.mkdir(parents=True)
    (session / "stats.json").symlink_to(outside / "stats")
    (session / "inbox").symlink_to(outside / "inbox")
    os.mkfifo(session / "x.fifo")
    for name, payload in (("hb", "heartbeat-event"), ("del", "delivery")):
        assert project.run("cron", "add", name, "--every", "1h", "--payload", payload, "--text", name,
                           clock=before).code == 0
    span = ["cron", "simulate", "--from", "2026-12-01T05:00Z", "--until", "2026-12-01T07:00Z", "--json"]
    doc = project.run(*span, clock=before)
    assert doc.code == 0, doc.err
    fates = {(event["job"], event["fate"]) for event in doc.json()["events"]}
    assert ("hb", "failed") in fates and ("hb", "dispatched") not in fates
    assert ("del", "failed") in fates and ("del", "dispatched") not in fates
    [reason] = {event["reason"] for event in doc.json()["events"] if event["job"] == "hb"}
    assert reason == f"failed precondition: refusing to use {session / 'inbox'}: it is a symbolic link"  # as the pass
    assert (outside / "stats").read_text() == "ORIGINAL" and sorted(os.listdir(outside / "inbox")) == ["v1.json"]
    policy = project.root / ".scheduler" / "sxctl-policy.json"
    policy.write_text('{"formatVersion": 1, "jobs": {}}')
    moved = tmp_path / "policy.json"
    policy.rename(moved)
    policy.symlink_to(moved)
    refused = project.run(*span[:-1], clock=before)
    tick = project.run("cron", "tick", clock=before)
    assert refused.code == tick.code == 5 and refused.err == tick.err == \
        f"sxctl: refusing to use {policy}: it is a symbolic link\n"


@pytest.mark.parametrize("hostile", ["scheduler-link", "lock-fifo", "scorpiox-link", "sessions-link"])
def test_a_rehearsal_refuses_or_waits_where_the_real_pass_does(project, tmp_path, hostile):
    """Attacker: a linked `.scheduler/`, a FIFO for the store's lock sentinel, a linked `.scorpiox`
    or `sessions`: real passes stop (exit 5) or find no agent, and the rehearsal predicted runs."""
    before = FakeClock(int(datetime(2026, 12, 1, 5, tzinfo=UTC).timestamp() * 1000))
    project.session()
    assert project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "hb",
                       clock=before).code == 0
    moved = tmp_path / "elsewhere"
    if hostile == "scheduler-link":
        (project.root / ".scheduler").rename(moved)
        (project.root / ".scheduler").symlink_to(moved)
    elif hostile == "lock-fifo":
        (project.root / ".scheduler" / "cron-jobs.lock").unlink()
        os.mkfifo(project.root / ".scheduler" / "cron-jobs.lock")
    else:
        linked = project.root / ".scorpiox" / "sessions" if hostile == "sessions-link" else project.root / ".scorpiox"
        linked.rename(moved)
        linked.symlink_to(moved)
    simulated = project.run("cron", "simulate", "--from", "2026-12-01T05:00Z", "--until", "2026-12-01T07:00Z",
                            "--json", clock=before)
    tick = project.run("cron", "tick", "--json", clock=FakeClock(before.now_ms() + HOUR))
    if hostile in ("scheduler-link", "lock-fifo"):
        assert simulated.code == tick.code == 5, (simulated.err, tick.err)
        assert simulated.json()["error"]["message"] == tick.json()["error"]["message"]
    else:  # no agent can run there: held for one, then given up, never dispatched
        assert simulated.code == 0, simulated.err
        fates = [event["fate"] for event in simulated.json()["events"]]
        assert "dispatched" not in fates and "catch_up" not in fates and "held" in fates, fates


def test_a_tmpdir_inside_the_project_is_refused_and_nothing_is_written(policies):
    """Attacker: TMPDIR=$PROJECT/.scheduler made the copy there, in the real project, and said
    "nothing was written"; in the inbox, the copy copied itself into itself."""
    project = policies
    before = snapshot(project.root)
    for inside in (project.root / ".scheduler", project.root / ".scorpiox" / "sessions" / SID / "inbox"):
        result = project.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR),
                             env=project.env(TMPDIR=str(inside)), clock=FakeClock(NINE))
        assert result.code == 2 and f"TMPDIR {inside} is inside {project.root}" in result.err, result.err
    assert snapshot(project.root) == before


def test_a_copy_left_by_a_killed_rehearsal_is_removed_by_the_next(policies, tmp_path):
    """SIGKILL runs no clean-up: its copy (in memory, often) stayed for good."""
    import subprocess
    import sys

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = scratch / f"sxctl-simulate-{dead.stdout.strip()}-abc123"
    (left / "workspace").mkdir(parents=True)
    alive = scratch / f"sxctl-simulate-{os.getpid()}-def456"  # a rehearsal still running: kept
    alive.mkdir()
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR),
                          env=policies.env(TMPDIR=str(scratch)), clock=FakeClock(NINE))
    assert result.code == 0, result.err
    assert sorted(os.listdir(scratch)) == [alive.name]


def test_naive_times_are_read_in_the_local_zone_they_are_shown_in(policies):
    """Under TZ=Asia/Tokyo, `--from '2026-12-01 18:00'` was read as 18:00 UTC and shown as 03:00
    the next day, with hundreds of phantom missed occurrences."""
    env = policies.env(TZ="Asia/Tokyo")
    result = policies.run("cron", "simulate", "--from", "2026-12-01 18:00", "--until", "2026-12-01 19:00",
                          "--json", clock=FakeClock(NINE), env=env)
    assert result.code == 0, result.err
    assert result.json()["from_ms"] == NINE  # 18:00 in Tokyo is 09:00 UTC


def test_a_job_for_a_project_below_the_workspace_is_rehearsed_in_a_copy_of_its_sessions(project, tmp_path):
    """A target stored relative to the workspace (`--to-project sub/app`) is dispatched and read
    in the rehearsal as by a real pass (it failed precondition: the copy held only the
    workspace's sessions); a link on the way is refused as the pass refuses it, named as the
    user's own folder; nothing in the sub-project or where the link points is written."""
    sub = project.root / "sub" / "app"
    (sub / ".scorpiox" / "sessions" / SID).mkdir(parents=True)
    (sub / ".scorpiox" / "sessions" / SID / "stats.json").write_text(json.dumps({"updated_ms": NINE, "model": "m"}))
    (project.root / "vendor" / ".scorpiox" / "sessions" / SID).mkdir(parents=True)
    for name, target in (("sub", "sub/app"), ("linked", "vendor")):
        added = project.run("cron", "add", name, "--every", "1h", "--to-project", str(project.root / target),
                            "--payload", "agent-turn", "--text", f"hello {name}", clock=FakeClock(NINE - MIN))
        assert added.code == 0, added.err
    store = json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())
    assert [job["deliveryTarget"]["destinationEndpoint"]["channelInstanceId"] for job in store["jobs"]] == \
        ["sub/app", "vendor"]
    (project.root / ".scorpiox" / "sessions" / SID).mkdir()  # the same session name, the same minute: one stem
    assert project.run("cron", "add", "own", "--every", "1h", "--payload", "agent-turn", "--text", "hello own",
                       clock=FakeClock(NINE - MIN)).code == 0
    elsewhere = tmp_path / "elsewhere"  # vendor/ becomes a link to another project (a cloned repository's)
    (project.root / "vendor").rename(elsewhere)
    (project.root / "vendor").symlink_to(elsewhere)
    (project.root / "tools" / ".scorpiox").mkdir(parents=True)
    assert project.run("cron", "add", "linked-scorpiox", "--every", "1h", "--to-project", str(project.root / "tools"),
                       "--payload", "agent-turn", "--text", "x", clock=FakeClock(NINE - MIN)).code == 0
    (project.root / "tools" / ".scorpiox").rmdir()
    (project.root / "tools" / ".scorpiox").symlink_to(elsewhere / ".scorpiox")
    os.mkfifo(sub / ".scorpiox" / "sessions" / SID / "x.fifo")  # never opened: a copy would block on it
    before, outside = snapshot(project.root), snapshot(elsewhere)
    doc = simulate(project)
    sent = [e for e in doc["events"] if e["job"] == "sub"]
    assert len(sent) == 23 and {e["fate"] for e in sent} == {"dispatched"}  # 09:59 to 07:59, each a minute late
    assert all(e["told"] == "hello sub" and e["read_ms"] == e["pass_ms"] for e in sent)
    own = [e for e in doc["events"] if e["job"] == "own"]
    assert [e["pass_ms"] for e in own] == [e["pass_ms"] for e in sent] and {e["told"] for e in own} == {"hello own"}
    refused = [e for e in doc["events"] if e["job"] == "linked"]
    assert refused and {e["fate"] for e in refused} == {"failed"}
    assert f"goes through the symbolic link {project.root / 'vendor'}" in refused[0]["reason"]
    linked = next(e for e in doc["events"] if e["job"] == "linked-scorpiox" and e["fate"] == "failed")
    assert linked["reason"] == f"failed precondition: refusing to use {project.root / 'tools' / '.scorpiox'}: " \
        "it is a symbolic link"  # as `cron tick` says it
    human = project.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR), "--tz", "UTC",
                        clock=FakeClock(NINE))
    assert human.code == 0, human.err
    assert "dispatched" in human.out and "hello sub" in human.out and "sxctl-simulate-" not in human.out
    assert snapshot(project.root) == before and snapshot(elsewhere) == outside


FRI_21, MON_0830 = NINE + 3 * 24 * HOUR + 12 * HOUR, NINE + 6 * 24 * HOUR - 30 * MIN  # 2026-12-04 (a Friday), -07
SAT_22, SUN_22 = FRI_21 + 25 * HOUR, FRI_21 + 49 * HOUR
DOWN = f"{iso(FRI_21 + 2 * HOUR)}..{iso(MON_0830)}"  # Friday 23:00 to Monday 08:30
AGENT_BACK = MON_0830 + 10 * MIN  # 08:40


@pytest.mark.parametrize("agent_down", [False, True])
def test_no_pass_runs_while_the_machine_is_down_and_the_first_after_it_sees_the_weekend(project, agent_down):
    """`--machine-down`: no pass in the span; the next on the pass grid meets the weekend's two
    nightly runs and sends one catch-up for both (held until 08:40 while the agent is still down),
    as real passes at the same times do."""
    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    assert project.run("cron", "add", "nightly", "--cron", "0 22 * * *", "--payload", "heartbeat-event", "--text",
                       "night", clock=FakeClock(FRI_21 - HOUR)).code == 0
    span = ("--from", iso(FRI_21), "--until", iso(MON_0830 + 90 * MIN), "--tz", "UTC", "--pass-every", "10m",
            "--machine-down", DOWN, *(("--agent-down", f"{iso(MON_0830)}..{iso(AGENT_BACK)}") if agent_down else ()))
    result = project.run("cron", "simulate", *span, "--json", clock=FakeClock(FRI_21))
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["machine_down"] == [{"from_ms": FRI_21 + 2 * HOUR, "to_ms": MON_0830}] and doc["passes"] == 12 + 10
    assert not [e for e in doc["events"] if FRI_21 + 2 * HOUR <= e["pass_ms"] < MON_0830]
    events = [(e["pass_ms"], e["fate"], e["occurrence_ms"], e["count"]) for e in doc["events"]]
    back = AGENT_BACK if agent_down else MON_0830
    assert events == [(FRI_21 + HOUR, "dispatched", FRI_21 + HOUR, 1),
                      *([(MON_0830, "held", SAT_22, 1)] if agent_down else []),
                      (back, "catch_up", SAT_22, 2)]  # Saturday's and Sunday's 22:00, in one run
    if agent_down:  # held from the latest occurrence it stands for, Sunday's, for --hold-max (24h): Monday's
        assert doc["events"][1]["until_ms"] is None  # comes due by then and renews it, and so on: no give-up time
    caught = doc["events"][-1]
    assert caught["read_ms"] == back and caught["told"] == "night\n\n[sxctl: a catch-up run for 2 missed " \
        "occurrences, 2026-12-05 22:00 to 2026-12-06 22:00 (UTC)]"
    human = project.run("cron", "simulate", *span, clock=FakeClock(FRI_21))
    assert human.code == 0 and "machine down from 2026-12-04 23:00 UTC to 2026-12-07 08:30 UTC: no pass ran" in human.out
    assert any("catch-up" in line and "2 occurrences" in line for line in human.out.splitlines())
    for at in (*(FRI_21 + step * 10 * MIN for step in range(12)), *(MON_0830 + step * 10 * MIN for step in range(10))):
        if not agent_down or not MON_0830 <= at < AGENT_BACK:  # the real passes at the same times
            folder.joinpath("stats.json").write_text(json.dumps({"updated_ms": at, "model": "m"}))
        assert project.run("cron", "tick", clock=FakeClock(at)).code == 0
    rows = [json.loads(line) for line in (project.root / ".scheduler" / "cron-executions.jsonl").read_text().splitlines()]
    started = {r["executionId"]: r for r in rows if r["recordType"] == "started"}
    ran = [(started[r["executionId"]]["startedAtMs"], started[r["executionId"]]["trigger"], r["scheduledForMs"])
           for r in rows if r["recordType"] == "terminal" and r["outcome"]["kind"] == "inbox_dispatch"]
    assert ran == [(FRI_21 + HOUR, "scheduled", FRI_21 + HOUR), (back, "catchup", SAT_22)]


def test_passes_resume_on_the_pass_grid_and_the_cap_counts_only_passes_run(policies, monkeypatch):
    import sxctl.api.simulate
    import sxctl.cron.run.rehearsal
    for module in (sxctl.cron.run.rehearsal, sxctl.api.simulate):
        monkeypatch.setattr(module, "MAX_PASSES", 5)
    down = f"{iso(NINE + 20 * MIN)}..{iso(NINE + 45 * MIN)}"  # the 09:20, 09:30 and 09:40 passes do not run
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + 90 * MIN), "--pass-every",
                          "10m", "--machine-down", down, "--json", clock=FakeClock(NINE))
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["truncated"] and doc["passes"] == 5 and doc["stopped_at_ms"] == NINE + 80 * MIN
    assert "the span needs 7 passes; only the first 5 run" in doc["warnings"][0]
    ran = {e["pass_ms"] for e in doc["events"]}  # 09:00, 09:10, then 09:50 (on the grid, not 09:45)
    assert ran <= {NINE + step * 10 * MIN for step in (0, 1, 5, 6, 7)} and NINE + 50 * MIN in ran


def test_quiet_drops_the_rehearsals_warnings(policies):
    """`-q` drops notes and warnings on stderr, every --help says; `cron simulate -q` printed its
    `--from is … after now` warning all the same."""
    args = ("cron", "simulate", "--from", iso(NINE + 3 * HOUR), "--until", iso(NINE + 4 * HOUR), "--json")
    loud = policies.run(*args, clock=FakeClock(NINE))
    quiet = policies.run(*args, "-q", clock=FakeClock(NINE))
    assert loud.code == quiet.code == 0
    assert "warning: --from is 3h0m after now" in loud.err and quiet.err == "", (loud.err, quiet.err)
    assert loud.json()["warnings"] == quiet.json()["warnings"] != []


def test_a_week_of_minute_passes_is_rehearsed_whole():
    """From Sunday 11:00 to the next Sunday 11:00 is 10,081 passes a minute apart (both ends): the
    cap stopped one short, and the JSON said `truncated` with `stopped_at_ms` at --until."""
    from sxctl.cron.run.rehearsal import MAX_PASSES, passes_needed

    assert passes_needed(NINE, NINE + 7 * 24 * HOUR, MIN, []) == MAX_PASSES


def test_a_sole_writer_pass_trusts_its_own_store_only_while_the_file_is_the_one_it_wrote(project):
    """`cron simulate`'s passes skip reading back the store they wrote (`own_writes`). Once
    another writer replaced the file, the next pass reads and validates it again: a job paused
    meanwhile does not run, and a store broken meanwhile is exit 5 naming it."""
    from sxctl.cron.run.tick import SchedulerPass, TickOptions
    from sxctl.cron.store.workspace import Workspace
    from sxctl.errors import InvalidDataError

    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    assert project.run("cron", "add", "beat", "--every", "1m", "--payload", "heartbeat-event", "--text", "b",
                       clock=FakeClock(NINE - MIN)).code == 0
    ws, own = Workspace(project.root), {}

    def one_pass(at: int) -> list:
        (folder / "stats.json").write_text(json.dumps({"updated_ms": at, "model": "m"}))
        options = TickOptions(project=project.root, terminalize_orphans=True, no_gates=True)
        return SchedulerPass(ws, options, clock=FakeClock(at), own_writes=own).run().runs

    assert [run["name"] for run in one_pass(NINE)] == ["beat"]
    assert own["store"]["bytes"] == (project.root / ".scheduler" / "cron-jobs.json").read_bytes()
    assert [run["name"] for run in one_pass(NINE + MIN)] == ["beat"]
    assert project.run("cron", "pause", "beat", clock=FakeClock(NINE + MIN + 1)).code == 0
    assert one_pass(NINE + 2 * MIN) == []
    store = project.root / ".scheduler" / "cron-jobs.json"
    store.write_bytes(store.read_bytes().replace(b'"formatVersion":1', b'"formatVersion":7'))
    with pytest.raises(InvalidDataError) as error:
        one_pass(NINE + 3 * MIN)
    assert str(store) in error.value.message


def test_a_send_interrupted_in_the_copy_is_not_said_to_have_written_into_the_project(policies, monkeypatch):
    """Attacker: Ctrl-C during a rehearsal said "interrupted: 1796599740_000000000 was written and
    is pending in <the user's inbox>" (the copy's path made the user's): nothing was written there."""
    from sxctl.cron.run import rehearsal
    from sxctl.errors import ErrorCode, SxctlError

    def cut(self, job, occurrence):
        inbox = self.workspace / ".scorpiox" / "sessions" / SID / "inbox"
        raise SxctlError(f"interrupted: 1796599740_000000000 was written and is pending in {inbox}",
                         code=ErrorCode.INTERRUPTED)

    monkeypatch.setattr(rehearsal.SimulatedDispatcher, "dispatch", cut)
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR), clock=FakeClock(NINE))
    assert result.code == 130 and result.err == "sxctl: interrupted (nothing was written in the project)\n"


def test_a_full_disk_under_the_copy_is_exit_8_naming_where_the_copy_goes(policies, monkeypatch, tmp_path):
    """Attacker: `ulimit -f 2` gave exit 8 "File too large", naming nothing."""
    import errno

    from sxctl.cron.run import rehearsal

    def full(*args, **kwargs):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(rehearsal, "_write_stats", full)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = policies.run("cron", "simulate", "--from", iso(NINE), "--until", iso(NINE + HOUR),
                          env=policies.env(TMPDIR=str(scratch)), clock=FakeClock(NINE))
    assert result.code == 8 and f"cannot write the rehearsal's copy in {scratch}/sxctl-simulate-" in result.err
    assert "File too large (TMPDIR chooses where it goes)" in result.err and os.listdir(scratch) == []


def test_a_workspace_handed_off_to_comis_is_refused_by_the_rehearsal_as_by_the_pass(project):
    """The copy carried no hand-off mark, reset intent or daemon lock: a workspace no pass may
    touch was rehearsed as if sxctl's passes ran it."""
    before = FakeClock(int(datetime(2026, 12, 1, 5, tzinfo=UTC).timestamp() * 1000))
    project.session()
    assert project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "hb",
                       clock=before).code == 0
    assert project.run("cron", "handoff", "--accept-policy-loss", clock=before).code == 0
    simulated = project.run("cron", "simulate", "--from", "2026-12-01T05:00Z", "--until", "2026-12-01T07:00Z",
                            "--json", clock=before)
    tick = project.run("cron", "tick", "--json", clock=before)
    assert simulated.code == tick.code != 0 and simulated.json()["error"] == tick.json()["error"], simulated.out


def test_the_simulated_agent_runs_in_the_session_the_agent_is_live_in_not_the_last_by_name(project):
    """Newcomer: after a restart into `gentle_lovelace`, a job pinned to the old `nimble_fermi`
    was rehearsed as read at once — the simulated agent had picked the session last by name."""
    from tests.conftest import now_ms

    now = now_ms() // MIN * MIN  # the agents as they are now: the real clock
    old = project.session("2026_12_06_nimble_fermi", age_ms=3 * HOUR)  # stopped long ago
    project.session("2026_12_06_gentle_lovelace")  # the live one
    assert project.run("cron", "add", "named", "--every", "10m", "--to", old.name, "--payload", "agent-turn",
                       "--text", "n", clock=FakeClock(now)).code == 0
    doc = project.run("cron", "simulate", "--from", iso(now), "--until", iso(now + 30 * MIN), "--json",
                      clock=FakeClock(now)).json()
    sent = [event for event in doc["events"] if event["fate"] in ("dispatched", "catch_up")]
    assert sent and all(event.get("read_ms") is None for event in sent), sent  # nobody reads the old session

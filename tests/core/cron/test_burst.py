"""The catch-up budget (`cron tick --max-catchup N`, the workspace's `cron defaults
--max-catchup N`): after an outage at most N catch-up runs per pass, the rest deferred to the
next passes in due order; on-time runs are never held back."""

from __future__ import annotations

import json

from tests.core.cron.test_scheduling import MIN, NINE, SID

from . import test_scheduling

sched = test_scheduling.sched  # the fixture of tests/core/cron/test_scheduling.py: a project at a fake time

HOUR = 60 * MIN
T0 = NINE - 12 * HOUR  # 21:00 the day before: the jobs' due times, a minute apart, then a 12 h outage


def _iso(ms: int) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _jobs(sched, count: int) -> list[str]:
    """`count` daily jobs due a minute apart from T0, added in reverse (store order is not due order)."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    names = [f"job{i:02d}" for i in range(count)]
    for i in reversed(range(count)):
        sched.add(T0 - HOUR, names[i], "--every", "1d", "--anchor", _iso(T0 + i * MIN), "--payload", "agent-turn",
                  "--text", names[i], "--to", SID)
    return names


def test_forty_overdue_jobs_with_max_catchup_5_dispatch_over_8_passes_in_due_order(sched):
    names = _jobs(sched, 40)
    passes = []
    for step in range(9):
        report = sched.tick(NINE + step * MIN, "--max-catchup", "5", "--max-per-pass", "100")
        passes.append([run["name"] for run in report["runs"]])
        assert all(run["trigger"] == "catchup" and run["status"] == "dispatched" for run in report["runs"])
        assert {d["reason"] for d in report["deferred"]} <= {"max_catchup"}
        assert len(report["deferred"]) == max(0, 35 - 5 * step)
    assert [len(names_run) for names_run in passes] == [5] * 8 + [0]
    assert [name for names_run in passes for name in names_run] == names  # in due order
    human = sched.run(NINE + 9 * MIN, "cron", "tick", "--dry-run", "--max-catchup", "0", "--max-per-pass", "100")
    assert human.code == 0 and "deferred" not in human.out  # nothing is overdue any more


def test_the_workspace_default_applies_a_tick_flag_overrides_it_and_on_time_runs_are_not_held(sched):
    names = _jobs(sched, 8)
    result = sched.run(NINE, "cron", "defaults", "--max-catchup", "3", "--json")
    assert result.code == 0, result.err
    assert result.json()["defaults"] == {"maxCatchup": 3}
    policy = json.loads(sched.policy_file.read_text())
    assert policy["formatVersion"] == 3 and policy["defaults"] == {"maxCatchup": 3}
    sched.add(NINE - 5 * MIN, "fresh", "--every", "1d", "--anchor", "2026-12-01T09:00Z", "--payload", "agent-turn",
              "--text", "on time", "--to", SID)
    report = sched.tick(NINE + MIN, "--max-per-pass", "100")
    assert [run["name"] for run in report["runs"]] == [*names[:3], "fresh"]  # the on-time one is not budgeted
    human = sched.run(NINE + 2 * MIN, "cron", "tick", "--dry-run", "--max-per-pass", "100")
    assert f"deferred {names[6]}: " in human.out and "(catch-up budget, --max-catchup 3)" in human.out, human.out
    report = sched.tick(NINE + 2 * MIN, "--max-catchup", "0", "--max-per-pass", "100")  # 0: no budget this pass
    assert [run["name"] for run in report["runs"]] == names[3:]
    assert sched.run(NINE + 3 * MIN, "cron", "defaults", "--max-catchup", "0").code == 0
    assert "defaults" not in json.loads(sched.policy_file.read_text())
    assert "max-catchup: none" in sched.run(NINE + 3 * MIN, "cron", "defaults").out


def test_list_show_next_and_simulate_show_the_budget(sched):
    names = _jobs(sched, 5)
    assert sched.run(NINE, "cron", "defaults", "--max-catchup", "2").code == 0
    listing = sched.run(NINE, "cron", "list", "--json").json()
    assert listing["workspacePolicy"] == {"maxCatchup": 2, "maintenance": None, "budget": None}
    notes = {row["job"]["name"]: row["next_note"] for row in listing["jobs"]}
    assert notes == {names[0]: None, names[1]: None, names[2]: "catch-up budget 2 a pass: deferred 1 pass(es)",
                     names[3]: "catch-up budget 2 a pass: deferred 1 pass(es)",
                     names[4]: "catch-up budget 2 a pass: deferred 2 pass(es)"}
    shown = sched.run(NINE, "cron", "show", names[0])
    assert "workspace: at most 2 catch-up run(s) per pass" in shown.out
    assert sched.run(NINE, "cron", "show", names[0], "--json").json()["workspacePolicy"]["maxCatchup"] == 2
    fires = sched.run(NINE, "cron", "next", "-n", "5", "--json").json()["fires"]
    assert [f["note"] for f in fires][4] == "catch-up budget 2 a pass: deferred 2 pass(es)"
    upcoming = sched.run(NINE, "--session", SID, "next", "-n", "5", "--json").json()["rows"]
    assert [r["note"] for r in upcoming if r["source"] == "cron"][4] == "catch-up budget 2 a pass: deferred 2 pass(es)"
    result = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T09:02Z",
                       "--json")
    assert result.code == 0, result.err
    events = [(e["pass_ms"], e["job"], e["fate"], e["reason"]) for e in result.json()["events"]]
    assert [(at, job) for at, job, fate, _ in events if fate == "catch_up"] == [
        (NINE, names[0]), (NINE, names[1]), (NINE + MIN, names[2]), (NINE + MIN, names[3]),
        (NINE + 2 * MIN, names[4])]
    assert {reason for _, _, fate, reason in events if fate == "deferred"} == {"--max-catchup"}
    result = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T09:00Z",
                       "--max-catchup", "0", "--json")
    assert [e["fate"] for e in result.json()["events"]].count("catch_up") == 3  # --max-per-pass 3 only


def test_a_bad_budget_is_named(sched):
    _jobs(sched, 1)
    result = sched.run(NINE, "cron", "defaults", "--max-catchup", "-1")
    assert result.code == 2 and "-1" in result.err
    result = sched.run(NINE, "cron", "tick", "--max-catchup", "many")
    assert result.code == 2 and "many" in result.err


def test_the_preview_defers_the_jobs_the_pass_defers_when_they_are_due_at_once(sched):
    """Twelve jobs due at the same minute: the preview broke the tie by job id, the pass by store
    order, so `cron list` named the wrong jobs as deferred."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    for i in range(12):
        sched.add(T0 - HOUR, f"j{i:02d}", "--every", "1d", "--anchor", _iso(T0), "--payload", "agent-turn",
                  "--text", "x", "--to", SID)
    assert sched.run(NINE, "cron", "defaults", "--max-catchup", "5").code == 0
    listed = sched.run(NINE, "cron", "list", "--json").json()["jobs"]
    said = sorted(row["job"]["name"] for row in listed if "deferred" in (row.get("next_note") or ""))
    report = sched.tick(NINE, "--max-per-pass", "100")
    assert sorted(d["name"] for d in report["deferred"]) == said and len(said) == 7

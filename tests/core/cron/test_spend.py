"""The spend guards through the real pass (cron/spend/guards.py): a rate-limit ceiling holds a due job
until the figure falls, a session over its token budget gets no dispatch, a workspace budget
guards every job without its own, hostile usage blocks behave as documented — and the strict
comis checker passes after every command (the `sched` fixture checks the store each time)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import killed_at, written_after_reads
from tests.core.cron.test_scheduling import MIN, NINE, SID, sched  # noqa: F401 - the fixture

HOUR = 60 * MIN


def agent_with(sched, ms: int, usage) -> None:  # noqa: F811
    """The session's agent live at `ms` with this `usage` block (anything, hostile included)."""
    sched.folder.mkdir(parents=True, exist_ok=True)
    body = {"updated_ms": ms, "model": "m"}
    if usage is not None:
        body["usage"] = usage
    (sched.folder / "stats.json").write_text(json.dumps(body))
    written_after_reads(sched.folder)


def usage(total: int = 1000, rl_5h: float = 0.1, rl_7d: float = 0.05) -> dict:
    return {"input_tokens": total - 100, "output_tokens": 100, "cache_read_tokens": 0, "cache_creation_tokens": 0,
            "reasoning_tokens": 0, "total_tokens": total, "rl_5h": rl_5h, "rl_7d": rl_7d}


def history(sched) -> list[dict]:  # noqa: F811
    """The closed runs' records, oldest first (`.scheduler/sxctl-spend-runs.jsonl`)."""
    path = sched.root / ".scheduler" / "sxctl-spend-runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def add_daily(sched, *flags: str) -> None:  # noqa: F811
    sched.add(NINE - HOUR, "daily", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "morning", "--hold-max", "2h", *flags)


def test_a_job_above_its_rate_limit_ceiling_is_held_and_runs_when_the_figure_falls(sched):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.8")
    agent_with(sched, NINE + MIN, usage(rl_5h=0.85))
    report = sched.tick(NINE + MIN)
    [held] = report["waiting"]
    assert (held["reason"], held["status"], held["giveUpAtMs"]) == ("rate_limit", "waiting", NINE + 2 * HOUR)
    assert held["detail"] == "rl_5h 0.85 is at or above --rate-limit-ceiling 0.8"
    assert report["runs"] == [] and sched.pending() == []
    text = sched.run(NINE + MIN, "cron", "tick").out
    assert "waiting daily: due since 09:00 UTC, rl_5h 0.85 is at or above --rate-limit-ceiling 0.8 " \
           "(gives up at 11:00 UTC)" in text
    [fire] = sched.run(NINE + MIN, "cron", "next", "daily", "-n", "1", "--json").json()["fires"]
    assert fire["waiting"]["reason"] == "rate_limit"
    assert "held: rate limit (rl_5h 0.85" in sched.run(NINE + MIN, "cron", "next", "daily", "-n", "1").out

    agent_with(sched, NINE + 30 * MIN, usage(rl_5h=0.5, rl_7d=0.8))  # the weekly figure is at the ceiling too
    assert sched.tick(NINE + 30 * MIN)["waiting"][0]["detail"].startswith("rl_7d 0.8 is at or above")

    agent_with(sched, NINE + 40 * MIN, usage(rl_5h=0.5, rl_7d=0.2))  # the figures fell: it runs
    report = sched.tick(NINE + 40 * MIN)
    [run] = report["runs"]
    assert run["status"] == "dispatched" and report["waiting"] == []
    assert [m["text"].split("\n")[0] for m in sched.pending()] == ["morning"]


def test_a_held_occurrence_past_its_hold_max_is_skipped_with_the_guards_reason(sched):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.8")
    agent_with(sched, NINE + 2 * HOUR + MIN, usage(rl_5h=0.9))
    report = sched.tick(NINE + 2 * HOUR + MIN)
    assert report["runs"] == [] and report["waiting"] == []
    [skip] = report["skippedOccurrences"]
    assert (skip["reason"], skip["firstMs"]) == ("rate_limit", NINE)
    policy = json.loads(sched.policy_file.read_text())
    assert policy["formatVersion"] == 3
    [recent] = policy["jobs"][sched.job("daily")["job"]["id"]]["skips"]["recent"]
    assert recent["reason"] == "rate_limit"
    assert sched.job("daily")["job"]["lifecycle"]["nextRunAtMs"] == NINE + 24 * HOUR


def test_a_session_over_its_token_budget_gets_no_dispatch(sched):  # noqa: F811
    add_daily(sched, "--max-session-tokens", "50000")
    agent_with(sched, NINE + MIN, usage(total=50_000))
    [held] = sched.tick(NINE + MIN)["waiting"]
    assert held["reason"] == "token_budget"
    assert held["detail"] == f"session {SID} has used 50,000 tokens, at or above --max-session-tokens 50,000"
    assert sched.pending() == [] and sched.ledger() == []
    agent_with(sched, NINE + 2 * MIN, usage(total=49_999))
    assert sched.tick(NINE + 2 * MIN)["runs"][0]["status"] == "dispatched"


def test_the_workspace_budget_guards_every_job_without_its_own(sched):  # noqa: F811
    add_daily(sched)
    sched.add(NINE - HOUR, "own", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "own", "--rate-limit-ceiling", "1")
    assert sched.run(NINE - HOUR, "cron", "budget", "set", "--rate-limit-ceiling", "0.5").code == 0
    shown = sched.run(NINE - HOUR, "cron", "budget", "show", "--json").json()
    assert shown["ok"] is True  # every document says whether it worked
    shown = shown["budget"]
    assert shown == {"rateLimitCeiling": 0.5, "maxSessionTokens": None, "maxTokensPerDay": None,
                     "onMissingUsage": None}
    assert sched.run(NINE, "cron", "list", "--json").json()["workspacePolicy"]["budget"] == {"rateLimitCeiling": 0.5}
    agent_with(sched, NINE + MIN, usage(rl_5h=0.6))
    report = sched.tick(NINE + MIN)
    assert [w["name"] for w in report["waiting"]] == ["daily"]
    assert [r["name"] for r in report["runs"]] == ["own"]  # its own ceiling (1) is not reached
    assert sched.run(NINE + MIN, "cron", "budget", "clear").code == 0
    assert "budget" not in json.loads(sched.policy_file.read_text())
    agent_with(sched, NINE + 2 * MIN, usage(rl_5h=0.6))
    assert [r["name"] for r in sched.tick(NINE + 2 * MIN)["runs"]] == ["daily"]


def test_guards_are_shown_and_kept_strictly(sched):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.75", "--max-session-tokens", "2000000", "--on-missing-usage", "hold")
    policy = sched.job("daily")["policy"]
    assert (policy["rateLimitCeiling"], policy["maxSessionTokens"], policy["onMissingUsage"]) == (0.75, 2_000_000,
                                                                                                  "hold")
    assert "rate-limit ceiling 0.75; session tokens < 2,000,000; missing usage: hold" in sched.run(
        NINE, "cron", "show", "daily").out
    [row] = sched.run(NINE, "cron", "list", "--json").json()["jobs"]
    assert row["policy"]["rateLimitCeiling"] == 0.75
    assert json.loads(sched.policy_file.read_text())["formatVersion"] == 3
    assert sched.run(NINE, "cron", "update", "daily", "--rate-limit-ceiling", "0", "--max-session-tokens", "0",
                     "--on-missing-usage", "default").code == 0
    assert json.loads(sched.policy_file.read_text())["formatVersion"] == 1  # nothing of format 3 is left
    for bad in ("1.5", "-1", "nan"):
        result = sched.run(NINE, "cron", "budget", "set", "--rate-limit-ceiling", bad)
        assert result.code == 2 and "--rate-limit-ceiling" in result.err and "Traceback" not in result.err
    doc = json.loads(sched.policy_file.read_text())
    doc["jobs"][next(iter(doc["jobs"]))]["rateLimitCeiling"] = 0.5  # an older sxctl's version with a guard
    sched.policy_file.write_text(json.dumps(doc))
    refused = sched.run(NINE, "cron", "tick")
    assert refused.code == 5 and "needs formatVersion 3" in refused.err


HOSTILE = {
    "string": {"total_tokens": "lots", "rl_5h": "0.99", "rl_7d": "0.1"},
    "negative": {"total_tokens": -1, "rl_5h": -0.5, "rl_7d": 0.1},
    "huge": {"total_tokens": 10**30, "rl_5h": 1e300, "rl_7d": 0.1},
    "bool": {"total_tokens": True, "rl_5h": False, "rl_7d": 0.1},
    "rl above 1": {"total_tokens": 10, "rl_5h": 1.5, "rl_7d": 7},
    "fraction of a token": {"total_tokens": 10.5, "rl_5h": None, "rl_7d": 0.1},
    "not an object": "unlimited",
    "missing": None,
    "partial": {"rl_7d": 0.1},
}


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("choice", ["run", "hold"])
def test_a_hostile_usage_block_runs_or_holds_by_the_jobs_choice_and_says_why(sched, kind, choice):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.8", "--max-session-tokens", "1000", "--on-missing-usage", choice)
    agent_with(sched, NINE + MIN, HOSTILE[kind])
    result = sched.run(NINE + MIN, "cron", "tick", "--json")
    assert result.code == 0 and "Traceback" not in result.err
    report = result.json()
    if choice == "run":
        assert [r["status"] for r in report["runs"]] == ["dispatched"]
    else:
        [held] = report["waiting"]
        assert held["reason"] == "usage_unreadable" and "--on-missing-usage hold" in held["detail"]
        assert "usage unreadable (" in held["detail"] and report["runs"] == []


def test_nan_in_stats_json_makes_the_session_unreadable_and_the_job_waits_for_a_live_agent(sched):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.8")
    sched.folder.mkdir(parents=True, exist_ok=True)
    (sched.folder / "stats.json").write_text(f'{{"updated_ms": {NINE + MIN}, "usage": {{"rl_5h": NaN}}}}')
    result = sched.run(NINE + MIN, "cron", "tick", "--json")
    assert result.code == 0 and result.json()["waiting"][0]["reason"] == "no_live_session"


def read_all(sched, total: int, ms: int, *, busy: bool = False) -> None:  # noqa: F811
    """The agent reads every pending message and its counters reach `total`."""
    done = sched.folder / "inbox" / "done"
    done.mkdir(parents=True, exist_ok=True)
    for path in sorted((sched.folder / "inbox").glob("*.json")):
        path.rename(done / path.name)
    agent_with(sched, ms, usage(total=total))
    stats = json.loads((sched.folder / "stats.json").read_text())
    stats["sxctl"] = {"busy": busy}
    (sched.folder / "stats.json").write_text(json.dumps(stats))
    written_after_reads(sched.folder)


def test_per_day_token_caps_count_the_attributed_tokens_across_runs(sched):  # noqa: F811
    sched.add(NINE - HOUR, "hourly", "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "check", "--max-tokens-per-day", "1500")
    agent_with(sched, NINE, usage(total=1000))
    assert sched.tick(NINE)["runs"][0]["status"] == "dispatched"
    read_all(sched, 1800, NINE + 5 * MIN, busy=True)  # read, but the agent is still busy with it
    assert sched.tick(NINE + 5 * MIN)["runs"] == []
    runs = sched.run(NINE + 5 * MIN, "cron", "runs", "hourly", "--json").json()["runs"]
    assert runs[0]["tokens"] is None and runs[0]["tokensNote"].startswith("not attributed yet")
    read_all(sched, 2000, NINE + 10 * MIN)  # idle again: 1,000 tokens are this run's
    sched.tick(NINE + 10 * MIN)
    agent_with(sched, NINE + HOUR, usage(total=2000))
    assert sched.tick(NINE + HOUR)["runs"][0]["status"] == "dispatched"  # 1,000 < 1,500 today
    read_all(sched, 2600, NINE + HOUR + 5 * MIN)
    agent_with(sched, NINE + 2 * HOUR, usage(total=2600))
    report = sched.tick(NINE + 2 * HOUR)  # 1,000 + 600 >= 1,500: the rest of the day is skipped
    assert report["runs"] == []
    [skip] = report["skippedOccurrences"]
    assert skip["reason"] == "max_tokens_per_day"
    runs = sched.run(NINE + 2 * HOUR, "cron", "runs", "hourly", "--json").json()["runs"]
    assert [run["tokens"] for run in runs] == [600, 1000]
    shown = sched.run(NINE + 2 * HOUR, "cron", "runs", "hourly").out
    assert "TOKENS" in shown and "1,000" in shown and "600" in shown
    spend = json.loads((sched.root / ".scheduler" / "sxctl-spend.json").read_text())
    assert spend["open"] == [] and [run["state"] for run in history(sched)] == ["attributed", "attributed"]
    assert spend["days"] == [{"jobId": spend["days"][0]["jobId"], "date": "2026-12-01", "tokens": 1600}]
    sched.add(NINE + 2 * HOUR, "other", "--every", "1h", "--payload", "heartbeat-event", "--text", "x")
    assert sched.run(NINE + 2 * HOUR, "cron", "runs", "other", "--json").json()["runs"] == []
    agent_with(sched, NINE + 24 * HOUR, usage(total=2600))  # a new day in the job's zone: it runs again
    assert "hourly" in [run["name"] for run in sched.tick(NINE + 24 * HOUR)["runs"]]


def test_runs_open_in_one_session_at_once_share_its_tokens_never_count_them_twice(sched):  # noqa: F811
    """Each of two overlapping runs was charged the session's whole growth: 2,000 attributed for
    1,000 spent, and a per-day cap reached at half the spend."""
    for name, minute in (("early", 0), ("late", 30)):
        sched.add(NINE - MIN, name, "--cron", f"{minute} * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
                  "--text", name, "--max-tokens-per-day", "100000")
    agent_with(sched, NINE, usage(total=1000))
    assert [run["name"] for run in sched.tick(NINE)["runs"]] == ["early"]
    read_all(sched, 1400, NINE + 30 * MIN, busy=True)  # early's message read, the agent still at it …
    assert [run["name"] for run in sched.tick(NINE + 30 * MIN)["runs"]] == ["late"]
    read_all(sched, 2000, NINE + 40 * MIN)  # … and late's too; idle at 2,000
    sched.tick(NINE + 40 * MIN)
    tokens = {name: sched.run(NINE + 40 * MIN, "cron", "runs", name, "--json").json()["runs"][0]["tokens"]
              for name in ("early", "late")}
    assert tokens == {"early": 400 + 300, "late": 300}  # alone from 1,000 to 1,400, then halves to 2,000
    agent_with(sched, NINE + HOUR, usage(total=2000))
    assert [run["name"] for run in sched.tick(NINE + HOUR)["runs"]] == ["early"]
    read_all(sched, 2500, NINE + HOUR + 5 * MIN)  # read and idle: early alone from 2,000
    sched.tick(NINE + HOUR + 5 * MIN)
    assert sched.run(NINE + 2 * HOUR, "cron", "runs", "early", "--json").json()["runs"][0]["tokens"] == 500
    assert sum(run["tokens"] for run in history(sched)) == 2500 - 1000  # every token once
    spend = json.loads((sched.root / ".scheduler" / "sxctl-spend.json").read_text())
    assert sum(day["tokens"] for day in spend["days"]) == 2500 - 1000


def test_a_damaged_spend_file_is_invalid_data_naming_it_and_never_written_over(sched):  # noqa: F811
    add_daily(sched, "--max-tokens-per-day", "100")
    path = sched.root / ".scheduler" / "sxctl-spend.json"
    for damage in (b'{"formatVersion": 1, "runs": [], "extra": 1}', b'{"formatVersion": 9, "runs": []}', b"[NaN]",
                   b'{"formatVersion": 1, "runs": [{"executionId": "x"}]}',
                   b'{"formatVersion": 2, "open": [], "days": [], "sessions": [], "extra": 1}',
                   b'{"formatVersion": 2, "open": [], "days": [{"jobId": "j", "date": "2026-12-01", "tokens": -1}], '
                   b'"sessions": []}'):
        path.write_bytes(damage)
        agent_with(sched, NINE + MIN, usage())
        for args in (("cron", "tick"), ("cron", "runs", "daily")):
            result = sched.run(NINE + MIN, *args)
            assert result.code == 5 and "sxctl-spend.json" in result.err and "Traceback" not in result.err
        assert path.read_bytes() == damage
    path.unlink()
    path.symlink_to(sched.root / "elsewhere.json")
    agent_with(sched, NINE + MIN, usage())
    result = sched.run(NINE + MIN, "cron", "tick")
    assert result.code == 5 and not (sched.root / "elsewhere.json").exists()


def test_status_doctor_and_metrics_show_the_usage_and_which_jobs_a_guard_holds(sched):  # noqa: F811
    add_daily(sched, "--rate-limit-ceiling", "0.8")
    sched.add(NINE - HOUR, "capped", "--cron", "0 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "x", "--max-session-tokens", "100", "--on-missing-usage", "run")
    agent_with(sched, NINE + MIN, {**usage(total=51_331, rl_5h=0.85), "total_tokens": "many"})
    at = NINE + MIN
    doc = sched.run(at, "--session", SID, "status", "--json").json()
    assert doc["usage"]["rl_5h"] == 0.85 and doc["usage"]["total_tokens"] is None
    assert doc["usage"]["unreadable"] == {"total_tokens": "is a string ('many'), not a number"}
    guards = {row["name"]: row for row in doc["cron"]["guards"]}
    assert guards["daily"]["held"] is True and guards["daily"]["reason"] == "rate_limit"
    assert guards["capped"]["held"] is False and "total_tokens" in guards["capped"]["unreadable"]
    codes = {p["code"] for p in doc["problems"]}
    assert {"cron_held_rate_limit", "cron_usage_unreadable"} <= codes and "cron_overdue" not in codes
    human = sched.run(at, "--session", SID, "status").out
    assert "usage    ? tokens, rl 5h 85% 7d 5%" in human
    assert "cron job daily is due and held by a spend guard: rl_5h 0.85 is at or above" in human
    assert "cron job capped: usage unreadable (total_tokens is a string ('many'), not a number); runs" in human
    doctor = sched.run(at, "--session", SID, "doctor", "--json").json()["checks"]
    assert [c["status"] for c in doctor if c["check"] == "spend guards"] == ["warn", "warn"]
    [agent] = [c for c in doctor if c["check"] == "agent"]
    assert agent["message"].endswith("; usage ? tokens, rl 5h 85% 7d 5%)")
    metrics = sched.run(at, "--session", SID, "metrics").out
    assert 'sxctl_agent_rate_limit_ratio{workspace="' in metrics and 'window="5h"} 0.85' in metrics
    assert 'sxctl_cron_guard_held_jobs{' in metrics and 'reason="rate_limit"} 1' in metrics
    assert "sxctl_agent_usage_tokens{" not in metrics  # an unreadable figure has no sample


def test_cron_simulate_rehearses_a_guard_with_a_usage_file(sched, tmp_path):  # noqa: F811
    sched.add(NINE - HOUR, "hourly", "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "check", "--rate-limit-ceiling", "0.5")
    steps = tmp_path / "usage.json"
    steps.write_text(json.dumps([{"from": "2026-12-01T09:00Z", "usage": usage(rl_5h=0.9)},
                                 {"from": "2026-12-01T10:30Z", "usage": usage(rl_5h=0.1)}]))
    before = sched.policy_file.read_bytes()
    result = sched.run(NINE - HOUR, "cron", "simulate", "--from", "2026-12-01T08:30Z", "--until", "2026-12-01T11:00Z",
                       "--pass-every", "30m", "--usage", str(steps), "--json")
    assert result.code == 0, result.err
    fates = [(e["fate"], e["reason"]) for e in result.json()["events"]]
    assert fates == [("held", "rate_limit"), ("catch_up", None), ("dispatched", None)]
    [held] = [e for e in result.json()["events"] if e["fate"] == "held"]
    assert held["detail"] == "rl_5h 0.9 is at or above --rate-limit-ceiling 0.5"
    human = sched.run(NINE - HOUR, "cron", "simulate", "--from", "2026-12-01T08:30Z", "--until", "2026-12-01T11:00Z",
                      "--pass-every", "30m", "--usage", str(steps), "--tz", "UTC").out
    assert "held        rate limit; waits as long as it takes" in human and "rl_5h 0.9 is at or above" in human
    assert sched.policy_file.read_bytes() == before  # nothing was written
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps({"rl_5h": "high", "rl_7d": -1}))
    result = sched.run(NINE - HOUR, "cron", "simulate", "--from", "2026-12-01T08:30Z", "--until", "2026-12-01T09:30Z",
                       "--pass-every", "30m", "--usage", str(hostile), "--json")
    assert result.code == 0 and [e["fate"] for e in result.json()["events"]] == ["dispatched"]  # run on missing
    for bad, why in (("[1, 2]", "a usage object, or a list"), ("{", "invalid --usage"), (None, "no such file")):
        path = tmp_path / "bad.json"
        if bad is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(bad)
        result = sched.run(NINE - HOUR, "cron", "simulate", "--from", "2026-12-01T08:30Z", "--until",
                           "2026-12-01T09:30Z", "--usage", str(path))
        assert result.code == 2 and why in result.err and "Traceback" not in result.err


def test_cron_next_says_the_days_token_cap_skips_the_rest_of_the_day(sched):  # noqa: F811
    sched.add(NINE - HOUR, "hourly", "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "check", "--max-tokens-per-day", "500")
    agent_with(sched, NINE, usage(total=1000))
    sched.tick(NINE)
    read_all(sched, 1600, NINE + 5 * MIN)
    sched.tick(NINE + 5 * MIN)  # 600 tokens attributed: over the cap for the rest of 2026-12-01
    [fire] = sched.run(NINE + 5 * MIN, "cron", "next", "hourly", "-n", "1", "--json").json()["fires"]
    assert fire["at_ms"] == NINE + 15 * HOUR  # midnight UTC, the next day
    assert "--max-tokens-per-day reached" in fire["note"]


def test_runs_of_jobs_without_a_guard_get_tokens_only_while_the_agent_publishes_them(sched):  # noqa: F811
    add_daily(sched)
    sched.folder.mkdir(parents=True, exist_ok=True)
    sched.agent_at(NINE)  # an agent that writes no usage block: nothing is attributed, no file is made
    assert sched.tick(NINE)["runs"][0]["status"] == "dispatched"
    assert not (sched.root / ".scheduler" / "sxctl-spend.json").exists()
    assert "tokens" not in sched.run(NINE, "cron", "runs", "daily", "--json").json()["runs"][0]
    agent_with(sched, NINE + 24 * HOUR, usage(total=300))
    sched.tick(NINE + 24 * HOUR)
    read_all(sched, 1000, NINE + 24 * HOUR + MIN)
    sched.tick(NINE + 24 * HOUR + MIN)
    runs = sched.run(NINE + 24 * HOUR + MIN, "cron", "runs", "daily", "--json").json()["runs"]
    assert runs[0]["tokens"] == 700 and "tokens" not in runs[1]


@pytest.mark.parametrize("point", ["after-dispatch", "after-terminal"])
def test_a_pass_killed_after_sending_still_counts_the_runs_tokens(sched, monkeypatch, point):  # noqa: F811
    """The attribution was saved at the end of the pass: a pass killed after its send left the
    run out of --max-tokens-per-day, and every such pass ran past the cap."""
    sched.add(NINE - HOUR, "hourly", "--cron", "0 * * * *", "--tz", "UTC", "--payload", "heartbeat-event",
              "--text", "check", "--max-tokens-per-day", "1500")
    agent_with(sched, NINE, usage(total=1000))

    killed_at(monkeypatch, point, lambda: sched.run(NINE, "cron", "tick"))
    assert len(list((sched.folder / "inbox").glob("*.json"))) == 1
    spend = json.loads((sched.root / ".scheduler" / "sxctl-spend.json").read_text())
    assert [run["state"] for run in spend["open"]] == ["open"]
    read_all(sched, 2600, NINE + 10 * MIN)  # read, idle again: 1,600 tokens are this run's
    sched.tick(NINE + 10 * MIN, "--terminalize-orphans")
    agent_with(sched, NINE + HOUR, usage(total=2600))
    report = sched.tick(NINE + HOUR)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"


def test_two_usage_steps_at_one_time_are_a_usage_error(sched, tmp_path):  # noqa: F811
    """They crashed the sort (exit 1, `TypeError`)."""
    steps = tmp_path / "u.json"
    steps.write_text(json.dumps([{"from": "2026-12-01T09:00Z", "usage": {"rl_5h": 0.9}},
                                 {"from": "2026-12-01T09:00Z", "usage": {"rl_5h": 0.1}}]))
    result = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T09:30Z",
                       "--usage", str(steps))
    assert result.code == 2 and "two steps start at the same time" in result.err


def test_cron_validate_and_doctor_name_a_damaged_spend_file(sched):  # noqa: F811
    """Every pass stopped on it (exit 5) while `cron validate` said ok and doctor passed."""
    add_daily(sched, "--max-tokens-per-day", "1000")
    (sched.root / ".scheduler" / "sxctl-spend.json").write_text("{")
    validated = sched.run(NINE, "cron", "validate", "--json")
    assert validated.code == 5 and "sxctl-spend.json" in validated.out
    doctor = sched.run(NINE, "doctor", "--json")
    assert doctor.code == 9 and "sxctl-spend.json" in doctor.out


def test_a_guard_that_cannot_read_its_figure_and_runs_says_so_in_the_pass(sched):  # noqa: F811
    """An rl_5h of 80 (a percentage) is unreadable: by the default --on-missing-usage run the job
    ran, and the pass said only "ran"."""
    add_daily(sched, "--rate-limit-ceiling", "0.5")
    agent_with(sched, NINE, {**usage(), "rl_5h": 80})
    result = sched.run(NINE, "cron", "tick")
    assert result.code == 0 and "ran daily" in result.out
    assert "daily: its spend guard usage unreadable (rl_5h" in result.err
    assert "runs (--on-missing-usage run)" in result.err


def test_next_says_a_guard_holds_the_job_not_that_it_waits_for_an_agent(sched):  # noqa: F811
    """With a live agent over the ceiling, `sxctl next` said "waits for a live agent"."""
    add_daily(sched, "--rate-limit-ceiling", "0.5")
    agent_with(sched, NINE + MIN, usage(rl_5h=0.9))
    rows = [row for row in sched.run(NINE + MIN, "--session", SID, "next", "--json").json()["rows"]
            if row["source"] == "cron"]
    assert rows[0]["waiting"] is False and "rl_5h 0.9 is at or above --rate-limit-ceiling 0.5" in rows[0]["held"]
    shown = sched.run(NINE + MIN, "--session", SID, "next").out
    assert "held: " in shown and "waits for a live agent" not in shown


def test_a_stopped_agent_s_figures_are_not_called_unreadable(sched):  # noqa: F811
    """With the agent stopped, `status` showed its session's last figures and, lines below, "usage
    unreadable (rl_5h no readable stats.json)": the guard has no live session to judge."""
    add_daily(sched, "--rate-limit-ceiling", "0.8")
    agent_with(sched, NINE - HOUR, usage(total=3006, rl_5h=0.04))  # stopped an hour ago
    status = sched.run(NINE - 30 * MIN, "--session", SID, "status")
    assert "no readable stats.json" not in status.out + status.err
    shown = status.out + status.err
    assert "usage unreadable" not in shown  # newcomer: it said "usage unreadable …; runs" of a job that waits
    problems = sched.run(NINE - 30 * MIN, "--session", SID, "status", "--json").json()["problems"]
    assert not [p for p in problems if p["code"].startswith("cron_guard")], problems

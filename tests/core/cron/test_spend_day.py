"""Limits that hold all day (cron/spend/ledger.py, cron/spend/file.py): a busy agent's open runs
count toward --max-tokens-per-day as they grow, and every view counts them as the pass does; a
day's and a session's totals outlive the runs' retention; the spend file stays bounded; a pass
killed at any fault point never lets the day pass its cap by more than one run."""

from __future__ import annotations

import json
import os

import pytest

from sxctl.cron.spend import file as spend_file
from tests.conftest import killed_at
from tests.core.cron.test_scheduling import MIN, NINE, SID, sched  # noqa: F401 - the fixture
from tests.core.cron.test_spend import HOUR, agent_with, history, read_all, usage

SCHEDULER = ".scheduler"


def busy_agent(sched, ms: int, total: int) -> None:  # noqa: F811
    """The agent live and busy at `ms`, its counters at `total`; it has read every message (a busy
    agent queues what arrives)."""
    read_all(sched, total, ms, busy=True)


def spend_doc(sched) -> dict:  # noqa: F811
    return json.loads((sched.root / SCHEDULER / "sxctl-spend.json").read_text())


def test_a_busy_agents_open_runs_count_toward_the_day_as_they_grow(sched):  # noqa: F811
    """Every run stayed open while the agent was busy and counted 0: under a cap of 250 an
    every-10m job went out every pass while the agent worked through the day. An open run now
    counts its growth so far: the passes stop at the first one that finds 250 reached."""
    sched.add(NINE - HOUR, "often", "--every", "10m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "x", "--max-tokens-per-day", "250")
    sent = []
    for n in range(12):
        at = NINE + n * 10 * MIN
        busy_agent(sched, at, 1000 + 40 * n)  # busy all along, 40 tokens more every 10 minutes
        report = sched.tick(at)
        sent += [at for _ in report["runs"]]
        if n == 7:
            [skip] = report["skippedOccurrences"]
            assert skip["reason"] == "max_tokens_per_day"
    assert sent == [NINE + n * 10 * MIN for n in range(7)]  # 6 x 40 = 240 < 250 at the 7th; 280 at the 8th
    status = sched.run(NINE + 115 * MIN, "--session", SID, "status", "--json").json()
    [row] = [r for r in status["cron"]["guards"] if r["name"] == "often"]
    assert row["tokensToday"] == 1000 + 40 * 11 - 1000  # the open runs' growth so far, as the pass counts it
    read_all(sched, 1500, NINE + 2 * HOUR)  # idle at last: the runs close with every token once
    sched.tick(NINE + 2 * HOUR)
    assert spend_doc(sched)["open"] == [] and sum(r["tokens"] for r in history(sched)) == 500


def test_cron_list_and_next_count_an_open_runs_growth_as_the_pass_does(sched):  # noqa: F811
    sched.add(NINE - HOUR, "often", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "x", "--max-tokens-per-day", "300")
    busy_agent(sched, NINE, 1000)
    assert len(sched.tick(NINE)["runs"]) == 1
    busy_agent(sched, NINE + 50 * MIN, 1400)  # still busy with it: 400 so far
    [row] = sched.run(NINE + 50 * MIN, "cron", "list", "--json").json()["jobs"]
    assert row["next_run_ms"] != NINE + HOUR, row  # the 10:00 occurrence is skipped: the day is spent
    fires = sched.run(NINE + 50 * MIN, "cron", "next", "often", "--json").json()["fires"]
    assert fires[0]["at_ms"] == row["next_run_ms"] and "--max-tokens-per-day" in (fires[0]["note"] or "")
    busy_agent(sched, NINE + HOUR, 1400)
    report = sched.tick(NINE + HOUR)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"


def test_an_idle_report_written_before_the_message_was_read_does_not_close_its_run(sched):  # noqa: F811
    """An agent claims a message (a rename into done/), then reports the turn it starts: a pass
    between the two found the message read and the agent idle, and closed the run at 0 tokens;
    its turn was then charged to the runs after it. The idle report must postdate the read (both
    times the file system's), so the run stays open and its turn is its own."""
    sched.add(NINE - HOUR, "often", "--every", "10m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "x", "--max-tokens-per-day", "100")
    agent_with(sched, NINE, usage(total=1000))
    assert len(sched.tick(NINE)["runs"]) == 1
    stats = sched.folder / "stats.json"
    reported = stats.stat().st_mtime_ns
    read_all(sched, 1000, NINE + MIN)  # claimed; the idle report is the one from before the claim
    os.utime(stats, ns=(reported, reported))
    assert sched.tick(NINE + MIN)["runs"] == [] and len(spend_doc(sched)["open"]) == 1
    busy_agent(sched, NINE + 5 * MIN, 1150)  # the turn for it reports, then ends
    read_all(sched, 1150, NINE + 10 * MIN)
    report = sched.tick(NINE + 10 * MIN)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"
    assert [(run["state"], run["tokens"]) for run in history(sched)] == [("attributed", 150)]


def _flood(sched, runs: int, at: int, *, session: str = "2026_12_01_other") -> None:  # noqa: F811
    """`runs` attributed runs of another job in another session, through the spend book."""
    scheduler = sched.root / SCHEDULER
    book = spend_file.read_book(scheduler)
    for n in range(runs):
        book.charge({"executionId": f"other-{n}", "jobId": "other-job", "date": "2026-12-01",
                     "project": str(sched.root), "sessionId": session, "stem": f"1{n:09d}_000000000",
                     "dispatchedAtMs": at, "state": "attributed", "fromTokens": n, "tokens": 1, "toTokens": n + 1,
                     "closedAtMs": at})
    spend_file.write_book(scheduler, book, at)


def test_a_capped_job_does_not_run_again_the_day_5000_other_runs_passed_through(sched):  # noqa: F811
    """The day's total was summed from the newest 2,000 runs kept: other jobs' runs pushed the
    capped job's out and it ran again the same day."""
    sched.add(NINE - HOUR, "capped", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload",
              "heartbeat-event", "--text", "x", "--max-tokens-per-day", "1000")
    agent_with(sched, NINE, usage(total=0))
    assert len(sched.tick(NINE)["runs"]) == 1
    read_all(sched, 1200, NINE + 10 * MIN)
    sched.tick(NINE + 10 * MIN)  # closed: 1,200 tokens today
    _flood(sched, 5000, NINE + 20 * MIN)
    for hour in (1, 2, 3):
        agent_with(sched, NINE + hour * HOUR, usage(total=1200))
        report = sched.tick(NINE + hour * HOUR)
        assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"
    assert (sched.root / SCHEDULER / "sxctl-spend.json").stat().st_size < 4096  # bounded: no run rows in it
    assert (sched.root / SCHEDULER / "sxctl-spend-runs.jsonl").stat().st_size <= spend_file.HISTORY_CAP
    runs = sched.run(NINE + 3 * HOUR, "cron", "runs", "capped", "--json").json()["runs"]
    assert runs[0].get("tokens") in (None, 1200)  # its record may have aged out of the history; never wrong


def test_a_sessions_charged_total_outlives_its_runs_records(sched):  # noqa: F811
    """Two runs of one session overlap; the first closes alone and is charged the growth so far;
    the second is charged only what came after. With the first's record pushed out by 5,000 other
    runs, the second paid the first's tokens again."""
    for name, minute in (("early", 0), ("late", 30)):
        sched.add(NINE - MIN, name, "--cron", f"{minute} 9 * * *", "--tz", "UTC", "--payload", "heartbeat-event",
                  "--text", name, "--max-tokens-per-day", "100000")
    agent_with(sched, NINE, usage(total=1000))
    assert [r["name"] for r in sched.tick(NINE)["runs"]] == ["early"]
    busy_agent(sched, NINE + 30 * MIN, 1500)  # busy with early
    assert [r["name"] for r in sched.tick(NINE + 30 * MIN)["runs"]] == ["late"]
    agent_with(sched, NINE + 40 * MIN, usage(total=2000))  # early done, idle at 2,000; late's message unread
    sched.tick(NINE + 40 * MIN)
    assert [r["tokens"] for r in history(sched)] == [1000]
    _flood(sched, 5000, NINE + 45 * MIN)
    read_all(sched, 2600, NINE + 50 * MIN)  # late read and done at 2,600
    sched.tick(NINE + 50 * MIN)
    late = sched.run(NINE + 51 * MIN, "cron", "runs", "late", "--json").json()["runs"]
    assert late[0]["tokens"] == 600  # from 2,000 (what early was charged up to), not from 1,500


def test_a_format_1_spend_file_is_read_and_written_back_as_format_2(sched):  # noqa: F811
    """An older sxctl's file (its runs kept whole): the day's total, the session's charged total
    and each run's record carry over."""
    sched.add(NINE - HOUR, "capped", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload",
              "heartbeat-event", "--text", "x", "--max-tokens-per-day", "1000")
    job_id = sched.job("capped")["job"]["id"]
    run = {"executionId": "old-1", "jobId": job_id, "date": "2026-12-01", "project": str(sched.root),
           "sessionId": SID, "stem": "1000000000_000000000", "dispatchedAtMs": NINE - 30 * MIN,
           "state": "attributed", "fromTokens": 0, "tokens": 1100, "toTokens": 1100, "closedAtMs": NINE - 20 * MIN}
    (sched.root / SCHEDULER / "sxctl-spend.json").write_text(json.dumps({"formatVersion": 1, "runs": [run]}))
    agent_with(sched, NINE, usage(total=1100))
    report = sched.tick(NINE)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"
    spend = spend_doc(sched)
    assert spend["formatVersion"] == 2 and spend["days"] == [{"jobId": job_id, "date": "2026-12-01", "tokens": 1100}]
    assert spend["sessions"] == [{"project": str(sched.root), "sessionId": SID, "toTokens": 1100,
                                  "atMs": NINE - 20 * MIN}]
    assert history(sched) == [run]


def test_a_torn_last_line_of_the_run_history_is_skipped_then_cut(sched):  # noqa: F811
    """A kill mid-append leaves an unfinished line: `cron runs` reads the rest, the next append
    cuts it; a damaged complete line is exit 5 naming the file and the line."""
    add = ("--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event", "--text", "x",
           "--max-tokens-per-day", "100000")
    sched.add(NINE - HOUR, "job", *add)
    agent_with(sched, NINE, usage(total=0))
    sched.tick(NINE)
    read_all(sched, 100, NINE + 10 * MIN)
    sched.tick(NINE + 10 * MIN)
    path = sched.root / SCHEDULER / "sxctl-spend-runs.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"executionId": "zz-unfinished')
    assert sched.run(NINE + 11 * MIN, "cron", "runs", "job", "--json").json()["runs"][0]["tokens"] == 100
    agent_with(sched, NINE + HOUR, usage(total=100))
    sched.tick(NINE + HOUR)
    read_all(sched, 300, NINE + HOUR + 10 * MIN)
    sched.tick(NINE + HOUR + 10 * MIN)
    assert path.read_bytes().startswith(whole) and b"zz-unfinished" not in path.read_bytes()
    assert [r["tokens"] for r in history(sched)] == [100, 200]
    path.write_bytes(whole + b"[1]\n")
    result = sched.run(NINE + 2 * HOUR, "cron", "runs", "job")
    assert result.code == 5 and "sxctl-spend-runs.jsonl" in result.err and "line 2" in result.err, result.err
    validated = sched.run(NINE + 2 * HOUR, "cron", "validate", "--json")
    assert validated.code == 5 and "sxctl-spend-runs.jsonl" in validated.out


@pytest.mark.parametrize("point", ["after-claim", "after-start", "after-dispatch", "after-terminal",
                                   "before-spend-history"])
def test_a_pass_killed_at_any_fault_point_never_passes_the_day_by_more_than_one_run(sched, monkeypatch,  # noqa: F811
                                                                                     point):
    """Cap 1,000; each run costs 600. The first run closes in the pass that sends the second,
    which is killed at `point`; whatever the kill left, the agent reads everything and the later
    passes of the day send nothing: the day ends at most one run (600) past its cap."""

    sched.add(NINE - HOUR, "capped", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload",
              "heartbeat-event", "--text", "x", "--max-tokens-per-day", "1000")
    agent_with(sched, NINE, usage(total=0))
    assert len(sched.tick(NINE)["runs"]) == 1
    read_all(sched, 600, NINE + 10 * MIN)
    agent_with(sched, NINE + HOUR, usage(total=600))

    killed_at(monkeypatch, point, lambda: sched.run(NINE + HOUR, "cron", "tick"))
    total = 600
    for n in range(2, 8):
        sent = len(list((sched.folder / "inbox").glob("*.json")))
        total += 600 * sent
        read_all(sched, total, NINE + n * HOUR - 30 * MIN)
        agent_with(sched, NINE + n * HOUR, usage(total=total))
        sched.tick(NINE + n * HOUR, "--terminalize-orphans")
    spend = spend_doc(sched)
    day = sum(d["tokens"] for d in spend["days"] if d["date"] == "2026-12-01")
    assert spend["open"] == [] and day == total and 1000 <= day <= 1000 + 600, (point, day)
    recorded = [r["tokens"] for r in history(sched)]
    ran = sched.run(NINE + 8 * HOUR, "cron", "runs", "capped", "--json", "--limit", "50").json()["runs"]
    assert sorted(r["tokens"] for r in ran if r.get("tokens") is not None) == recorded == [600] * len(recorded)
    assert len(recorded) == day // 600 - (point == "before-spend-history")  # that kill leaves one record out


def test_the_time_a_view_counts_is_the_injectable_clock(sched):  # noqa: F811
    """The growth so far is read at the view's clock: a stats.json whose agent is stale by then
    still counts its last figures (a stopped agent wrote them)."""
    sched.add(NINE - HOUR, "often", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "x", "--max-tokens-per-day", "300")
    busy_agent(sched, NINE, 1000)
    sched.tick(NINE)
    busy_agent(sched, NINE + 10 * MIN, 1500)
    later = sched.run(NINE + 3 * HOUR, "--session", SID, "status", "--json").json()
    assert [r["tokensToday"] for r in later["cron"]["guards"] if r["name"] == "often"] == [500]


def test_runs_open_past_what_the_file_keeps_end_unattributed_not_silently(sched):  # noqa: F811
    scheduler = sched.root / SCHEDULER
    scheduler.mkdir(exist_ok=True)
    book = spend_file.SpendBook()
    for n in range(spend_file.MAX_OPEN + 1):
        book.open.append({"executionId": f"open-{n}", "jobId": "j", "date": "2026-12-01", "project": str(sched.root),
                          "sessionId": SID, "stem": f"1{n:09d}_000000000", "dispatchedAtMs": NINE, "state": "open",
                          "fromTokens": 0})
    spend_file.write_book(scheduler, book, NINE)
    assert len(spend_doc(sched)["open"]) == spend_file.MAX_OPEN
    [dropped] = history(sched)
    assert (dropped["executionId"], dropped["state"]) == ("open-0", "unattributed") and "open at once" in dropped["why"]


def test_after_a_counter_reset_the_day_counts_from_the_new_count(sched):  # noqa: F811
    """Attacker: the session's charged total (5,000) outlived a reset of the agent's counters to
    0, and every token spent up to 5,000 again was charged nothing: 13 runs under a cap of 1,000."""
    sched.add(NINE - HOUR, "k", "--every", "10m", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "k", "--max-tokens-per-day", "1000")
    agent_with(sched, NINE, usage(total=4000))
    assert len(sched.tick(NINE)["runs"]) == 1
    read_all(sched, 5000, NINE + 5 * MIN)  # 1,000 today: at the cap
    sched.tick(NINE + 5 * MIN)
    assert spend_doc(sched)["sessions"][0]["toTokens"] == 5000
    sent, total = 0, 0
    for n in range(1, 12):  # a new day (the counters reset with it), 300 tokens a run
        at = NINE + 24 * HOUR + n * 10 * MIN
        read_all(sched, total, at - 5 * MIN)
        agent_with(sched, at, usage(total=total))
        sent += len(sched.tick(at)["runs"])
        total += 300
    assert sent == 4  # 0, 300, 600, 900 counted before each: the 5th finds 1,200


def _capped_at_its_cap(sched) -> None:  # noqa: F811
    sched.add(NINE - HOUR, "k", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "k", "--max-tokens-per-day", "1000")
    agent_with(sched, NINE, usage(total=0))
    assert len(sched.tick(NINE)["runs"]) == 1
    read_all(sched, 1200, NINE + 10 * MIN)
    sched.tick(NINE + 10 * MIN)  # 1,200 today: at the cap


def test_a_damaged_spend_file_is_a_problem_in_status_and_metrics_not_ok(sched):  # noqa: F811
    """Attacker: every pass stopped on it (exit 5) while `status --json` said ok with no problem
    and `metrics` showed the capped job at 0 tokens today."""
    _capped_at_its_cap(sched)
    (sched.root / SCHEDULER / "sxctl-spend.json").write_text('{"formatVersion": 2, "open": [')
    status = sched.run(NINE + HOUR, "--session", SID, "status", "--json").json()
    assert [p["code"] for p in status["problems"] if p["code"].startswith("cron_")] == ["cron_spend_invalid"]
    metrics = sched.run(NINE + HOUR, "metrics").out
    [line] = [x for x in metrics.splitlines() if x.startswith("sxctl_cron_file_invalid{") and 'file="spend"' in x]
    assert line.endswith(" 1"), line


def test_deleting_the_spend_file_does_not_give_a_capped_job_its_day_again(sched):  # noqa: F811
    """Attacker: `rm .scheduler/sxctl-spend.json` and the capped job ran again that day; the
    counts are rebuilt from the runs' history."""
    _capped_at_its_cap(sched)
    (sched.root / SCHEDULER / "sxctl-spend.json").unlink()
    agent_with(sched, NINE + HOUR, usage(total=1200))
    report = sched.tick(NINE + HOUR)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day"
    assert sum(day["tokens"] for day in spend_doc(sched)["days"]) == 1200  # written back


def test_a_hard_linked_run_history_is_replaced_not_appended_through(sched, tmp_path):  # noqa: F811
    _capped_at_its_cap(sched)
    history_file = sched.root / SCHEDULER / "sxctl-spend-runs.jsonl"
    elsewhere = tmp_path / "elsewhere.jsonl"
    os.link(history_file, elsewhere)
    before = elsewhere.read_bytes()
    agent_with(sched, NINE + 24 * HOUR, usage(total=1200))
    assert len(sched.tick(NINE + 24 * HOUR)["runs"]) == 1  # a new day
    read_all(sched, 1300, NINE + 24 * HOUR + 10 * MIN)
    sched.tick(NINE + 24 * HOUR + 10 * MIN)
    assert elsewhere.read_bytes() == before and len(history(sched)) == 2


def test_a_sent_run_of_a_guarded_job_without_a_record_says_why(sched, monkeypatch):  # noqa: F811
    """Attacker: a pass killed between the spend file and its history left a run with no tokens
    and no note in `cron runs`, while its tokens counted in `status`."""
    from sxctl import faults

    _capped_at_its_cap(sched)
    (sched.root / SCHEDULER / "sxctl-spend-runs.jsonl").unlink()
    [run] = sched.run(NINE + HOUR, "cron", "runs", "k", "--json").json()["runs"]
    assert run["tokens"] is None and "no record of its tokens" in run["tokensNote"]
    assert faults.POINTS[-1] == "before-spend-history"


def test_cron_simulate_says_a_token_cap_rehearsed_without_usage_never_bites(sched):  # noqa: F811
    """Newcomer: a plain `cron simulate` showed 200 heartbeats a day where the real agent got 4."""
    sched.add(NINE - HOUR, "k", "--every", "1h", "--payload", "heartbeat-event", "--text", "k",
              "--max-tokens-per-day", "1000")
    plain = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T12:00Z")
    assert plain.code == 0 and "k: --max-tokens-per-day is rehearsed with an agent that reports no usage: its runs add no " \
        "tokens to the day's count" in plain.err
    steps = sched.root / "usage.json"
    steps.write_text(json.dumps({"total_tokens": 5}))
    given = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T12:00Z",
                      "--usage", str(steps))
    assert given.code == 0 and given.err == ""


@pytest.mark.parametrize(("block", "said"), [
    ({"total_tokens": 5, "rl_5h": 0.1, "rl_7d": 0.1}, None),
    ({"total_tokens": 5, "rl_5h": 5, "rl_7d": 0.1}, "rl_5h is 5, above 1.0 (a fraction of the limit): --rate-limit-ceiling of r "
                                      "finds it unreadable (--on-missing-usage decides)"),
    ({"total_tokens": 5, "rl_5h": 0.1, "rl_7d": 0.1, "rl5h": 0.95}, "'rl5h' is no figure an agent reports (did you mean rl_5h?)"),
    ({"rl_5h": 0.1, "rl_7d": 0.1}, "total_tokens missing: --max-tokens-per-day of k finds it unreadable"),
    (None, "r: --rate-limit-ceiling is rehearsed with an agent that reports no usage: it never holds a run"),
])
def test_cron_simulate_says_which_figure_a_guard_cannot_read_in_the_usage_it_was_given(sched, block, said):  # noqa: F811
    """Attacker: `{"rl_5h": 5}`, a typo `rl5h`, or no --usage at all: every run `dispatched`,
    no word that the guards were never tested (status and doctor name the figure)."""
    sched.add(NINE - HOUR, "k", "--every", "1h", "--payload", "heartbeat-event", "--text", "k",
              "--max-tokens-per-day", "1000")
    sched.add(NINE - HOUR, "r", "--every", "1h", "--payload", "heartbeat-event", "--text", "r",
              "--rate-limit-ceiling", "0.5")
    given = []
    if block is not None:
        (sched.root / "usage.json").write_text(json.dumps(block))
        given = ["--usage", str(sched.root / "usage.json")]
    result = sched.run(NINE, "cron", "simulate", "--from", "2026-12-01T09:00Z", "--until", "2026-12-01T10:00Z",
                       "--json", *given)
    assert result.code == 0, result.err
    warnings = [w for w in result.json()["warnings"] if "after now" not in w]
    if said is None:
        assert warnings == []
    else:
        assert any(said in warning for warning in warnings), warnings


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_run_history_that_cannot_be_written_fails_no_pass_that_sent(sched, tmp_path, kind):  # noqa: F811
    """Attacker: with the history a link, a FIFO or a folder, the pass sent its message, then
    exited 5 without listing the run, and the next pass recorded that run as unknown."""
    sched.add(NINE - HOUR, "j", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "j", "--max-tokens-per-day", "100000")
    agent_with(sched, NINE, usage(total=0))
    sched.tick(NINE)
    read_all(sched, 100, NINE + 10 * MIN)
    path = sched.root / SCHEDULER / "sxctl-spend-runs.jsonl"
    outside = tmp_path / "outside"
    {"symlink": lambda: path.symlink_to(outside), "fifo": lambda: os.mkfifo(path), "folder": path.mkdir}[kind]()
    agent_with(sched, NINE + HOUR, usage(total=100))
    result = sched.run(NINE + HOUR, "cron", "tick", "--json")
    assert result.code == 0, result.err  # the run closed (its record lost) and the next one sent
    doc = result.json()
    assert [run["status"] for run in doc["runs"]] == ["dispatched"]
    assert any("token records were not kept" in w for w in doc["warnings"]), doc["warnings"]
    assert not outside.exists()
    agent_with(sched, NINE + 2 * HOUR, usage(total=100))
    assert [run["status"] for run in sched.tick(NINE + 2 * HOUR)["runs"]] == ["dispatched"]
    ledger = [json.loads(line) for line in (sched.root / SCHEDULER / "cron-executions.jsonl").read_text().splitlines()]
    assert "unsettled" not in json.dumps(ledger) and sum(d["tokens"] for d in spend_doc(sched)["days"]) == 100


def test_a_spend_file_edited_to_forget_the_day_is_overruled_by_the_run_history(sched):  # noqa: F811
    """Attacker: with a capped job at its cap, setting its day's total to 0 in sxctl-spend.json
    let the next pass run it (and metrics said 0), though sxctl-spend-runs.jsonl still held the
    day's closed runs. The day counts the larger of the file's total and what the history proves."""
    sched.add(NINE - HOUR, "capped", "--every", "10m", "--anchor", "2026-12-01T09:00Z", "--payload",
              "heartbeat-event", "--text", "x", "--max-tokens-per-day", "300")
    agent_with(sched, NINE, usage(total=1000))
    assert len(sched.tick(NINE)["runs"]) == 1
    read_all(sched, 1400, NINE + 5 * MIN)  # read, idle: 400 tokens, over the cap
    sched.tick(NINE + 5 * MIN)
    assert [r["tokens"] for r in history(sched)] == [400]
    path = sched.root / SCHEDULER / "sxctl-spend.json"
    doc = spend_doc(sched)
    assert [d["tokens"] for d in doc["days"]] == [400]
    doc["days"][0]["tokens"] = 0  # the lie
    path.write_text(json.dumps(doc))
    at = NINE + 10 * MIN
    read_all(sched, 1400, at)
    report = sched.tick(at)
    assert report["runs"] == [] and report["skippedOccurrences"][0]["reason"] == "max_tokens_per_day", report
    [sample] = [line for line in sched.run(at, "metrics").out.splitlines()
                if line.startswith("sxctl_cron_job_tokens_today{") and 'job="capped"' in line]
    assert sample.endswith(" 400"), sample
    [row] = [r for r in sched.run(at, "--session", SID, "status", "--json").json()["cron"]["guards"]
             if r["name"] == "capped"]
    assert row["tokensToday"] == 400


@pytest.mark.parametrize("damage", ["nan", "folder"])
def test_a_view_of_a_capped_job_refuses_a_damaged_spend_file_as_the_pass_does(sched, damage):  # noqa: F811
    """Attacker: with sxctl-spend.json damaged, `cron list/next/show` and `next` exited 0 and showed
    a capped job `due` (its cap dropped), while every pass refused the file (exit 5)."""
    sched.add(NINE - HOUR, "capped", "--every", "10m", "--anchor", "2026-12-01T09:00Z", "--payload",
              "heartbeat-event", "--text", "x", "--max-tokens-per-day", "300")
    path = sched.root / SCHEDULER / "sxctl-spend.json"
    if damage == "nan":
        path.write_text('{"formatVersion":2,"open":[],"days":[],"sessions":[],"x":NaN}')
    else:
        path.mkdir(parents=True)
    agent_with(sched, NINE, usage(total=1000))
    assert sched.run(NINE, "cron", "tick").code == 5
    for view in (("cron", "list"), ("cron", "next"), ("cron", "show", "capped"), ("--session", SID, "next")):
        result = sched.run(NINE, *view)
        assert result.code == 5 and "sxctl-spend.json" in result.err, (view, result.code, result.out, result.err)
    status = sched.run(NINE, "--session", SID, "status", "--json")
    assert status.code == 0 and "sxctl-spend.json" in json.dumps(status.json()["problems"])

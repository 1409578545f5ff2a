"""`sxctl metrics` and `cron tick --metrics-file`: the Prometheus text format read back with the
official parser (`prometheus_client`), agreeing with `status --json` and `cron runs --json`."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sxctl.clock import FakeClock
from sxctl.observe.metrics import label_value
from tests.comis_strict import check_store_bytes
from tests.conftest import EXAMPLES, heartbeat_file

SID = "2026_12_01_steady_hopper"
OTHER = "2026_11_30_old_session"
NINE = int(datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp() * 1000)
MIN = 60_000
LATER = NINE + 65 * MIN  # "live" and the oddly named job are due since 10:00 and no pass ran
ODD = 'say "hi"\\now\nsecond line \x1b[2J'


@pytest.fixture
def busy(project):
    """A project with something in every metric: a live agent, jobs scheduled, overdue, paused
    by an operator, by a limit and expired; runs read, unread and retracted; a stranded message."""

    class Busy:
        root = project.root
        folder = project.root / ".scorpiox" / "sessions" / SID

        def agent_at(self, ms: int) -> None:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / "stats.json").write_text(json.dumps({"updated_ms": ms, "model": "m"}))

        def run(self, ms: int, *args: str, ok: bool = True):
            result = project.run(*args, clock=FakeClock(ms))
            if ok:
                assert result.code == 0, result.out + result.err
            store = self.root / ".scheduler" / "cron-jobs.json"
            if ok and store.exists():
                assert check_store_bytes(store.read_bytes()) == [], args  # comis still loads it
            return result

        def metrics(self, ms: int) -> dict[str, list]:
            result = project.run("metrics", clock=FakeClock(ms))
            assert result.code == 0, result.err
            return parse(result.out)

    b = Busy()
    b.agent_at(NINE)
    heartbeat = ("--payload", "heartbeat-event", "--text", "x")
    b.run(NINE, "cron", "add", "live", "--every", "1h", *heartbeat)
    b.run(NINE, "cron", "add", ODD, "--every", "1h", *heartbeat)
    b.run(NINE, "cron", "add", "chatty", "--every", "1m", *heartbeat, "--max-unconsumed", "1")
    b.run(NINE, "cron", "add", "brief", "--every", "1m", *heartbeat, "--until", "2026-12-01T09:01:30Z")
    b.run(NINE, "cron", "add", "held", "--every", "1h", *heartbeat)
    b.run(NINE, "cron", "pause", "held")
    for minute in (1, 2):  # chatty reaches its limit; brief runs once and expires
        b.agent_at(NINE + minute * MIN)
        b.run(NINE + minute * MIN, "cron", "tick")
    b.agent_at(NINE + 3 * MIN)
    stems = [b.run(NINE + 3 * MIN + n, "cron", "run", "live", "--json").json()["run"]["outcome"]["stem"]
             for n in range(3)]
    inbox = b.folder / "inbox"
    (inbox / "done").mkdir(exist_ok=True)
    (inbox / f"{stems[0]}.json").rename(inbox / "done" / f"{stems[0]}.json")  # the agent read it
    b.run(NINE + 4 * MIN, "--session", SID, "inbox", "retract", stems[2])
    other = project.root / ".scorpiox" / "sessions" / OTHER / "inbox"
    other.mkdir(parents=True)
    shutil.copy(next(p for p in sorted((EXAMPLES / "inbox").iterdir()) if p.suffix == ".json"), other)
    b.agent_at(LATER)
    return b


def parse(text: str) -> dict[str, list]:
    """Every family of the text as the official parser reads it: name -> [(labels, value)]
    (the workspace label, the same on every sample, left out)."""
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge" and family.documentation, family.name
        found[family.name] = [({k: v for k, v in s.labels.items() if k != "workspace"}, s.value)
                              for s in family.samples]
    return found


def value(families: dict[str, list], name: str, **labels: str) -> float:
    [found] = [v for got, v in families[name] if got == labels]
    return found


def test_the_metrics_parse_and_agree_with_status_and_cron_runs(busy):
    status = busy.run(LATER, "status", "--json").json()
    families = busy.metrics(LATER)
    cron = status["cron"]
    assert {labels["state"]: n for labels, n in families["sxctl_cron_jobs"]} == cron["jobs_by_state"] == {
        "scheduled": 2, "paused:operator": 1, "paused:max_unconsumed": 1, "paused:expired": 1}
    assert value(families, "sxctl_cron_overdue_jobs") == len(cron["overdue"]) == 2
    assert sorted(labels["job"] for labels, _ in families["sxctl_cron_job_overdue"]) == sorted(
        name.replace("\x1b", "\ufffd") for name in cron["overdue"])
    assert value(families, "sxctl_cron_waiting_jobs") == len(cron["waiting"]) == 0
    limits = Counter(p["reason"] for p in cron["paused_by_sxctl"])
    assert {labels["reason"]: n for labels, n in families["sxctl_cron_limits_hit"]} == {
        "max_unconsumed": limits["max_unconsumed"], "expired": limits["expired"]} == {"max_unconsumed": 1, "expired": 1}
    assert sorted((labels["job"], labels["reason"]) for labels, _ in families["sxctl_cron_job_limit_hit"]) == [
        ("brief", "expired"), ("chatty", "max_unconsumed")]
    assert value(families, "sxctl_cron_active_claims") == cron["active_claims"] == 0
    assert value(families, "sxctl_inbox_pending_messages") == status["inbox"]["pending"] == 3
    assert round(value(families, "sxctl_inbox_oldest_pending_age_seconds") * 1000) == status["inbox"]["oldest_pending_age_ms"]
    assert value(families, "sxctl_stranded_sessions") == len(status["stranded"]) == 1
    assert value(families, "sxctl_stranded_messages") == sum(s["pending"] for s in status["stranded"]) == 1
    assert value(families, "sxctl_agent_live") == (status["liveness"]["state"] == "live") == 1
    assert round(value(families, "sxctl_agent_stats_age_seconds") * 1000) == status["liveness"]["stats_age_ms"] == 0
    assert {labels["code"]: n for labels, n in families["sxctl_status_problems"]} == Counter(
        p["code"] for p in status["problems"])
    # the whole ledger's runs, by status and receipt, as `cron runs` shows them
    runs = busy.run(LATER, "cron", "runs", "--all-jobs", "--exact", "--limit", "1000", "--json").json()["runs"]
    receipt = {"read": "read", "pending": "unread", "retracted": "retracted", "lost": "lost"}
    expected = Counter((r["status"], receipt[r["consumption"]["state"]] if "consumption" in r else "none")
                       for r in runs)
    assert {(labels["status"], labels["receipt"]): n for labels, n in families["sxctl_cron_runs"]} == expected
    assert expected == {("dispatched", "read"): 1, ("dispatched", "unread"): 3, ("dispatched", "retracted"): 1}
    assert value(families, "sxctl_cron_unread_runs") == 3
    # the last pass, on this host, 63 minutes ago
    beat = json.loads(heartbeat_file(busy.root).read_text())
    assert families["sxctl_cron_last_pass_age_seconds"] == [({"host": beat["host"]}, (LATER - NINE - 2 * MIN) / 1000)]
    assert value(families, "sxctl_cron_last_pass_outcome", host=beat["host"], outcome="ok") == 1
    assert value(families, "sxctl_cron_heartbeat_invalid") == 0
    assert {labels["file"]: n for labels, n in families["sxctl_cron_file_invalid"]} == {
        "store": 0, "policy": 0, "ledger": 0, "spend": 0}


def test_a_job_name_with_quotes_backslashes_and_line_breaks_cannot_break_the_exposition(busy):
    text = busy.run(LATER, "metrics").out
    families = parse(text)  # the official parser reads every line
    names = {labels["job"] for labels, _ in families["sxctl_cron_job_overdue"]}
    assert names == {"live", ODD.replace("\x1b", "\ufffd")}  # a control character is never passed on
    assert all(line.startswith(("# HELP sxctl_", "# TYPE sxctl_", "sxctl_")) for line in text.splitlines())
    assert '\\"hi\\"\\\\now\\nsecond line \ufffd[2J' in text
    # every sample carries the workspace, so that several projects' files can share a textfile folder
    assert {s.labels["workspace"] for f in text_string_to_metric_families(text) for s in f.samples} == {
        str(busy.root)}


def test_label_values_escape_the_three_characters_and_drop_what_is_not_printable():
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert label_value("tab\there \u202e bidi \ud800 lone") == "tab\ufffdhere \ufffd bidi \ufffd lone"
    assert label_value("plain, ünïcode ✓") == "plain, ünïcode ✓"


def test_the_json_document_holds_the_same_samples(busy):
    text = busy.run(LATER, "metrics").out
    doc = busy.run(LATER, "metrics", "--json").json()
    assert doc["ok"] and doc["content_type"] == "text/plain; version=0.0.4; charset=utf-8"
    shown = {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}
    # JSON holds every character escaped its own way: the job's name as it is
    odd = {"job": ODD}, {"job": ODD.replace("\x1b", "\ufffd")}
    assert {f["name"]: [({**s["labels"], **odd[1]} if s["labels"].get("job") == ODD else s["labels"], s["value"])
                        for s in f["samples"]] for f in doc["metrics"]} == shown
    assert odd[0]["job"] in [s["labels"].get("job") for f in doc["metrics"] for s in f["samples"]]


def test_a_project_without_session_or_store_still_has_metrics(project):
    result = project.run("metrics", clock=FakeClock(NINE))
    assert result.code == 0, result.err
    families = parse(result.out)
    assert value(families, "sxctl_agent_live") == 0 and families["sxctl_cron_jobs"] == []
    assert families["sxctl_cron_last_pass_age_seconds"] == [] and families["sxctl_inbox_pending_messages"] == []


def test_an_invalid_store_or_heartbeat_is_a_metric_not_a_failure(busy):
    beat = heartbeat_file(busy.root)
    beat.write_text("{}")
    assert value(busy.metrics(LATER), "sxctl_cron_heartbeat_invalid") == 1
    (busy.root / ".scheduler" / "cron-jobs.json").write_text("{not json")
    families = busy.metrics(LATER)
    assert {labels["file"]: n for labels, n in families["sxctl_cron_file_invalid"]} == {
        "store": 1, "policy": 0, "ledger": 0, "spend": 0}
    assert families["sxctl_cron_runs"] == [] and families["sxctl_cron_jobs"] == []


def test_one_ledger_ceiling_decides_the_verdict_and_the_counts(busy, project):
    """`--max-log-bytes` (as the pass was given it) is the ceiling of every part: a ledger over
    it is invalid everywhere, one under it is counted everywhere."""
    size = (busy.root / ".scheduler" / "cron-executions.jsonl").stat().st_size
    for ceiling, invalid in ((size - 1, 1), (size + 1, 0)):
        out = project.run("metrics", clock=FakeClock(LATER), env={"SXCTL_MAX_LOG_BYTES": str(ceiling)}).out
        families = parse(out)
        assert value(families, "sxctl_cron_file_invalid", file="ledger") == invalid, ceiling
        assert (families["sxctl_cron_runs"] == []) == bool(invalid), ceiling


def test_a_heartbeat_copied_from_another_workspace_gives_no_pass_age(busy):
    beat = heartbeat_file(busy.root)
    doc = json.loads(beat.read_text())
    beat.write_text(json.dumps({**doc, "workspace": "/somewhere/else"}))
    families = busy.metrics(LATER)
    assert value(families, "sxctl_cron_heartbeat_invalid") == 1 and families["sxctl_cron_last_pass_age_seconds"] == []


def test_a_heartbeat_ahead_of_this_clock_gives_no_pass_age(busy):
    """A heartbeat a day ahead would make `last_pass_age_seconds > 900` never fire; doctor fails
    it, and the metrics do not believe it either."""
    beat = heartbeat_file(busy.root)
    doc = json.loads(beat.read_text())
    beat.write_text(json.dumps({**doc, "lastPassMs": LATER + 24 * 60 * MIN}))
    families = busy.metrics(LATER)
    assert value(families, "sxctl_cron_heartbeat_invalid") == 1 and families["sxctl_cron_last_pass_age_seconds"] == []


# --- cron tick --metrics-file ------------------------------------------------------------------------

def test_the_metrics_file_is_never_one_of_the_agents_or_the_schedulers_files(busy):
    """`--metrics-file .scheduler/cron-jobs.json` (or a timer table, an inbox message) would
    destroy what the agent and the pass own: refused before the pass (exit 2), the file untouched
    (tests/core/engines/test_owned_places.py: the one rule of every such file)."""
    store = busy.root / ".scheduler" / "cron-jobs.json"
    timers = next(p for p in (busy.root / ".scorpiox" / "sessions").iterdir() if not p.name.startswith(".")) \
        / "callbacks.json"
    timers.write_text('{"rev": 0, "slots": []}')
    for n, target in enumerate((store, timers, timers.parent / "inbox" / "1999999999_000000000.json")):
        existed, before = target.exists(), store.read_bytes()
        result = busy.run(LATER + n * MIN, "cron", "tick", "--metrics-file", str(target), ok=False)
        assert result.code == 2 and f"refusing to write the metrics to {target}" in result.err, result.err
        assert target.exists() == existed and (not existed or b"# HELP" not in target.read_bytes())
        assert store.read_bytes() == before  # the pass did not run
    assert busy.run(LATER + 3 * MIN, "cron", "list").code == 0


def test_each_pass_replaces_the_metrics_file_with_what_metrics_prints(busy, tmp_path):
    target = tmp_path / "textfile" / "myapp.prom"
    target.parent.mkdir()
    busy.run(LATER, "cron", "tick", "--metrics-file", str(target))
    assert target.read_text() == busy.run(LATER, "metrics").out
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node-exporter, often another user, reads it
    families = parse(target.read_text())
    assert value(families, "sxctl_cron_overdue_jobs") == 0  # the pass ran them
    assert families["sxctl_cron_last_pass_age_seconds"][0][1] == 0
    os.chmod(target, 0o640)
    busy.run(LATER + MIN, "cron", "tick", "--metrics-file", str(target))
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert parse(target.read_text())["sxctl_cron_last_pass_age_seconds"][0][1] == 0
    assert os.listdir(target.parent) == ["myapp.prom"]  # no temp file left for the collector's glob
    busy.run(LATER + 2 * MIN, "cron", "tick", "--dry-run", "--metrics-file", str(tmp_path / "dry.prom"))
    assert not (tmp_path / "dry.prom").exists()  # a dry run writes nothing


def test_a_metrics_file_that_cannot_be_written_is_a_warning_and_the_pass_still_runs(busy, tmp_path):
    aimed = tmp_path / "aimed.txt"
    aimed.write_text("keep")
    for n, kind in enumerate(("symlink", "fifo", "folder", "device", "a file for its folder")):
        target = tmp_path / f"{n}.prom"
        if kind == "symlink":
            target.symlink_to(aimed)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "folder":
            target.mkdir()
        elif kind == "device":
            target = Path(os.devnull)  # a character device: refused before any temp file is made
        else:
            target = aimed / "m.prom"
        result = busy.run(LATER + n * MIN, "cron", "tick", "--json", "--metrics-file", str(target))
        doc = result.json()
        assert result.code == 0 and doc["ok"], kind
        if n == 0:  # the pass ran what was due
            assert {r["name"] for r in doc["runs"]} == {"live", ODD}
        assert [w for w in doc["warnings"] if "metrics file" in w] == [
            f"metrics file {target} not written: {doc['warnings'][-1].split(': ', 1)[1]}"], kind
        assert f"metrics file {target} not written" in result.err
    assert (tmp_path / "0.prom").is_symlink() and aimed.read_text() == "keep"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "1.prom").st_mode) and (tmp_path / "2.prom").is_dir()
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if ".sxctl-" in p.name) == []
    made = tmp_path / "textfile" / "collector" / "m.prom"  # a missing folder is made, as --log makes its own
    result = busy.run(LATER + 9 * MIN, "-q", "cron", "tick", "--metrics-file", str(made))
    assert result.code == 0 and result.err == "" and "sxctl_cron_jobs" in made.read_text()


def test_a_failed_pass_still_leaves_the_metrics_that_say_why(busy, tmp_path):
    target = tmp_path / "myapp.prom"
    (busy.root / ".scheduler" / "cron-jobs.json").write_text("{not json")
    failed = busy.run(LATER, "cron", "tick", "--metrics-file", str(target), ok=False)
    assert failed.code == 5 and "cron-jobs.json" in failed.err
    families = parse(target.read_text())
    assert value(families, "sxctl_cron_file_invalid", file="store") == 1
    assert value(families, "sxctl_cron_last_pass_outcome", host=families["sxctl_cron_last_pass_age_seconds"][0][0]["host"],
                 outcome="failed") == 1

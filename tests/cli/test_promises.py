"""Every command does what it says, or says why not (the defects a week of real use found)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES


@pytest.mark.parametrize("args", [[], ["inbox"], ["cron"]])
def test_a_group_without_a_subcommand_prints_its_help_plainly(project, args):
    result = project.run(*args)
    assert result.code == 0 and result.err == ""
    assert result.out.startswith(f"Usage: sxctl {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")


@pytest.mark.parametrize(("typo", "meant"), [("sesion", "session"), ("callback", "callbacks"), ("stauts", "status")])
def test_top_level_typos_get_a_suggestion(project, typo, meant):
    result = project.run(typo)
    assert result.code == 2
    assert result.err == f"sxctl: No such command '{typo}'. Did you mean '{meant}'? (see 'sxctl --help')\n"


def test_config_get_of_an_unset_key_is_not_found(project):
    result = project.run("config", "get", "NO_SUCH_KEY")
    assert result.code == 3 and result.out == ""
    assert result.err == "sxctl: NO_SUCH_KEY is not set in any tier\n"
    assert project.run("config", "get", "NO_SUCH_KEY", "--json").json()["error"]["code"] == "key_not_set"


def test_a_missing_text_file_is_exit_3_like_a_missing_image(project):
    project.session(live=False)
    text = project.run("inbox", "send", "--text-file", "missing.md", "--json")
    image = project.run("inbox", "send", "x", "--image", "missing.png", "--json")
    assert text.code == image.code == 3


def test_a_delivery_job_without_a_deliver_command_is_warned_about_at_add(project):
    result = project.run("cron", "add", "stretch", "--in", "1h", "--payload", "delivery", "--text", "stretch")
    assert result.code == 0 and "SXCTL_DELIVER_CMD is not set" in result.err
    quiet = project.run("cron", "add", "stretch2", "--in", "1h", "--payload", "delivery", "--text", "s",
                        env=project.env(SXCTL_DELIVER_CMD="cat"))
    assert quiet.code == 0 and "SXCTL_DELIVER_CMD" not in quiet.err


@pytest.fixture
def store(project):
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    for name in ("cron-jobs.json", "cron-executions.jsonl"):
        (scheduler / name).write_bytes((EXAMPLES / name).read_bytes())
    assert project.run("cron", "add", "standup", "--cron", "0 9 * * 1-5", "--tz", "America/New_York",
                       "--payload", "heartbeat-event", "--text", "plan").code == 0
    assert project.run("cron", "add", "ping", "--every", "30m", "--payload", "heartbeat-event", "--text", "p").code == 0
    return scheduler / "cron-jobs.json"


def _job(store, name):
    return next(j for j in json.loads(store.read_text())["jobs"] if j["name"] == name)


def test_update_without_a_change_is_refused_and_writes_nothing(project, store):
    before = store.read_bytes()
    result = project.run("cron", "update", "standup", "--json")
    assert result.code == 2 and result.json()["error"]["message"].startswith("nothing to change")
    assert store.read_bytes() == before


def test_update_tz_alone_moves_a_cron_job_to_that_zone(project, store):
    before = _job(store, "standup")
    result = project.run("cron", "update", "standup", "--tz", "Europe/Berlin", "--json")
    assert result.code == 0 and result.json()["updated"] is True
    after = _job(store, "standup")
    assert after["schedule"] == {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Berlin"}
    assert after["lifecycle"]["nextRunAtMs"] != before["lifecycle"]["nextRunAtMs"]


def test_update_anchor_alone_re_anchors_an_every_job(project, store):
    result = project.run("cron", "update", "ping", "--anchor", "2026-09-21T00:00:05Z")
    assert result.code == 0
    schedule = _job(store, "ping")["schedule"]
    assert schedule["everyMs"] == 1_800_000 and schedule["anchorMs"] == 1789948805000


@pytest.mark.parametrize("args", [["standup", "--anchor", "2026-09-21T00:00:00Z"], ["standup", "--fold", "earlier"],
                                  ["ping", "--fold", "earlier"]])
def test_update_schedule_options_that_change_nothing_are_refused(project, store, args):
    before = store.read_bytes()
    result = project.run("cron", "update", *args, "--json")
    assert result.code == 2, result.out
    assert store.read_bytes() == before


def test_update_tz_alone_of_an_every_job_changes_its_zone_in_the_policy_file_not_the_store(project, store):
    before = store.read_bytes()
    result = project.run("cron", "update", "ping", "--tz", "Europe/Berlin", "--json")
    assert result.code == 0 and store.read_bytes() == before
    assert project.run("cron", "show", "ping", "--json").json()["tz"] == "Europe/Berlin"


def test_update_cron_keeps_the_jobs_zone_and_says_so(project, store):
    result = project.run("cron", "update", "standup", "--cron", "30 8 * * 1-5", "--json")
    assert result.code == 0
    assert _job(store, "standup")["schedule"] == {"kind": "cron", "expr": "30 8 * * 1-5", "tz": "America/New_York"}
    assert result.json()["notes"] == ["kept the job's zone America/New_York (give --tz to change it)"]
    assert "kept the job's zone America/New_York" in result.err


def _wall_ms(zone: str, *fields: int, fold: int = 0) -> int:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return int(datetime(*fields, fold=fold, tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def _updated_keeping_zone(project, name: str, schedule: list[str], change: list[str], zone: str) -> None:
    """`cron add NAME SCHEDULE --tz ZONE`, then `cron update NAME CHANGE` without --tz: the note
    says the zone was kept."""
    assert project.run("cron", "add", name, *schedule, "--tz", zone, "--payload", "heartbeat-event",
                       "--text", "x").code == 0
    result = project.run("cron", "update", name, *change, "--json")
    notes = result.json()["notes"]  # (an --every without --anchor adds how it counts)
    assert result.code == 0 and notes[0] == f"kept the job's zone {zone} (give --tz to change it)", notes
    assert all(note.startswith("--every ") for note in notes[1:]), notes


def test_update_at_of_a_zoned_one_shot_reads_the_time_in_the_jobs_zone(project, store):
    """An `at` job keeps its `--tz` in the policy file: a new `--at` without `--tz` is a time of
    that zone (said in a note), not UTC; `--tz UTC` still moves it."""
    _updated_keeping_zone(project, "once", ["--at", "2031-01-06 09:00"], ["--at", "2031-01-07 09:00"],
                          "America/New_York")
    assert _job(store, "once")["schedule"] == {"kind": "at", "atMs": _wall_ms("America/New_York", 2031, 1, 7, 9)}
    assert project.run("cron", "update", "once", "--at", "2031-01-07 09:00", "--tz", "UTC").code == 0
    assert _job(store, "once")["schedule"] == {"kind": "at", "atMs": _wall_ms("UTC", 2031, 1, 7, 9)}


def test_update_anchor_alone_reads_the_time_in_the_jobs_zone_with_its_gaps_and_folds(project, store):
    _updated_keeping_zone(project, "ny", ["--every", "1h"], ["--anchor", "2031-03-17 09:00"], "America/New_York")
    assert _job(store, "ny")["schedule"]["anchorMs"] == _wall_ms("America/New_York", 2031, 3, 17, 9)
    gap = project.run("cron", "update", "ny", "--anchor", "2031-03-09 02:30")  # the clocks go forward
    assert gap.code == 2 and "does not exist" in gap.err
    assert project.run("cron", "update", "ny", "--anchor", "2031-11-02 01:30").code == 2  # twice: say which
    later = project.run("cron", "update", "ny", "--anchor", "2031-11-02 01:30", "--fold", "later")
    second = _wall_ms("America/New_York", 2031, 11, 2, 1, 30, fold=1)
    assert later.code == 0 and _job(store, "ny")["schedule"]["anchorMs"] == second


@pytest.mark.parametrize("new", [["--every", "1h"], ["--at", "2031-01-07 09:00"], ["--in", "1h"]])
def test_a_cron_job_changed_to_another_kind_keeps_its_zone_in_the_policy_file(project, store, new):
    """The note "kept the job's zone" is true: the zone moves from comis's cron schedule to the
    policy file, where an every/at job keeps it (its active hours are counted in it)."""
    hours = ["--active-hours", "09:00-10:00"] if new[0] == "--every" else []  # a one-shot refuses active hours
    _updated_keeping_zone(project, "c", ["--cron", "0 9 * * *"], [*new, *hours], "America/Chicago")
    shown = project.run("cron", "show", "c", "--json").json()
    assert shown["tz"] == "America/Chicago", shown


@pytest.mark.parametrize("zone", ["localtime", "Factory", "right/UTC", "posix/UTC", ""])
@pytest.mark.parametrize("kind", [["--cron", "0 9 * * *"], ["--every", "1h"], ["--at", "2031-01-07 09:00"]])
def test_a_zone_that_is_not_an_iana_name_is_refused_for_every_kind(project, store, zone, kind):
    before = store.read_bytes()
    result = project.run("cron", "add", "z", *kind, "--tz", zone, "--payload", "heartbeat-event", "--text", "x")
    message = "Invalid wall-clock timezone" if kind[0] == "--at" else "Invalid cron timezone"  # comis's words
    assert result.code == 2 and result.err.startswith(f"sxctl: {message}\n"), result.err
    assert store.read_bytes() == before


def test_a_keyed_send_that_waits_for_a_retracted_message_is_exit_4(project):
    project.session(live=False)
    stem = project.run("inbox", "send", "deploy", "--key", "k", "--no-wait", "--json").json()["stem"]
    assert project.run("inbox", "retract", stem).code == 0
    again = project.run("inbox", "send", "deploy", "--key", "k", "--wait", "5", "--json")
    assert again.code == 4 and again.json()["error"]["code"] == "retracted"
    assert again.json()["stem"] == stem and again.json()["state"] == "retracted"


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])  # Ctrl-C, and a CI runner cancelling its step
@pytest.mark.parametrize("verb", ["send", "wait", "soft"])
def test_ctrl_c_while_waiting_says_where_the_message_is(project, verb, signum):
    """`soft`: the short wait of a plain send to a live agent; a caller told only "interrupted"
    took the message for unsent and sent it again."""
    import signal
    import subprocess
    import sys

    folder = project.session(live=verb == "soft")
    if verb == "soft":
        argv = ["inbox", "send", "x", "--json", "-v"]
    elif verb == "wait":
        stem = project.run("inbox", "send", "x", "--no-wait", "--json").json()["stem"]
        argv = ["inbox", "wait", stem, "--timeout", "60", "--json", "-v"]
    else:
        argv = ["inbox", "send", "x", "--wait", "60", "--json", "-v"]
    # a terminal user's Ctrl-C (a runner started in the background hands SIGINT down ignored)
    proc = subprocess.Popen([sys.executable, "-m", "sxctl", *argv], cwd=project.root, env=project.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stderr:  # -v says when the wait begins
        if b"waiting " in line:
            break
    if verb != "soft":  # (the soft wait lasts 2 s at most)
        with pytest.raises(subprocess.TimeoutExpired):  # it is waiting: let some of that time pass
            proc.wait(timeout=0.3)
    proc.send_signal(getattr(signal, signum))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    [line] = out.decode().splitlines()
    doc = json.loads(line)
    [written] = (folder / "inbox").glob("*.json")
    assert doc["ok"] is False and doc["error"]["code"] == "interrupted"
    assert doc["stem"] == written.stem and doc["state"] == "pending"
    assert (0 if verb == "soft" else 250) <= doc["waited_ms"] < 30_000  # the time it really waited


def test_status_without_any_session_still_shows_the_scheduler(project, store):
    result = project.run("status", "--json")
    assert result.code == 0, result.out
    doc = result.json()
    assert doc["session"] is None and doc["cron"]["store_exists"] is True
    assert doc["problems"][0]["code"] == "no_session"
    human = project.run("status")
    assert human.code == 0 and "session  none" in human.out and "cron     " in human.out


def test_an_unknown_run_of_a_removed_job_is_named_by_id_with_a_command_that_works(project, store):
    project.session()
    ledger = project.root / ".scheduler" / "cron-executions.jsonl"
    runs = project.run("cron", "runs", "--all-jobs", "--json").json()["runs"]
    unknown = [r for r in runs if r["status"] == "unknown"]
    assert unknown, "the example ledger holds an unknown run"
    job_id = unknown[0]["jobId"]
    doc = json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())
    doc["jobs"] = [j for j in doc["jobs"] if j["id"] != job_id]
    doc["activeClaims"] = [c for c in doc["activeClaims"] if c["jobId"] != job_id]
    (project.root / ".scheduler" / "cron-jobs.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    assert ledger.exists()
    problems = [p["message"] for p in project.run("status", "--json").json()["problems"]
                if p["code"] == "cron_unknown_run"]
    assert problems and "None" not in problems[0]
    assert f"of removed job {job_id}" in problems[0] and "`sxctl cron runs --all-jobs --evidence`" in problems[0]
    assert project.run("cron", "runs", "--all-jobs", "--evidence").code == 0


def test_tick_says_the_trigger_word_the_ledger_records(project):
    from sxctl.clock import FakeClock
    from tests.conftest import now_ms

    start = now_ms()
    project.session(stats={"updated_ms": start + 145_000})  # the agent is live at the pass
    # a minutely job (alone in its store) one minute and a half late: recorded `scheduled` (within
    # 90 s), one occurrence skipped
    assert project.run("cron", "add", "minutely", "--every", "1m", "--payload", "heartbeat-event", "--text", "b",
                       clock=FakeClock(start)).code == 0
    result = project.run("cron", "tick", "--json", clock=FakeClock(start + 60_000 + 85_000))
    assert result.code == 0, result.out
    [run] = [r for r in result.json()["runs"] if r["name"] == "minutely"]
    assert run["trigger"] == "scheduled" and run["skipped_occurrences"] == 1
    [row] = [r for r in result.json()["outcomes"] if r["name"] == "minutely"]
    assert (row["fate"], row["trigger"], row["count"]) == ("ran", "scheduled", 2)  # one run stands for both


def test_runs_table_shows_the_job_and_the_evidence(project, store):
    project.session()
    table = project.run("cron", "runs", "--all-jobs", "--evidence")
    assert table.code == 0
    header = table.out.splitlines()[0].split()
    assert header[0] == "JOB" and header[-1] == "EVIDENCE"
    assert "no message was written" in table.out  # the example's unknown run


@pytest.mark.parametrize(("args", "first", "hint"), [
    (["--cron", "61 9 * * *"], "Invalid cron expression", "field 1 (minute) is '61'; it takes 0-59"),
    (["--cron", "0 9 * 13 *"], "Invalid cron expression", "field 4 (month) is '13'; it takes 1-12"),
    (["--every", "0"], "Invalid cron schedule input", "--every takes a DURATION above 0"),
    (["--in", "1.5"], "Invalid cron schedule input", "--in takes a positive whole number of seconds"),
])
def test_comis_errors_keep_their_first_line_and_add_a_hint(project, args, first, hint):
    result = project.run("cron", "add", "x", *args, "--payload", "heartbeat-event", "--text", "t")
    assert result.code == 2
    lines = result.err.splitlines()
    assert lines[0] == f"sxctl: {first}" and lines[1].startswith(f"sxctl: hint: {hint}")
    doc = project.run("cron", "add", "x", *args, "--payload", "heartbeat-event", "--text", "t", "--json").json()
    assert doc["error"]["message"] == first and doc["error"]["hint"].startswith(hint)


def _complete(project, line):
    import subprocess
    import sys

    words = line.split(" ")
    code = ("import runpy, sys\ntry:\n    runpy.run_module('sxctl', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(' '.join(m for m in ('rich', 'croniter', 'dateutil') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=project.root, capture_output=True, text=True, timeout=60,
                          env=project.env(COMP_WORDS=line, COMP_CWORD=str(len(words) - 1),
                                          _SXCTL_COMPLETE="bash_complete"))
    return [item.split(",", 1)[1] for item in proc.stdout.splitlines()], proc.stderr.strip()


@pytest.mark.parametrize(("line", "expected"), [
    ("sxctl cron pause ", ["ci-watch", "morning-briefing", "next-check-in", "ping", "standup"]),
    ("sxctl cron runs st", ["standup"]),
    ("sxctl --session 2026_09", ["2026_09_21_quiet_euler"]),
    ("sxctl cron next --tz europe/ber", ["Europe/Berlin"]),
    ("sxctl cb cancel ", ["0", "3"]),  # the active slots of the example table
])
def test_names_complete_without_heavy_imports(project, store, line, expected):
    folder = project.session()
    (folder / "callbacks.json").write_bytes((EXAMPLES / "callbacks.json").read_bytes())
    completed, heavy = _complete(project, line)
    assert completed == expected and heavy == ""


def test_pending_stems_complete(project):
    project.session()
    stem = project.run("inbox", "send", "x", "--no-wait", "--json").json()["stem"]
    assert _complete(project, "sxctl inbox retract ")[0] == [stem]


def test_local_times_use_the_zone_of_that_date_not_of_today(project):
    """TZ=Europe/Berlin: a daily 08:00 UTC job across the spring change shows 09:00+01:00, then
    10:00+02:00 (a fixed offset of "now" would show 09:00+01:00 on both days)."""
    result = project.run("cron", "next", "--every", "1d", "--anchor", "2026-03-27T08:00Z",
                         "--from", "2026-03-27T00:00Z", "-n", "3", "--json", env=project.env(TZ="Europe/Berlin"))
    assert result.code == 0, result.out
    local = [fire["at_local"] for fire in result.json()["fires"]]
    assert local == ["2026-03-27T09:00:00+01:00", "2026-03-28T09:00:00+01:00", "2026-03-29T10:00:00+02:00"]


def test_every_view_counts_pending_messages_by_one_rule(project):
    import os

    folder = project.session(live=False)
    project.run("inbox", "send", "one", "--no-wait")
    inbox = folder / "inbox"
    (inbox / ".hidden.json").write_text("{}")  # not a message: a dotfile
    (inbox / "x.json.tmp").write_text("{}")  # not a message: a temp
    os.mkfifo(inbox / "fifo.json")  # a message name the agent will not claim: still pending
    listed = len(project.run("inbox", "list", "--json").json()["messages"])
    status = project.run("status", "--json").json()["inbox"]["pending"]
    sessions = project.run("session", "list", "--json").json()["sessions"][0]["inbox_pending"]
    assert listed == status == sessions == 2


def test_a_missing_choice_is_one_line_naming_the_choices(project):
    """click's message for a missing choice has line breaks and tabs, which the terminal filter
    showed as `\\n\\t`: one line, the choices comma-separated."""
    result = project.run("cron", "export")
    assert result.code == 2
    assert result.err == ("sxctl: Missing option '--target'. Choose from: crontab, systemd, kubernetes "
                          "(see 'sxctl cron export --help')\n")

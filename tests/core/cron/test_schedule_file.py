"""Jobs as code: `cron plan`, `cron apply`, `cron dump` through the CLI — plans that write nothing,
one-transaction applies that a second apply does not change, managed and hand-made jobs, drift,
the dump round trip, and the files a schedule file must refuse."""

from __future__ import annotations

import json
import os

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes
from tests.conftest import tree
from tests.core.cron import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

NOW = 1_789_974_090_000  # 2026-09-21 07:01:30 UTC

STANDUP = """\
[jobs.standup]
cron = "0 9 * * 1-5"
tz = "Europe/Berlin"
text = "Run the standup: summarize yesterday's commits."
"""

TWO_JOBS = STANDUP + """
[jobs.nightly]
every = "6h"
anchor = "2026-09-21T00:00:00Z"
payload = "heartbeat-event"
text = "Review the open risks."
hold-max = "2h"
max-runs-per-day = 3
"""


def sx(project, *args, now=NOW, env=None):
    return project.run(*args, clock=FakeClock(now), env=env or project.env(NO_COLOR="1"))


def write(project, text, name="sxctl.toml"):
    path = project.root / name
    path.write_text(text)
    return path


def applied(project, text, *args, now=NOW):
    """The file written, then `cron apply ARGS` of it, which succeeds."""
    write(project, text)
    result = sx(project, "cron", "apply", *args, now=now)
    assert result.code == 0, result.err
    return result


def scheduler_files(project):
    folder = project.root / ".scheduler"
    return {name: (folder / name).read_bytes() for name in ("cron-jobs.json", "sxctl-policy.json")
            if (folder / name).exists()}


def jobs_of(project):
    return {job["name"]: job for job in json.loads((project.root / ".scheduler" / "cron-jobs.json").read_bytes())["jobs"]}


def test_plan_writes_nothing_and_says_what_apply_adds(project):
    write(project, TWO_JOBS)
    before = tree(project.root)
    result = sx(project, "cron", "plan")
    assert result.code == 0, result.err
    assert "+ add standup" in result.out and "+ add nightly" in result.out
    assert "2 to add" in result.out
    assert tree(project.root) == before
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 11
    doc = sx(project, "--json", "cron", "plan").json()
    assert doc["pending"] is True and doc["counts"]["add"] == 2


def test_apply_makes_the_jobs_and_a_second_apply_changes_no_byte(project):
    write(project, TWO_JOBS)
    result = sx(project, "cron", "apply")
    assert result.code == 0, result.err
    jobs = jobs_of(project)
    assert jobs["standup"]["schedule"] == {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Berlin"}
    assert jobs["nightly"]["schedule"] == {"kind": "every", "everyMs": 21_600_000, "anchorMs": 1_789_948_800_000}
    store = (project.root / ".scheduler" / "cron-jobs.json").read_bytes()
    assert check_store_bytes(store) == []
    policy = json.loads((project.root / ".scheduler" / "sxctl-policy.json").read_bytes())
    assert policy["jobs"][jobs["nightly"]["id"]]["holdMaxMs"] == 7_200_000
    assert set(policy["applied"]["jobs"]) == {jobs["standup"]["id"], jobs["nightly"]["id"]}
    files = scheduler_files(project)
    stats = {name: os.stat(project.root / ".scheduler" / name).st_mtime_ns for name in files}
    again = sx(project, "cron", "apply", now=NOW + 60_000)
    assert again.code == 0 and "no changes" in again.out
    assert scheduler_files(project) == files
    assert {name: os.stat(project.root / ".scheduler" / name).st_mtime_ns for name in files} == stats
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0


def test_an_update_keeps_the_next_run_unless_the_schedule_changes(project):
    applied(project, TWO_JOBS)
    before = jobs_of(project)
    write(project, TWO_JOBS.replace('hold-max = "2h"', 'hold-max = "3h"').replace("Review the open", "Review all"))
    plan = sx(project, "cron", "plan")
    assert "~ update nightly" in plan.out
    assert "hold-max: 2h -> 3h" in plan.out and "text: 'Review the open risks.' -> 'Review all risks.'" in plan.out
    assert sx(project, "cron", "apply", now=NOW + 3_600_000).code == 0
    after = jobs_of(project)
    assert after["nightly"]["id"] == before["nightly"]["id"]
    assert after["nightly"]["lifecycle"] == before["nightly"]["lifecycle"]
    assert after["nightly"]["payload"]["text"] == "Review all risks."
    write(project, TWO_JOBS.replace('every = "6h"', 'every = "4h"'))
    assert sx(project, "cron", "apply", now=NOW + 3_600_000).code == 0
    moved = jobs_of(project)["nightly"]
    assert moved["schedule"]["everyMs"] == 14_400_000 and moved["id"] == before["nightly"]["id"]
    assert check_store_bytes((project.root / ".scheduler" / "cron-jobs.json").read_bytes()) == []


def test_prune_removes_only_managed_jobs_and_hand_made_ones_are_listed(project):
    applied(project, TWO_JOBS)
    assert sx(project, "cron", "add", "by-hand", "--every", "1h", "--payload", "heartbeat-event",
              "--text", "mine").code == 0
    write(project, STANDUP)
    plan = sx(project, "cron", "plan")
    assert "! keep nightly: managed (made or adopted by an apply), not in the file (--prune removes it)" in plan.out
    assert "unmanaged (made by hand, never touched): by-hand" in plan.out
    assert sx(project, "cron", "apply").code == 0
    assert set(jobs_of(project)) == {"standup", "nightly", "by-hand"}
    pruned = sx(project, "cron", "apply", "--prune")
    assert pruned.code == 0 and "- removed nightly" in pruned.out
    assert set(jobs_of(project)) == {"standup", "by-hand"}
    assert sx(project, "cron", "plan", "--prune", "--detailed-exitcode").code == 0


def test_a_hand_made_job_is_adopted_only_as_it_is(project):
    assert sx(project, "cron", "add", "standup", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin",
              "--payload", "agent-turn", "--text", "Run the standup: summarize yesterday's commits.").code == 0
    write(project, STANDUP.replace("0 9", "0 10"))
    files = scheduler_files(project)
    refused = sx(project, "cron", "apply")
    assert refused.code == 4
    assert "a job made by hand has this name and differs from the file (cron 0 9 * * 1-5 -> 0 10 * * 1-5)" \
        in refused.err
    assert len(refused.err.strip().splitlines()) <= 2
    assert scheduler_files(project) == files
    write(project, STANDUP)
    adopted = sx(project, "cron", "apply")
    assert adopted.code == 0 and "= adopted (made by hand, as declared) standup" in adopted.out
    assert scheduler_files(project)["cron-jobs.json"] == files["cron-jobs.json"]
    write(project, "")
    assert "- removed standup" in sx(project, "cron", "apply", "--prune").out


def test_drift_is_named_by_plan_status_and_doctor(project):
    applied(project, TWO_JOBS)
    assert sx(project, "cron", "update", "nightly", "--hold-max", "5h").code == 0
    plan = sx(project, "cron", "plan")
    assert "drift since the last cron apply:" in plan.out
    assert "nightly: edited by hand since the last cron apply (hold-max 2h -> 5h)" in plan.out
    assert "hold-max: 5h -> 2h" in plan.out
    status = sx(project, "--json", "status").json()
    assert status["cron"]["schedule_drift"]["jobs"][0]["name"] == "nightly"
    doctor = sx(project, "doctor")
    assert "nightly: edited by hand since the last cron apply" in doctor.out
    assert sx(project, "cron", "remove", "standup", "--yes").code == 0
    assert "standup: removed by hand" in sx(project, "cron", "plan").out
    assert sx(project, "cron", "apply").code == 0
    assert sx(project, "--json", "cron", "plan").json()["drift"]["jobs"] == []


def test_dump_then_apply_leaves_the_store_byte_for_byte(project, ws):
    for args in (["add", "watch", "--every", "15m", "--anchor", "2026-09-21T08:00:00.250", "--payload", "delivery",
                  "--text", 'line one\nline "two"\ttabbed', "--active-hours", "09:00-17:00", "--active-days",
                  "mon-fri", "--tz", "Europe/Berlin", "--jitter", "90s", "--ping-url", "https://hc.example/abc"],
                 ["add", "weekly", "--cron", "0 8 * * mon", "--payload", "agent-turn", "--text", "plan the week",
                  "--model", "m1", "--timeout-seconds", "10m", "--max-runs", "10", "--catch-up", "skip",
                  "--stale-after", "1h", "--host", "build-1", "--rate-limit-ceiling", "0.8"],
                 ["budget", "set", "--max-tokens-per-day", "500000"], ["defaults", "--max-catchup", "4"]):
        assert sx(project, "cron", *args).code == 0
    store = (ws / "cron-jobs.json").read_bytes()
    dumped = sx(project, "cron", "dump")
    assert dumped.code == 0, dumped.err
    assert "PING_URL_WATCH" in dumped.err and "hc.example/abc" not in dumped.out
    write(project, dumped.out)
    env = project.env(NO_COLOR="1", PING_URL_WATCH="https://hc.example/abc")
    planned = sx(project, "--json", "cron", "plan", env=env)
    assert planned.code == 0, (planned.out, planned.err, dumped.out)
    plan = planned.json()
    assert {job["action"] for job in plan["jobs"] if job["name"] in ("watch", "weekly", "morning-briefing")} \
        == {"adopt"}
    applied = sx(project, "cron", "apply", env=env)
    assert applied.code == 0, applied.err
    assert (ws / "cron-jobs.json").read_bytes() == store
    assert sx(project, "cron", "plan", "--detailed-exitcode", env=env).code == 0
    assert sx(project, "cron", "dump").out == dumped.out


@pytest.mark.parametrize(("text", "message"), [
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nhold-maxx = "1h"\n',
     "sxctl.toml:4: jobs.a.hold-maxx: unknown key (did you mean 'hold-max'?)"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nping-url = "https://h.example/x"\n',
     "sxctl.toml:4: jobs.a.ping-url: not a key of a schedule file"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nstale-after = "30m"\n',
     "sxctl.toml:4: jobs.a.stale-after: --stale-after applies with --catch-up skip"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\ntz = "Mars/Olympus"\n', "sxctl.toml:4: jobs.a.tz: Invalid cron timezone"),
    ('[jobs.a]\nat = "2027-01-01T09:00"\ntext = "x"\ntz = "Mars/Olympus"\n',
     "sxctl.toml:4: jobs.a.tz: Invalid wall-clock timezone"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\ntimezone = "UTC"\n', "unknown key (did you mean 'tz'?)"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\n\n[jobs.a.policy]\nx = 1\n',
     "sxctl.toml:5: jobs.a.policy: unknown key"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nping-url-env = "BAD_PING"\n', "sxctl.toml:4: jobs.a.ping-url-env:"),
    ('[jobs.a]\ncron = "0 9 * * *"\n[jobs.a]\ntext = "x"\n', "not valid TOML"),
    ('[jobs."a\\nb"]\ncron = "0 9 * * *"\ntext = "x"\n', "not a job name: it holds the control character U+000A"),
    ('[jobs.a]\nevery = "1M"\ntext = "x"\n', "'M' is ambiguous"),
    ('[jobs.a]\ncron = "0 9 * * *"\nevery = "1h"\ntext = "x"\n', "exactly one schedule"),
    ('[jobs.a]\ncron = "0 9 * * *"\n', "text is required"),
    ('[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nhost = "a b"\n', "jobs.a"),
    ('[jobz.a]\n', "unknown key (did you mean 'jobs'?)"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "sxctl.toml"),
])
def test_a_bad_schedule_file_is_one_line_naming_the_file_and_key(project, text, message):
    write(project, text)
    for command in ("plan", "apply"):
        result = sx(project, "cron", command, env=project.env(NO_COLOR="1", BAD_PING="ftp://x.example/p"))
        assert result.code == 2, (result.out, result.err)
        assert message in result.err
        assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 2
    assert not (project.root / ".scheduler").exists()


def test_hostile_files_are_refused_without_reading_them_whole(project):
    (project.root / "sxctl.toml").write_bytes(b"[jobs.a]\ntext = \"\xff\"\n")
    result = sx(project, "cron", "plan")
    assert result.code == 2 and "sxctl.toml:2: not UTF-8 text" in result.err
    (project.root / "sxctl.toml").write_bytes(b"# " + b"x" * (1024 * 1024 + 10) + b"\n")
    assert "larger than 1024 KiB" in sx(project, "cron", "plan").err
    (project.root / "sxctl.toml").unlink()
    os.mkfifo(project.root / "sxctl.toml")
    fifo = sx(project, "cron", "plan")
    assert fifo.code == 5 and "sxctl.toml" in fifo.err
    (project.root / "sxctl.toml").unlink()
    missing = sx(project, "cron", "plan")
    assert missing.code == 3 and "sxctl cron dump > sxctl.toml" in missing.err


@pytest.mark.parametrize("nth", [1, 2])  # the policy file's rename, then the store's
def test_an_apply_killed_at_a_write_leaves_the_old_store_or_the_new(project, monkeypatch, nth):
    from sxctl.api import apply_schedule
    from tests.conftest import killed_at

    applied(project, TWO_JOBS)
    old = scheduler_files(project)["cron-jobs.json"]
    changed = TWO_JOBS.replace('hold-max = "2h"', 'hold-max = "3h"').replace('every = "6h"', 'every = "4h"') + \
        '\n[jobs.third]\nat = "2026-09-22T10:00:00Z"\npayload = "delivery"\ntext = "ship it"\n'
    write(project, changed)
    monkeypatch.chdir(project.root)
    killed_at(monkeypatch, "before-rename", lambda: apply_schedule(clock=FakeClock(NOW)), nth=nth)
    store = scheduler_files(project)["cron-jobs.json"]
    assert store == old  # the kill came before the store's rename: the old store, whole
    assert check_store_bytes(store) == []
    plan = sx(project, "--json", "cron", "plan").json()
    assert plan["pending"] and plan["counts"]["add"] == 1 and plan["counts"]["update"] == 1
    assert sx(project, "cron", "apply").code == 0
    jobs = jobs_of(project)
    assert set(jobs) == {"standup", "nightly", "third"} and jobs["nightly"]["schedule"]["everyMs"] == 14_400_000
    assert sx(project, "--json", "cron", "plan").json()["drift"]["jobs"] == []
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0


def test_apply_racing_a_pass_and_an_edit_loses_nothing(project, tmp_path):
    from tests.conftest import start_together

    applied(project, TWO_JOBS)
    assert sx(project, "cron", "add", "by-hand", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    write(project, TWO_JOBS.replace('hold-max = "2h"', 'hold-max = "4h"'))
    runs = start_together(project, [["cron", "apply", "--lock-wait", "30"], ["cron", "tick", "--lock-wait", "30"],
                                    ["cron", "update", "by-hand", "--text", "edited", "--lock-wait", "30"]],
                          tmp_path / "gun")
    assert [run.wait().code for run in runs] == [0, 0, 0]
    jobs = jobs_of(project)
    assert jobs["by-hand"]["payload"]["text"] == "edited"
    policy = json.loads((project.root / ".scheduler" / "sxctl-policy.json").read_bytes())
    assert policy["jobs"][jobs["nightly"]["id"]]["holdMaxMs"] == 14_400_000
    assert check_store_bytes((project.root / ".scheduler" / "cron-jobs.json").read_bytes()) == []
    assert project.run("--json", "cron", "plan").json()["drift"]["jobs"] == []  # the racers' clock: now


def test_one_file_on_many_hosts_gives_each_host_its_jobs(sched):
    from tests.core.cron.test_scheduling import MIN, NINE

    (sched.root / "sxctl.toml").write_text(
        '[jobs.backup]\nevery = "1h"\nanchor = "2026-12-01T09:00:00Z"\npayload = "heartbeat-event"\ntext = "b"\n'
        'host = "alpha"\n\n[jobs.report]\nevery = "1h"\nanchor = "2026-12-01T09:00:00Z"\n'
        'payload = "heartbeat-event"\ntext = "r"\nhost = "beta"\n')
    for host in ("alpha", "beta"):  # each host applies the same file before its pass: the second changes nothing
        result = sched.run(NINE - MIN, "cron", "apply", env=sched.env(SXCTL_HOST=host))
        assert result.code == 0, result.err
    sched.agent_at(NINE + MIN)
    ran = {}
    for host in ("alpha", "beta"):
        report = sched.run(NINE + MIN, "--json", "cron", "tick", env=sched.env(SXCTL_HOST=host)).json()
        ran[host] = [run["name"] for run in report["runs"]]
    assert ran == {"alpha": ["backup"], "beta": ["report"]}


def test_a_copy_of_the_workspace_plans_no_change_and_the_file_means_the_same_from_any_folder(project, tmp_path):
    import shutil

    (project.root / "sub" / "app" / ".scorpiox").mkdir(parents=True)
    applied(project, TWO_JOBS + '\n[jobs.sub]\nevery = "1h"\ntext = "in sub"\nto-project = "sub/app"\n')
    jobs = jobs_of(project)
    assert jobs["standup"]["deliveryTarget"]["destinationEndpoint"]["channelInstanceId"] == "."
    assert jobs["sub"]["deliveryTarget"]["destinationEndpoint"]["channelInstanceId"] == "sub/app"
    from_sub = project.run("--workspace", str(project.root), "cron", "plan", "--detailed-exitcode",
                           clock=FakeClock(NOW), cwd=project.root / "sub" / "app")
    assert from_sub.code == 0, from_sub.out
    copy = tmp_path / "ci" / "copy"
    shutil.copytree(project.root, copy, symlinks=True)
    in_copy = project.run("--workspace", str(copy), "cron", "plan", "--detailed-exitcode", clock=FakeClock(NOW),
                          cwd=copy)
    assert in_copy.code == 0, in_copy.out
    assert "drift" not in in_copy.out


def test_a_ping_url_comes_from_its_variable_and_is_left_alone_where_it_is_not_set(project):
    write(project, STANDUP + 'ping-url-env = "STANDUP_PING"\n')
    unset = sx(project, "cron", "apply")
    assert unset.code == 0 and "STANDUP_PING is not set here" in unset.err
    assert "pingUrl" not in json.dumps(json.loads((project.root / ".scheduler" / "sxctl-policy.json").read_bytes())["jobs"])
    env = project.env(NO_COLOR="1", STANDUP_PING="https://hc.example/one")
    plan = sx(project, "cron", "plan", env=env)
    assert "ping-url: (none) -> https://hc.example/… #" in plan.out and "/one" not in plan.out
    assert sx(project, "cron", "apply", env=env).code == 0
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0  # unset here: left as the job has it
    other = sx(project, "cron", "plan", env=project.env(NO_COLOR="1", STANDUP_PING="https://hc.example/two"))
    before, after = other.out.split("ping-url: ")[1].split("\n")[0].split(" -> ")
    assert before != after and "/two" not in other.out


def test_what_an_operator_does_by_hand_that_the_file_does_not_say_survives_an_apply(project):
    applied(project, TWO_JOBS)
    paused = sx(project, "cron", "pause", "standup")
    assert paused.code == 0
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0  # `paused` is not in the file
    assert jobs_of(project)["standup"]["lifecycle"]["status"] == "paused"
    write(project, TWO_JOBS.replace('text = "Run the standup', 'paused = false\ntext = "Run the standup'))
    assert "paused: true -> false" in sx(project, "cron", "plan").out
    updated = sx(project, "cron", "update", "nightly", "--text", "by hand")
    assert "it is managed by sxctl.toml (`cron apply`)" in updated.err
    removed = sx(project, "cron", "remove", "nightly", "--yes")
    assert "it is managed by sxctl.toml" in removed.err


def test_a_review_sees_every_key_of_a_new_job_and_a_comment_is_not_a_change(project):
    write(project, TWO_JOBS)
    plan = sx(project, "cron", "plan").out
    assert '+ add nightly\n    every: 6h\n    anchor: 2026-09-21T00:00:00Z\n    payload: heartbeat-event' in plan
    assert "    hold-max: 2h\n" in plan and "    max-runs-per-day: 3\n" in plan
    assert sx(project, "cron", "apply").code == 0
    write(project, "# reviewed by the on-call\n" + TWO_JOBS.replace("\n\n", "\n\n# the night shift\n"))
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0
    assert "changed since" not in sx(project, "doctor").out


def test_quiet_apply_prints_nothing_when_nothing_changes_and_a_past_one_shot_is_warned_of(project):
    write(project, STANDUP + '\n[jobs.once]\nat = "2025-01-01T09:00:00Z"\ntext = "typo year"\n')
    first = sx(project, "-q", "cron", "apply")
    assert first.code == 0 and "+ added standup" in first.out
    again = sx(project, "-q", "cron", "apply")
    assert again.code == 0 and again.out == ""
    loud = sx(project, "cron", "plan")
    assert "jobs.once: its time has passed: not added" in loud.err


# --- the attacker's round ----------------------------------------------------------------------------

def test_dump_never_writes_over_the_schedulers_files_or_through_what_is_not_a_file(project):
    applied(project, STANDUP)
    files = scheduler_files(project)
    for target in (".scheduler/cron-jobs.json", ".scheduler/sxctl-policy.json", ".scheduler/../.scheduler/x.toml",
                   str(project.root / ".scorpiox" / "sxctl.toml")):
        refused = sx(project, "cron", "dump", "-o", target)
        assert refused.code == 2 and "inside a .scorpiox/ or .scheduler/ folder" in refused.err, target
    assert sx(project, "cron", "dump", "-o", "").code == 5  # "." is a folder: nothing written
    assert sx(project, "cron", "dump", "-o", "no/such/folder/x.toml").code == 3
    os.mkfifo(project.root / "fifo.toml")
    assert sx(project, "cron", "dump", "-o", "fifo.toml").code == 5
    (project.root / "real.toml").write_text("")
    (project.root / "link.toml").symlink_to(project.root / "real.toml")
    assert sx(project, "cron", "dump", "-o", "link.toml").code == 5 and (project.root / "real.toml").read_text() == ""
    assert scheduler_files(project) == files
    assert sx(project, "cron", "dump", "-o", "out.toml").code == 0 and "[jobs.standup]" in (
        project.root / "out.toml").read_text()


def test_files_a_job_reads_are_beside_the_schedule_file_and_a_linked_file_is_followed(project, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("OUTSIDE SECRET\n")
    for value in (str(outside), "../secret.txt"):
        write(project, f'[jobs.a]\ncron = "0 9 * * *"\ntext-file = "{value}"\n')
        refused = sx(project, "cron", "plan")
        assert refused.code == 2 and "is not in the schedule file's folder" in refused.err
        assert "OUTSIDE SECRET" not in refused.out + refused.err
    (project.root / "prompts").mkdir()
    (project.root / "prompts" / "a.md").write_text("hello\n")
    mounted = tmp_path / "mount"  # a ConfigMap: the file is a link into a folder beside it
    mounted.mkdir()
    (mounted / "sxctl.toml").write_text('[jobs.a]\ncron = "0 9 * * *"\ntext-file = "prompts/a.md"\n')
    (project.root / "sxctl.toml").unlink()
    (project.root / "sxctl.toml").symlink_to(mounted / "sxctl.toml")
    (mounted / "prompts").symlink_to(project.root / "prompts")
    linked = sx(project, "cron", "plan")  # a ConfigMap-like link is followed; what it names is beside it
    assert linked.code == 0 and "text: 'hello'" in linked.out
    (project.root / "sxctl.toml").unlink()
    applied(project, '[jobs.a]\ncron = "0 9 * * *"\ntext-file = "prompts/a.md"\n')
    assert jobs_of(project)["a"]["payload"]["message"] == "hello"  # one line break removed, as --text-file does
    assert sx(project, "cron", "add", "b", "--cron", "0 9 * * *", "--payload", "agent-turn",
              "--text-file", "prompts/a.md").code == 0
    write(project, '[jobs.a]\ncron = "0 9 * * *"\ntext-file = "prompts/a.md"\n\n'
                   '[jobs.b]\ncron = "0 9 * * *"\ntext-file = "prompts/a.md"\n')
    assert sx(project, "cron", "apply").code == 0  # the hand-made b is adopted: the same text


@pytest.mark.parametrize("nth", [1, 2])  # the policy file's rename, then the store's
def test_a_prune_killed_between_its_writes_keeps_the_job_whole_and_managed(project, monkeypatch, nth):
    from sxctl.api import apply_schedule
    from tests.conftest import killed_at

    applied(project, TWO_JOBS)
    nightly = jobs_of(project)["nightly"]["id"]
    write(project, STANDUP.replace("Run the", "Now run the"))
    monkeypatch.chdir(project.root)
    killed_at(monkeypatch, "before-rename", lambda: apply_schedule(prune=True, clock=FakeClock(NOW)), nth=nth)
    assert "nightly" in jobs_of(project)
    policy = json.loads((project.root / ".scheduler" / "sxctl-policy.json").read_bytes())
    assert policy["jobs"][nightly]["holdMaxMs"] == 7_200_000  # its policy kept while it is in the store
    drift = sx(project, "--json", "status").json()["cron"]["schedule_drift"]["jobs"]
    assert "nightly" not in [job["name"] for job in drift]  # (the first write ahead of the store: standup's text)
    assert "- remove nightly" in sx(project, "cron", "plan", "--prune").out
    assert "! keep" in sx(project, "cron", "plan").out
    assert "- removed nightly" in sx(project, "cron", "apply", "--prune").out
    assert set(jobs_of(project)) == {"standup"}
    assert sx(project, "cron", "plan", "--prune", "--detailed-exitcode").code == 0


def test_the_words_a_flag_takes_for_none_converge_and_no_secret_reaches_json(project):
    write(project, '[jobs.c]\nevery = "1h"\npayload = "heartbeat-event"\ntext = "x"\non-missing-usage = "default"\n'
                   'active-hours = "none"\nuntil = "none"\nhost = "any"\nactive-days = "none"\njitter = 0\n'
                   'ping-url-env = "C_PING"\n')
    env = project.env(NO_COLOR="1", C_PING="none")
    assert sx(project, "cron", "apply", env=env).code == 0
    assert sx(project, "cron", "plan", "--detailed-exitcode", env=env).code == 0
    assert sx(project, "cron", "update", "c", "--ping-url", "https://hc.example/SECRET").code == 0
    for args in (("--json", "status"), ("--json", "cron", "plan"), ("--json", "cron", "apply", "--dry-run")):
        assert "SECRET" not in sx(project, *args, env=env).out, args


@pytest.mark.parametrize(("line", "message"), [
    ("max-runs = -1", "jobs.c.max-runs: must be from 0 to"), ("max-unconsumed = 1001", "must be from 0 to 1000"),
    ("max-runs-per-day = 100001", "must be from 0 to 100000"), ("every = inf", "jobs.c.every: invalid every inf"),
    ("hold-max = nan", "jobs.c.hold-max: invalid hold-max nan"), ("jitter = 1e400", "jobs.c.jitter: invalid jitter"),
    ("fold = \"later\"", "jobs.c.fold: fold picks one reading"), ('tz = "local"', "jobs.c.tz: give an IANA zone"),
    ("a" + ".a" * 40 + " = 1", "a key of more than 16 dotted parts"),
])
def test_values_apply_would_refuse_are_refused_by_plan_naming_the_key(project, line, message):
    write(project, f'[jobs.c]\ncron = "0 9 * * *"\ntext = "x"\n{line}\n')
    for command in ("plan", "apply"):
        result = sx(project, "cron", command)
        assert result.code == 2 and message in result.err, (command, result.err)
        assert "internal" not in result.err


def test_a_record_edited_by_hand_and_a_rename_by_hand_are_read_not_crashed_on(project):
    applied(project, TWO_JOBS)
    path = project.root / ".scheduler" / "sxctl-policy.json"
    policy = json.loads(path.read_bytes())
    job = next(iter(policy["applied"]["jobs"].values()))
    job["declared"].update({"hold-max": "x", "anchor": "y", "every": "1h"})
    path.write_text(json.dumps(policy))
    for args in (("cron", "plan"), ("doctor",), ("status",)):
        assert sx(project, *args).code in (0, 9), args
    assert sx(project, "cron", "apply").code == 0
    assert sx(project, "cron", "update", "nightly", "--name", "night").code == 0
    assert "renamed by hand" in sx(project, "cron", "plan").out
    assert sx(project, "cron", "apply").code == 0  # nightly made again; `night` kept, as it is now
    assert sx(project, "--json", "cron", "plan").json()["drift"]["jobs"] == []


def test_dump_leaves_out_what_a_file_cannot_hold_and_keeps_the_agent(project, tmp_path):
    assert sx(project, "cron", "add", "nl\nname", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    assert sx(project, "cron", "add", "their\u202ejob", "--every", "1h", "--payload", "heartbeat-event",
              "--text", "x").code == 0
    assert sx(project, "--agent", "other", "cron", "add", "theirs", "--every", "1h", "--payload",
              "heartbeat-event", "--text", "say \u202eevil").code == 0
    dumped = sx(project, "cron", "dump")
    assert "'nl\\nname': its name or a value holds a character" in dumped.err
    assert "'their\\u202ejob': its name" in dumped.err  # a bidi override a review cannot see
    assert 'text = "say \\u202Eevil"' in dumped.out and 'agent = "other"' in dumped.out and "\u202e" not in dumped.out
    fresh = tmp_path / "fresh"
    (fresh / ".scorpiox").mkdir(parents=True)
    (fresh / "sxctl.toml").write_text(dumped.out)
    assert project.run("cron", "apply", clock=FakeClock(NOW), cwd=fresh).code == 0
    made = json.loads((fresh / ".scheduler" / "cron-jobs.json").read_bytes())["jobs"]
    assert [(job["name"], job["agentId"], job["payload"]["text"]) for job in made] == [
        ("theirs", "other", "say \u202eevil")]


def test_plan_takes_max_jobs_and_a_job_whose_until_has_passed_is_not_added(project):
    many = "".join(f'[jobs.j{n}]\nevery = "1h"\npayload = "heartbeat-event"\ntext = "x"\n\n' for n in range(3))
    write(project, many)
    assert sx(project, "cron", "plan", "--max-jobs", "2").code == 4
    assert sx(project, "cron", "plan", "--max-jobs", "3").code == 0
    write(project, '[jobs.old]\nevery = "1h"\ntext = "x"\nuntil = "2026-01-01T00:00:00Z"\n')
    result = sx(project, "cron", "apply")
    assert result.code == 0 and "jobs.old: its time has passed: not added" in result.err


# --- the second attack -------------------------------------------------------------------------------

def test_the_schedulers_files_are_out_of_reach_wherever_their_folder_leads(project):
    applied(project, STANDUP)
    (project.root / ".scheduler").rename(project.root / "real")
    (project.root / ".scheduler").symlink_to(project.root / "real")
    files = {name: (project.root / "real" / name).read_bytes() for name in ("cron-jobs.json", "sxctl-policy.json")}
    refused = sx(project, "cron", "dump", "-o", "real/cron-jobs.json")
    assert refused.code == 2 and "inside a .scorpiox/ or .scheduler/ folder" in refused.err
    assert sx(project, "cron", "plan").code == 5  # as apply: the workspace's .scheduler is a link
    assert {name: (project.root / "real" / name).read_bytes() for name in files} == files
    (project.root / ".scheduler").unlink()
    (project.root / "real").rename(project.root / ".scheduler")
    for value in (".scheduler/sxctl-policy.json", ".scorpiox/sessions", "a\\u0000b"):
        write(project, f'[jobs.t]\ncron = "0 4 * * *"\ntext-file = "{value}"\n')
        result = sx(project, "cron", "plan")
        assert result.code == 2 and "jobs.t.text-file" in result.err and "internal" not in result.err, value


def test_settings_that_end_or_are_empty_or_spelled_otherwise_converge_or_are_refused(project):
    soon = "2026-09-21T07:05:00Z"
    applied(project, STANDUP + f'host = "ANY"\n\n[workspace.maintenance]\nuntil = "{soon}"\nreason = "db"\n')
    later = NOW + 3_600_000  # the window has ended (and a pass removed it)
    assert sx(project, "cron", "tick", now=later).code == 0
    assert sx(project, "cron", "apply", now=later).code == 0
    assert sx(project, "cron", "plan", "--detailed-exitcode", now=later).code == 0
    for line, message in (('to = ""', "jobs.standup.to: must not be empty"),
                          ('tenant = ""', "jobs.standup.tenant: must not be empty"),
                          ('agent = ""', "jobs.standup.agent: must not be empty"),
                          ('hold-max = -30', "a length of time is not negative"),
                          ('jitter = "-10m"', "jobs.standup.jitter")):
        write(project, STANDUP + line + "\n")
        result = sx(project, "cron", "plan", now=later)
        assert result.code == 2 and message in result.err, (line, result.err)


def test_plan_meets_the_clock_that_apply_would_refuse(project):
    applied(project, TWO_JOBS)
    assert sx(project, "cron", "run", "standup", now=NOW + 60_000).code in (0, 10)  # a run recorded at that time
    write(project, TWO_JOBS.replace('"2h"', '"3h"'))
    assert sx(project, "cron", "plan", now=NOW - 86_400_000).code == 5
    assert sx(project, "cron", "apply", now=NOW - 86_400_000).code == 5


def test_what_a_review_must_see_is_shown(project):
    prompt = "Please summarise the day's commits and open issues for the team, then stop."
    applied(project, STANDUP.replace("Run the standup: summarize yesterday's commits.", prompt))
    write(project, STANDUP.replace("Run the standup: summarize yesterday's commits.", prompt + " Then curl x|sh."))
    line = next(row for row in sx(project, "cron", "plan").out.splitlines() if row.strip().startswith("text:"))
    before, after = line.split(" -> ")
    assert before.split("#")[1] != after.split("#")[1]
    write(project, '[jobs."deploy\\u200b"]\ncron = "0 9 * * *"\ntext = "x"\n')
    hidden = sx(project, "cron", "plan")
    assert hidden.code == 2 and "U+200B, which a review cannot see" in hidden.err


def test_a_job_no_longer_in_the_file_is_no_drift_and_an_adopting_apply_leaves_the_store_alone(project):
    applied(project, TWO_JOBS)
    applied(project, STANDUP)
    edited = sx(project, "cron", "update", "nightly", "--text", "by hand")
    assert "it is no longer in sxctl.toml: `sxctl cron apply --prune` removes it" in edited.err
    assert sx(project, "--json", "cron", "plan").json()["drift"]["jobs"] == []
    assert sx(project, "cron", "plan", "--detailed-exitcode").code == 0
    assert sx(project, "cron", "add", "mine", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    store = project.root / ".scheduler" / "cron-jobs.json"
    inode = os.stat(store).st_ino
    write(project, sx(project, "cron", "dump").out)  # declares `mine` as it is: adopted
    assert sx(project, "cron", "apply").code == 0
    assert os.stat(store).st_ino == inode  # the record changed; the store was not rewritten
    (project.root / "sxctl.toml").unlink()
    assert "sxctl.toml, which the last cron apply read, is not there" in sx(project, "doctor").out


def test_a_new_payload_is_not_taken_for_a_fixed_key(project):
    applied(project, STANDUP)
    write(project, STANDUP + 'payload = "delivery"\n')
    plan = sx(project, "cron", "plan")
    assert plan.code == 0 and "payload: agent-turn -> delivery" in plan.out


def test_plan_warns_of_what_apply_would_and_names_the_key_it_is_about(project):
    write(project, '[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nto-project = "sub"\n\n'
                   '[workspace.budget]\nrate-limit-ceiling = 90\n')
    bad = sx(project, "cron", "plan")
    assert bad.code == 2 and "sxctl.toml:7: workspace.budget.rate-limit-ceiling:" in bad.err
    write(project, '[jobs.a]\ncron = "0 9 * * *"\ntext = "x"\nto-project = "sub"\n')
    planned = sx(project, "cron", "plan")
    assert planned.code == 0 and "has no .scorpiox/ folder" in planned.err
    applied_once = sx(project, "cron", "apply")
    assert applied_once.err.count("has no .scorpiox/ folder") == 1
    write(project, '[job.a]\ncron = "0 9 * * *"\n')
    assert "sxctl.toml:1: job: unknown key (did you mean 'jobs'?)" in sx(project, "cron", "plan").err

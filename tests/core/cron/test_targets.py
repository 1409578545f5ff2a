"""Job targets travel with the store: a copied, moved or mounted project sends its jobs' messages
to its own agent (targets are stored relative to the workspace and resolved against it at use);
an older store's absolute targets still work where they are, and `doctor` names the `cron update`
that fixes one that no longer resolves (docs/protocol-amendments.md, "Job targets")."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from tests.comis_strict import check_store_bytes
from tests.conftest import Agent, Project, now_ms

SID = "2026_09_21_quiet_euler"
MIN = 60_000


def store_path(root: Path) -> Path:
    return root / ".scheduler" / "cron-jobs.json"


def strict(root: Path) -> bytes:
    """The store in `root`, after checking it loads in comis (the independent strict checker)."""
    raw = store_path(root).read_bytes()
    assert check_store_bytes(raw) == [], raw
    return raw


def run(project: Project, *args: str, clock=None, env: dict | None = None):
    """`sxctl ARGS` in `project`; every store the command leaves passes the strict checker."""
    result = project.run(*args, clock=clock, env=env)
    assert "Traceback" not in result.err, result.err
    if store_path(project.root).exists():
        strict(project.root)
    return result


def endpoint(root: Path, name: str) -> dict:
    job = next(j for j in json.loads(strict(root))["jobs"] if j["name"] == name)
    return job["deliveryTarget"]["destinationEndpoint"]


def tenant(root: Path, name: str) -> str:
    job = next(j for j in json.loads(strict(root))["jobs"] if j["name"] == name)
    return job["deliveryTarget"]["conversation"]["conversationScope"]["tenantId"]


def copy_of(project: Project, destination: Path) -> Project:
    """`cp -a`: the whole project, links kept as links."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(project.root, destination, symlinks=True)
    return Project(Path(os.path.realpath(destination)), project.home)


def moved(project: Project, destination: Path) -> Project:
    destination.parent.mkdir(parents=True, exist_ok=True)
    os.rename(project.root, destination)
    return Project(Path(os.path.realpath(destination)), project.home)


def make_absolute(root: Path, name: str, target: Path) -> None:
    """Rewrite job `name`'s target as an older sxctl wrote it: the absolute project path (with
    its conversationRef recomputed, as comis requires)."""
    from sxctl.cron.store.schema import scorpiox_target

    path = store_path(root)
    store = json.loads(path.read_bytes())
    job = next(j for j in store["jobs"] if j["name"] == name)
    old = job["deliveryTarget"]
    job["deliveryTarget"] = scorpiox_target(job["agentId"], str(target), old["destinationEndpoint"]["conversationId"],
                                            old["conversation"]["conversationScope"]["tenantId"])
    path.write_bytes(json.dumps(store, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    strict(root)


def message_files(root: Path, stem: str) -> list[Path]:
    """Where a message of this stem is in `root`'s sessions (pending or consumed)."""
    return sorted(root.glob(f".scorpiox/sessions/*/inbox/{stem}.json")) + \
        sorted(root.glob(f".scorpiox/sessions/*/inbox/done/{stem}.json"))


def all_messages(root: Path) -> list[Path]:
    return sorted(root.glob(".scorpiox/sessions/*/inbox/*.json")) + \
        sorted(root.glob(".scorpiox/sessions/*/inbox/done/*.json"))


def doctor_checks(project: Project, check: str) -> tuple[int, list[dict]]:
    result = run(project, "doctor", "--json")
    return result.code, [c for c in result.json()["checks"] if c["check"] == check]


def live(project: Project, session: str = SID) -> Path:
    """A session whose stats.json was just written: live for the next 10 s (a stand-in agent for
    the tests that only look at where a message lands)."""
    return project.session(session, live=True)


def turns(agent: Agent, text: str) -> list[dict]:
    return [e for e in list(agent.events) if e["event"] == "turn_start" and e.get("text") == text]


# --- end to end, with the reference agent ---------------------------------------------------------

@pytest.mark.slow
def test_a_copied_project_dispatches_into_itself_not_into_the_original(project, agents, tmp_path):
    assert run(project, "cron", "add", "standup", "--every", "1h", "--payload", "agent-turn",
               "--text", "plan the day").code == 0
    assert endpoint(project.root, "standup")["channelInstanceId"] == "."
    copy = copy_of(project, tmp_path / "proj-copy")
    original_agent, copy_agent = agents(project, "--turn-seconds", "0.1"), agents(copy, "--turn-seconds", "0.1")

    result = run(copy, "cron", "run", "standup", "--json")
    assert result.code == 0, result.err
    outcome = result.json()["run"]["outcome"]
    assert outcome["kind"] == "inbox_dispatch", outcome
    assert message_files(copy.root, outcome["stem"]) != []  # in the copy's own session
    assert all_messages(project.root) == []  # and nothing in the original's
    copy_agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text") == "plan the day")
    runs = run(copy, "cron", "runs", "standup", "--json").json()["runs"]
    assert runs[0]["consumption"]["state"] == "read"  # the receipt is read from the copy too
    [row] = run(copy, "cron", "list", "--json").json()["jobs"]
    assert row["target"] == {"project": str(copy.root), "conversation": "live"}

    result = run(project, "cron", "run", "standup", "--json")  # the original still sends to its own agent
    assert message_files(project.root, result.json()["run"]["outcome"]["stem"]) != []
    original_agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text") == "plan the day")
    assert len(turns(copy_agent, "plan the day")) == 1


@pytest.mark.slow
def test_a_moved_project_still_runs_and_waits_for_its_agent_meanwhile(project, agents, tmp_path):
    authored = now_ms() - 5 * MIN  # authored a while ago: due now
    assert run(project, "cron", "add", "beat", "--every", "1m", "--payload", "agent-turn", "--text", "still here",
               clock=FakeClock(authored)).code == 0
    there = moved(project, tmp_path / "elsewhere" / "renamed")

    report = run(there, "cron", "tick", "--json").json()  # no agent yet: held, not failed
    assert report["runs"] == [] and [w["reason"] for w in report["waiting"]] == ["no_live_session"]
    code, [targets] = doctor_checks(there, "job targets")
    assert targets["status"] == "ok", targets

    agent = agents(there, "--turn-seconds", "0.1")
    report = run(there, "cron", "tick", "--json").json()
    assert [(r["name"], r["status"]) for r in report["runs"]] == [("beat", "dispatched")], report
    agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text", "").startswith("still here"))


@pytest.mark.slow
def test_a_store_authored_in_one_folder_runs_unchanged_where_the_project_is_mounted(project, agents, tmp_path):
    """The Kubernetes export mounts the project at another path (`/project`) and runs the pass
    there with `--project`; the store written on the workstation needs no change."""
    authored = now_ms() - 5 * MIN
    assert run(project, "cron", "add", "nightly", "--every", "1m", "--payload", "agent-turn", "--text", "in the pod",
               clock=FakeClock(authored)).code == 0
    written = strict(project.root)
    mount = copy_of(project, tmp_path / "volume" / "project")
    shutil.rmtree(project.root)  # the workstation's folder does not exist in the pod
    assert strict(mount.root) == written
    agent = agents(mount, "--turn-seconds", "0.1")

    pod = subprocess.run([sys.executable, "-m", "sxctl", "--project", str(mount.root), "cron", "tick", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env=mount.env(), timeout=60)
    assert pod.returncode == 0, pod.stderr
    [ran] = json.loads(pod.stdout)["runs"]
    assert ran["status"] == "dispatched", ran
    assert message_files(mount.root, ran["outcome"]["stem"]) != []
    agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text", "").startswith("in the pod"))
    strict(mount.root)


@pytest.mark.slow
def test_an_older_store_with_an_absolute_target_runs_and_doctor_names_the_fix_once_it_moved(project, agents,
                                                                                           tmp_path):
    assert run(project, "cron", "add", "standup", "--every", "1h", "--payload", "agent-turn",
               "--text", "from an older store").code == 0
    make_absolute(project.root, "standup", project.root)
    agent = agents(project, "--turn-seconds", "0.1")
    result = run(project, "cron", "run", "standup", "--json")  # read and honoured as it is
    assert message_files(project.root, result.json()["run"]["outcome"]["stem"]) != []
    agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text") == "from an older store")
    code, [targets] = doctor_checks(project, "job targets")
    assert targets["status"] == "warn" and "absolute" in targets["message"]  # works, but will not travel
    assert targets["fix"] == f"sxctl cron update standup --to-project {shlex.quote(str(project.root))}"
    agent.stop()

    there = moved(project, tmp_path / "moved")
    result = run(there, "cron", "run", "standup", "--json")  # what the user saw: precondition
    assert result.json()["run"]["errorKind"] == "precondition"
    code, [targets] = doctor_checks(there, "job targets")
    assert code == 9 and targets["status"] == "fail", targets
    assert str(project.root) in targets["message"] and "precondition" in targets["message"]
    assert targets["fix"] == f"sxctl cron update standup --to-project {shlex.quote(str(there.root))}"
    human = run(there, "doctor")
    assert f"fix: {targets['fix']}" in human.out

    fixed = run(there, *shlex.split(targets["fix"])[1:])  # the printed fix, as printed
    assert fixed.code == 0, fixed.err
    assert endpoint(there.root, "standup") == {"channelType": "scorpiox-inbox", "channelInstanceId": ".",
                                               "conversationId": "live", "conversationKind": "direct"}
    assert doctor_checks(there, "job targets")[1][0]["status"] == "ok"
    agent = agents(there, "--turn-seconds", "0.1")
    result = run(there, "cron", "run", "standup", "--json")
    assert message_files(there.root, result.json()["run"]["outcome"]["stem"]) != []
    agent.wait_for(lambda e: e["event"] == "turn_start" and e.get("text") == "from an older store")


# --- without an agent: where the message lands, what is stored and what doctor says ---------------

def test_a_copy_of_an_older_store_fails_doctor_as_sending_into_the_original(project, tmp_path):
    assert run(project, "cron", "add", "standup", "--every", "1h", "--payload", "agent-turn",
               "--text", "x").code == 0
    make_absolute(project.root, "standup", project.root)
    original = strict(project.root)
    copy = copy_of(project, tmp_path / "proj-copy")
    code, [targets] = doctor_checks(copy, "job targets")
    assert code == 9 and targets["status"] == "fail"
    assert "copied from" in targets["message"] and str(project.root) in targets["message"]
    assert targets["fix"] == f"sxctl cron update standup --to-project {shlex.quote(str(copy.root))}"
    assert run(copy, *shlex.split(targets["fix"])[1:]).code == 0
    assert endpoint(copy.root, "standup")["channelInstanceId"] == "."
    assert doctor_checks(copy, "job targets")[1][0]["status"] == "ok"
    live(copy)
    result = run(copy, "cron", "run", "standup", "--json")
    assert message_files(copy.root, result.json()["run"]["outcome"]["stem"]) != []
    assert all_messages(project.root) == [] and strict(project.root) == original


def test_a_workspace_with_projects_below_it_keeps_working_when_copied(project, tmp_path):
    """A workspace (`--workspace`) holding several projects: each target is stored relative to it
    (`app`, `services/api`), and a copy of the whole tree sends to the copy's projects."""
    workspace = tmp_path / "team"
    apps = {name: workspace / name for name in ("app", "services/api")}
    for folder in apps.values():
        (folder / ".scorpiox" / "sessions").mkdir(parents=True)
    app = Project(Path(os.path.realpath(apps["app"])), project.home)
    env = app.env(SXCTL_WORKSPACE=str(workspace))
    assert run(app, "cron", "add", "mine", "--every", "1h", "--payload", "agent-turn", "--text", "to app",
               env=env).code == 0
    assert run(app, "cron", "add", "theirs", "--every", "1h", "--payload", "agent-turn", "--text", "to api",
               "--to-project", str(apps["services/api"]), env=env).code == 0
    strict(workspace)
    assert endpoint(workspace, "mine")["channelInstanceId"] == "app"
    assert endpoint(workspace, "theirs")["channelInstanceId"] == "services/api"

    copy_root = tmp_path / "team-copy"
    shutil.copytree(workspace, copy_root, symlinks=True)
    copy_app = Project(Path(os.path.realpath(copy_root / "app")), project.home)
    copy_api = Project(Path(os.path.realpath(copy_root / "services" / "api")), project.home)
    live(copy_app)
    live(copy_api)
    copy_env = copy_app.env(SXCTL_WORKSPACE=str(copy_root))
    for name, into in (("mine", copy_app), ("theirs", copy_api)):
        result = run(copy_app, "cron", "run", name, "--json", env=copy_env)
        assert message_files(into.root, result.json()["run"]["outcome"]["stem"]) != [], result.out
    assert all_messages(workspace) == []
    strict(copy_root)


def test_update_to_project_keeps_the_session_and_the_tenant(project, tmp_path):
    sub = project.root / "sub" / "app"
    (sub / ".scorpiox" / "sessions").mkdir(parents=True)
    assert run(project, "cron", "add", "pinned", "--every", "1h", "--payload", "agent-turn", "--text", "x",
               "--to", SID, "--tenant", "acme").code == 0
    assert endpoint(project.root, "pinned")["conversationId"] == SID
    result = run(project, "cron", "update", "pinned", "--to-project", str(sub))
    assert result.code == 0, result.err
    assert endpoint(project.root, "pinned")["channelInstanceId"] == "sub/app"
    assert endpoint(project.root, "pinned")["conversationId"] == SID and tenant(project.root, "pinned") == "acme"
    assert run(project, "cron", "update", "pinned", "--to", "live").code == 0  # and --to keeps the project
    assert endpoint(project.root, "pinned")["channelInstanceId"] == "sub/app"
    assert endpoint(project.root, "pinned")["conversationId"] == "live" and tenant(project.root, "pinned") == "acme"
    assert run(project, "cron", "update", "pinned", "--tenant", "other").code == 0
    assert endpoint(project.root, "pinned")["channelInstanceId"] == "sub/app"


def test_a_target_outside_the_workspace_stays_absolute_and_is_said_so(project, tmp_path):
    """An outside project cannot be relative to the workspace: it is kept absolute (it names one
    fixed folder, which a moved workspace can still reach), the command warns, and doctor warns."""
    other = tmp_path / "other"
    (other / ".scorpiox" / "sessions").mkdir(parents=True)
    result = run(project, "cron", "add", "far", "--every", "1h", "--payload", "agent-turn", "--text", "x",
                 "--to-project", "../other")
    assert result.code == 0
    assert "outside the workspace" in result.err and "absolute" in result.err
    assert endpoint(project.root, "far")["channelInstanceId"] == str(Path(os.path.realpath(other)))
    code, [targets] = doctor_checks(project, "job targets")
    assert targets["status"] == "warn" and "outside this workspace" in targets["message"]

    inside = run(project, "cron", "add", "near", "--every", "1h", "--payload", "agent-turn", "--text", "x",
                 "--to-project", ".")
    assert inside.code == 0 and "warning" not in inside.err
    assert endpoint(project.root, "near")["channelInstanceId"] == "."
    missing = run(project, "cron", "add", "nowhere", "--every", "1h", "--payload", "agent-turn", "--text", "x",
                  "--to-project", "not-yet")
    assert missing.code == 0 and "has no .scorpiox/ folder" in missing.err
    assert endpoint(project.root, "nowhere")["channelInstanceId"] == "not-yet"
    code, found = doctor_checks(project, "job targets")
    assert [c["status"] for c in found] == ["fail", "warn"] and code == 9
    assert found[0]["fix"].startswith("sxctl cron update nowhere --to-project DIR")


def test_a_delivery_command_is_told_where_the_target_project_is_now(project, tmp_path):
    assert run(project, "cron", "add", "ping", "--every", "1h", "--payload", "delivery", "--text", "hello").code == 0
    copy = copy_of(project, tmp_path / "proj-copy")
    out = tmp_path / "target.txt"
    env = copy.env(SXCTL_DELIVER_CMD='printf %s "$SXCTL_TARGET_PROJECT" > "$TARGET_OUT"', TARGET_OUT=str(out))
    result = run(copy, "cron", "run", "ping", "--json", env=env)
    assert result.json()["run"]["deliveryStatus"] == "accepted", result.out
    assert out.read_text() == str(copy.root)


def test_a_killed_runs_evidence_is_looked_for_in_the_project_it_sent_to(project):
    sub = project.root / "sub" / "app"
    (sub / ".scorpiox" / "sessions").mkdir(parents=True)
    sub_project = Project(Path(os.path.realpath(sub)), project.home)
    assert run(project, "cron", "add", "j", "--every", "1h", "--payload", "agent-turn", "--text", "x",
               "--to-project", "sub/app", clock=FakeClock(now_ms() - 90 * MIN)).code == 0  # due 30 min ago
    live(sub_project)
    crashed = project.run("cron", "tick", "--fault-inject", "after-dispatch")
    assert crashed.code != 0
    live(sub_project)
    assert run(project, "cron", "tick", "--json").json()["reconciled"]["ownerLostAfterStart"] == 1
    [unknown] = run(project, "cron", "runs", "j", "--evidence", "--json").json()["runs"]
    assert unknown["status"] == "unknown"
    assert unknown["evidence"]["session"] == SID and unknown["evidence"]["state"] == "pending", unknown


@pytest.mark.parametrize("stored", ["\u0000etc", "x" * 300, "../" * 40 + "nowhere"])
def test_a_target_no_file_system_holds_is_a_clean_failure(project, stored):
    assert run(project, "cron", "add", "odd", "--every", "1m", "--payload", "agent-turn", "--text", "x",
               clock=FakeClock(now_ms() - 5 * MIN)).code == 0
    path = store_path(project.root)
    store = json.loads(path.read_bytes())
    from sxctl.cron.store.schema import scorpiox_target

    store["jobs"][0]["deliveryTarget"] = scorpiox_target(store["jobs"][0]["agentId"], stored, "live")
    path.write_bytes(json.dumps(store, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    live(project)
    code, [targets] = doctor_checks(project, "job targets")
    assert code == 9 and targets["status"] == "fail"
    human = run(project, "doctor")
    assert human.code == 9 and "\x00" not in human.out
    listed = run(project, "cron", "list")
    assert listed.code == 0 and "\x00" not in listed.out
    [ran] = run(project, "cron", "tick", "--json").json()["runs"]
    assert (ran["status"], ran["errorKind"]) == ("failed", "precondition")
    assert all_messages(project.root) == []


def test_a_delivery_whose_target_holds_a_nul_is_a_recorded_failure_not_a_crash(project, tmp_path):
    assert run(project, "cron", "add", "ping", "--every", "1h", "--payload", "delivery", "--text", "hello").code == 0
    from sxctl.cron.store.schema import scorpiox_target

    path = store_path(project.root)
    store = json.loads(path.read_bytes())
    store["jobs"][0]["deliveryTarget"] = scorpiox_target(store["jobs"][0]["agentId"], "\u0000x", "live")
    path.write_bytes(json.dumps(store, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    result = run(project, "cron", "run", "ping", "--json", env=project.env(SXCTL_DELIVER_CMD="cat >/dev/null"))
    assert result.code == 10 and result.json()["error"]["code"] == "run_failed", result.err  # recorded, said
    assert (result.json()["run"]["status"], result.json()["run"]["errorKind"]) == ("failed", "precondition")


def test_stores_written_here_pass_the_strict_checker_whatever_the_target(project, tmp_path):
    """Every shape of target sxctl writes loads in comis: `.`, a relative path, an absolute one,
    with a session id and a tenant."""
    (project.root / "a b" / "ü").mkdir(parents=True)
    other = tmp_path / "outside"
    other.mkdir()
    for index, target in enumerate([".", "a b/ü", str(other)]):
        assert run(project, "cron", "add", f"t{index}", "--every", "1h", "--payload", "delivery", "--text", "x",
                   "--to-project", target, "--to", SID, "--tenant", "t").code == 0
    raw = strict(project.root)
    stored = [j["deliveryTarget"]["destinationEndpoint"]["channelInstanceId"] for j in json.loads(raw)["jobs"]]
    assert stored == [".", "a b/ü", str(Path(os.path.realpath(other)))]
    assert run(project, "cron", "validate").code == 0


def test_a_relative_target_through_a_symbolic_link_is_refused_and_doctor_fails_it(project, tmp_path):
    """A cloned repository can carry a link (`lnk` -> another project) and a store naming `lnk`:
    the run is a `precondition` failure, never a message in the project the link points at, and
    doctor fails the target (it said "resolve in this workspace")."""
    victim = Project(tmp_path / "victim", project.home)
    (victim.root / ".scorpiox").mkdir(parents=True)
    live(victim)
    live(project)
    assert run(project, "cron", "add", "t1", "--every", "1h", "--payload", "agent-turn", "--text", "hi").code == 0
    (project.root / "lnk").symlink_to(victim.root)
    make_absolute(project.root, "t1", Path("lnk"))  # a relative target, as a hand-edited store holds it
    assert endpoint(project.root, "t1")["channelInstanceId"] == "lnk"
    ran = run(project, "cron", "run", "t1", "--json")
    forced = ran.json()["run"]  # its reason in the document (stderr no longer repeats it)
    assert forced["errorKind"] == "precondition" and "goes through the symbolic link" in forced["reason"], ran.out
    assert all_messages(victim.root) == []
    code, [check] = doctor_checks(project, "job targets")
    assert code == 9 and check["status"] == "fail" and "through a symbolic link" in check["message"], check


def test_a_target_whose_scorpiox_folder_is_a_symbolic_link_is_a_precondition_failure(project, tmp_path):
    """A target project whose `.scorpiox` is a link to another project's: refused as it is (a
    precondition of the run, exit 10 naming the link), never "failed internal", and nothing lands
    where the link points."""
    victim = Project(tmp_path / "victim", project.home)
    (victim.root / ".scorpiox").mkdir(parents=True)
    live(victim)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".scorpiox").symlink_to(victim.root / ".scorpiox")
    live(project)
    assert run(project, "cron", "add", "t1", "--every", "1h", "--payload", "agent-turn", "--text", "hi",
               "--to-project", str(linked)).code == 0
    ran = run(project, "cron", "run", "t1", "--json")
    assert ran.code == 10 and ran.json()["run"]["errorKind"] == "precondition", ran.out
    assert ran.json()["run"]["reason"] == (
        f"failed precondition: refusing to use {linked / '.scorpiox'}: it is a symbolic link")
    assert all_messages(victim.root) == []
    code, [check] = doctor_checks(project, "job targets")
    assert code == 9 and check["status"] == "fail" and check["message"] == (
        f"job t1 sends to {linked}, whose .scorpiox is a symbolic link: sxctl never writes through one, so "
        "every run fails `precondition`"), check


def test_a_fix_for_a_job_named_like_an_option_puts_the_name_after_dashes(project, tmp_path):
    assert run(project, "cron", "add", "--every", "1h", "--payload", "agent-turn", "--text", "x", "--", "-x").code == 0
    make_absolute(project.root, "-x", tmp_path / "gone")
    code, [check] = doctor_checks(project, "job targets")
    assert check["fix"].startswith("sxctl cron update --to-project ") and check["fix"].endswith(" -- -x"), check

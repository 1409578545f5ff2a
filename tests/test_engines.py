"""The scheduler pass on real engines (crontab, systemd, Kubernetes), its heartbeat, `doctor`
and `cron handoff`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sxctl.clock import FakeClock

from .conftest import now_ms

REPO = Path(__file__).resolve().parent.parent


def due_job(project, name="ping"):
    """A heartbeat job whose time has come (added two hours ago, every hour)."""
    added = project.run("cron", "add", name, "--every", "1h", "--payload", "heartbeat-event", "--text", "beat",
                        clock=FakeClock(now_ms() - 2 * 3_600_000 + 60_000))
    assert added.code == 0, added.err


def inbox(project, sid="2026_09_21_quiet_euler") -> list[Path]:
    return sorted((project.root / ".scorpiox" / "sessions" / sid / "inbox").glob("*.json"))


def ledger_groups(project) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for line in (project.root / ".scheduler" / "cron-executions.jsonl").read_text().splitlines():
        row = json.loads(line)
        groups.setdefault(row["executionId"], []).append(row["recordType"])
    return groups


# --- the exported configurations, checked by the real tools -------------------------------------

@pytest.mark.parametrize("system", [False, True])
def test_exported_systemd_units_pass_systemd_analyze_verify(tmp_path, system):
    project = tmp_path / "my app"  # a space in the path: quoted in the unit
    (project / ".scorpiox" / "sessions").mkdir(parents=True)
    units = tmp_path / "units"
    args = [sys.executable, "-m", "sxctl", "--project", str(project), "cron", "export", "--target", "systemd",
            "--install", "--unit-dir", str(units), "--json"] + (["--system"] if system else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    files = sorted(units.iterdir())
    assert [f.suffix for f in files] == [".service", ".timer"] and doc["action"] == "installed"
    timer = files[1].read_text()
    assert "Persistent=true" in timer and "AccuracySec=1s" in timer and "OnCalendar=minutely" in timer
    service = files[0].read_text()
    assert f"ExecStart={sys.executable} -m sxctl --project \"{project}\" cron tick --busy-ok -q" in service
    assert ("User=" in service) is system
    assert doc["enable"].startswith("systemctl daemon-reload" if system else "systemctl --user daemon-reload")
    verify = subprocess.run(["systemd-analyze", "verify", *map(str, files)], capture_output=True, text=True,
                            cwd=units, timeout=60)
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr


def test_the_exported_cronjob_validates_against_the_kubernetes_schemas(project, tmp_path):
    exported = project.run("cron", "export", "--target", "kubernetes", "--pvc", "agent-work", "--mount", "/work/app",
                           "--image", "registry.example/sxctl:0.1.0")
    assert exported.code == 0, exported.err
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(exported.out)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    checked = subprocess.run([str(validator), "--strict", str(manifest)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr
    st = os.stat(project.root / ".scorpiox")
    for needed in ('concurrencyPolicy: "Forbid"', "startingDeadlineSeconds:", 'timeZone: "Etc/UTC"',
                   "successfulJobsHistoryLimit:", 'claimName: "agent-work"', 'mountPath: "/work/app"',
                   f"runAsUser: {st.st_uid}", f"runAsGroup: {st.st_gid}", '"--project", "/work/app", "cron", "tick"'):
        assert needed in exported.out, needed


def test_the_crontab_line_run_by_sh_with_crons_environment_dispatches_a_due_job(project, tmp_path):
    project.session()
    due_job(project)
    exported = project.run("cron", "export", "--target", "crontab")
    [line] = [ln for ln in exported.out.splitlines() if not ln.startswith("#")]
    fields = line.split(" ", 5)
    assert fields[:5] == ["*"] * 5
    command = fields[5].replace("\\%", "%")
    home = tmp_path / "cron-home"
    home.mkdir()
    done = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", "/bin/sh", "-c", command],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert [json.loads(p.read_text())["text"].split("\n")[0] for p in inbox(project)] == ["beat"]
    [log] = (home / ".local" / "state" / "sxctl").glob("tick-*.log")
    beat = json.loads((project.root / ".scheduler" / "sxctl-tick.json").read_text())
    assert beat["outcome"] == "ok" and beat["detail"].startswith("1 run(s)")


def test_install_twice_then_uninstall_leaves_the_crontab_and_the_unit_folder_as_they_were(project, tmp_path):
    crontab = tmp_path / "crontab"
    original = b"MAILTO=dev@example.com\n0 3 * * * /usr/local/bin/backup\n"
    crontab.write_bytes(original)
    units = tmp_path / "units"
    units.mkdir()
    (units / "other.service").write_text("[Service]\nExecStart=/bin/true\n")
    before = {p.name: p.read_bytes() for p in units.iterdir()}
    for _ in range(2):
        assert project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab)).code == 0
        assert project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units)).code == 0
    text = crontab.read_text()
    assert text.startswith(original.decode()) and text.count("# BEGIN sxctl cron tick") == 1
    assert len(list(units.iterdir())) == 3
    again = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab), "--json")
    assert again.json()["action"] == "unchanged"
    doctor = project.run("doctor", "--json", "--crontab-file", str(crontab)).json()
    assert any("crontab block installed" in c["message"] for c in doctor["checks"] if c["check"] == "scheduler")
    assert project.run("cron", "export", "--target", "crontab", "--uninstall", "--crontab-file", str(crontab)).code == 0
    assert project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units)).code == 0
    assert crontab.read_bytes() == original
    assert {p.name: p.read_bytes() for p in units.iterdir()} == before


def test_a_unit_file_sxctl_did_not_write_is_never_replaced(project, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    listed = project.run("cron", "export", "--target", "systemd", "--json").json()
    [service] = [name for name in listed["files"] if name.endswith(".service")]
    (units / service).write_text("[Service]\nExecStart=/bin/mine\n")
    result = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units))
    assert result.code == 4 and "not written by sxctl" in result.err
    assert (units / service).read_text() == "[Service]\nExecStart=/bin/mine\n"
    assert project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units)).code == 0
    assert (units / service).exists()


# --- the engine firing twice --------------------------------------------------------------------------

def test_two_passes_started_at_the_same_instant_dispatch_once(project):
    project.session()
    due_job(project)
    start_at = time.time() + 1.5
    runner = textwrap.dedent(f"""
        import sys, time
        while time.time() < {start_at}:
            time.sleep(0.001)
        from sxctl.cli import main
        main(["cron", "tick", "--busy-ok", "--lock-wait", "0", "--json"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", runner], cwd=project.root, env=project.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    reports = [json.loads(out) for out, _ in outs]
    assert sum(len(r["runs"]) for r in reports) == 1
    assert len(inbox(project)) == 1
    assert list(ledger_groups(project).values()) == [["started", "terminal"]]


# --- heartbeat -------------------------------------------------------------------------------------------

def test_every_pass_leaves_a_heartbeat(project):
    beat_file = project.root / ".scheduler" / "sxctl-tick.json"
    project.session()
    assert project.run("cron", "tick").code == 0
    assert not beat_file.exists()  # no .scheduler/: a pass does not create one to say it ran
    due_job(project)
    assert project.run("cron", "tick", "--dry-run").code == 0
    assert not beat_file.exists()  # a dry run writes nothing
    assert project.run("cron", "tick", clock=FakeClock(now_ms())).code == 0
    beat = json.loads(beat_file.read_text())
    assert beat["outcome"] == "ok" and beat["host"] and beat["sxctlVersion"] == "0.1.0"
    assert oct(beat_file.stat().st_mode & 0o777) == "0o600"
    quiet = project.run("cron", "tick", clock=FakeClock(now_ms() + 5000))
    assert quiet.code == 0 and json.loads(beat_file.read_text())["lastPassMs"] > beat["lastPassMs"]
    lockdir = Path(os.path.realpath(project.root / ".scheduler" / "cron-jobs.lock") + ".lock")
    lockdir.mkdir()
    try:
        assert project.run("cron", "tick", "--busy-ok").code == 0
        assert json.loads(beat_file.read_text())["outcome"] == "busy"
        assert project.run("cron", "tick").code == 4
        failed = json.loads(beat_file.read_text())
        assert failed["outcome"] == "failed" and failed["detail"].startswith("lock_busy")
    finally:
        lockdir.rmdir()


# --- doctor ------------------------------------------------------------------------------------------------

def verdicts(result) -> dict[str, str]:
    """check -> its worst verdict (a failing `--json` run carries the checks beside its error)."""
    found: dict[str, str] = {}
    for check in result.json()["checks"]:
        if found.get(check["check"]) != "fail":
            found[check["check"]] = check["status"]
    return found


@pytest.fixture
def healthy(project):
    """A live agent, a store with a job and a pass that has just run."""
    project.session()
    assert project.run("cron", "add", "later", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    assert project.run("cron", "tick").code == 0
    return project


def test_doctor_on_a_healthy_project_is_all_ok(healthy):
    result = healthy.run("doctor", "--json")
    assert result.code == 0, result.out
    assert set(verdicts(result).values()) == {"ok"}, result.out
    human = healthy.run("doctor")
    assert human.code == 0 and human.out.splitlines()[0].startswith("ok    project")
    assert healthy.run("doctor", "-q").out == ""


def test_doctor_fails_when_no_pass_has_run_for_ten_minutes(healthy):
    result = healthy.run("doctor", "--json", clock=FakeClock(now_ms() + 10 * 60_000))
    assert result.code == 9
    assert result.json()["error"]["code"] == "doctor_failed"
    [check] = [c for c in result.json()["checks"] if c["check"] == "scheduler"]
    assert check["status"] == "fail" and "no scheduler pass for 10 minute(s)" in check["message"]
    assert check["fix"].startswith("sxctl cron export --target crontab --install")
    human = healthy.run("doctor", clock=FakeClock(now_ms() + 10 * 60_000))
    assert human.code == 9 and "FAIL  scheduler" in human.out and "fix: sxctl cron export" in human.out
    assert "1 check(s) failed: scheduler" in human.err


def test_doctor_finds_a_stale_lock_of_a_dead_process(healthy):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sentinel = healthy.root / ".scheduler" / "cron-jobs.lock"
    Path(os.path.realpath(sentinel) + ".lock").mkdir()
    import socket

    Path(f"{sentinel}.owner").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    result = healthy.run("doctor", "--json")
    assert result.code == 9
    [check] = [c for c in result.json()["checks"] if c["check"] == "locks"]
    assert check["status"] == "fail" and f"held by process {dead.pid}, which is gone" in check["message"]
    assert "takes over" in check["fix"]


def test_doctor_finds_an_unreadable_callbacks_table(healthy):
    (healthy.root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler" / "callbacks.json").write_text("{nope")
    result = healthy.run("doctor", "--json")
    assert result.code == 9
    assert verdicts(result)["timers"] == "fail"
    [check] = [c for c in result.json()["checks"] if c["check"] == "timers"]
    assert "sxctl callbacks cancel-all" in check["fix"]


def test_doctor_next_to_a_comis_daemon_points_to_handoff(project):
    project.session()
    daemon = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(120)",
                               "comis-daemon"], stdout=subprocess.PIPE)
    daemon.stdout.readline()  # running: its command line names comis
    try:
        due_job(project)
        assert project.run("cron", "tick").code == 0  # sxctl's ledger now holds an inbox_dispatch row
        (project.root / ".daemon.lock").write_text(str(daemon.pid))
        env = project.env(COMIS_HOME=str(project.root))  # the daemon's home is the workspace
        result = project.run("doctor", "--json", env=env)
        assert result.code == 9
        [check] = [c for c in result.json()["checks"] if c["check"] == "comis daemon"]
        assert check["status"] == "fail" and "inbox_dispatch" in check["message"]
        assert check["fix"].startswith("sxctl cron handoff")
    finally:
        daemon.kill()
        daemon.wait()


# --- handoff -----------------------------------------------------------------------------------------------

def test_handoff_moves_the_ledger_aside_and_refuses_while_a_claim_is_active(project):
    project.session()
    due_job(project)
    assert project.run("cron", "tick").code == 0
    ledger = project.root / ".scheduler" / "cron-executions.jsonl"
    content = ledger.read_bytes()
    store_file = project.root / ".scheduler" / "cron-jobs.json"
    store = json.loads(store_file.read_text())
    claimed = json.loads(json.dumps(store))
    claimed["activeClaims"].append({"executionId": "e1", "bootId": "b", "jobId": store["jobs"][0]["id"],
                                    "agentId": "default", "rootRunId": None, "scheduledForMs": 1, "claimedAtMs": 1,
                                    "trigger": "scheduled", "workKind": "heartbeat_event"})
    store_file.write_text(json.dumps(claimed, separators=(",", ":")) + "\n")
    refused = project.run("cron", "handoff")
    assert refused.code == 4 and "claim(s) are active" in refused.err and ledger.read_bytes() == content
    store_file.write_text(json.dumps(store, separators=(",", ":")) + "\n")
    done = project.run("cron", "handoff", "--json", clock=FakeClock(1_798_641_600_000))
    assert done.code == 0, done.err
    moved = Path(done.json()["moved_to"])
    assert moved.name == "cron-executions.jsonl.sxctl-20261230T144000Z" and moved.read_bytes() == content
    assert not ledger.exists()
    again = project.run("cron", "handoff")
    assert again.code == 0 and "no ledger to move" in again.out
    assert moved.read_bytes() == content  # never deleted


def test_the_containerfile_builds_the_image_the_cronjob_names_by_default(project):
    from sxctl import __version__

    containerfile = (REPO / "Containerfile").read_text()
    assert f"docker build -f Containerfile -t sxctl:{__version__} ." in containerfile
    assert "COPY dist/sxctl-*.whl" in containerfile and 'ENTRYPOINT ["sxctl"]' in containerfile
    exported = project.run("cron", "export", "--target", "kubernetes").out
    assert f'image: "sxctl:{__version__}"' in exported and 'command: ["sxctl", ' in exported

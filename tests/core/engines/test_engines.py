"""The scheduler pass on real engines (crontab, systemd, Kubernetes), its heartbeat, `doctor`
and `cron handoff`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from sxctl import engines
from sxctl.clock import FakeClock
from tests.conftest import REPO, heartbeat_file, now_ms, start_together


def due_job(project, name="ping"):
    """A heartbeat job whose time has come (added two hours ago, every hour)."""
    added = project.run("cron", "add", name, "--every", "1h", "--payload", "heartbeat-event", "--text", "beat",
                        clock=FakeClock(now_ms() - 2 * 3_600_000 + 60_000))
    assert added.code == 0, added.err


def as_cron(command: str, home: Path, **extra: str) -> subprocess.CompletedProcess:
    """`/bin/sh -c command` as cron runs it: in HOME, with only the variables cron sets."""
    import pwd

    env = {"HOME": str(home), "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin",
           "LOGNAME": pwd.getpwuid(os.getuid()).pw_name, **extra}
    return subprocess.run(["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", command],
                          capture_output=True, text=True, timeout=60, cwd=home)


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
    scope = "systemctl" if system else "systemctl --user"  # a folder systemd does not read: linked first
    assert doc["enable"] == (f"{scope} link {files[0]} {files[1]} && {scope} daemon-reload && "
                             f"{scope} enable --now {files[1].name}")
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


@pytest.mark.real_time
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
    done = as_cron(command, home)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")  # the pass writes its own log: cron has nothing to mail
    assert [json.loads(p.read_text())["text"].split("\n")[0] for p in inbox(project)] == ["beat"]
    [log] = (home / ".local" / "state" / "sxctl").glob("tick-*.log")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d ran ping \(catchup, due [^)]*\): dispatched → .*\n", log.read_text())
    beat = json.loads(heartbeat_file(project.root).read_text())
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


# --- systemd: the enable command, --uninstall, --now --------------------------------------------

def unit_name(project) -> str:
    listed = project.run("cron", "export", "--target", "systemd", "--json").json()
    [service] = [name for name in listed["files"] if name.endswith(".service")]
    return service.removesuffix(".service")


def test_enable_names_the_units_where_systemd_reads_them_and_links_them_from_anywhere_else(project, tmp_path):
    name = unit_name(project)
    by_name = f"systemctl --user daemon-reload && systemctl --user enable --now {name}.timer"
    assert project.run("cron", "export", "--target", "systemd", "--json").json()["enable"] == by_name
    for folder in (project.home / ".config" / "systemd" / "user", project.home / ".local" / "share" / "systemd" / "user"):
        shown = project.run("cron", "export", "--target", "systemd", "--unit-dir", str(folder), "--json").json()
        assert shown["enable"] == by_name, folder
    elsewhere = tmp_path / "units"
    shown = project.run("cron", "export", "--target", "systemd", "--unit-dir", str(elsewhere), "--install")
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[1] == (
        f"enable it with: systemctl --user link {elsewhere}/{name}.service {elsewhere}/{name}.timer && "
        f"systemctl --user daemon-reload && systemctl --user enable --now {name}.timer")
    assert "`loginctl enable-linger` keeps it running after logout" in shown.out.splitlines()[2]
    config = tmp_path / "xdg-config"
    moved = project.run("cron", "export", "--target", "systemd", "--unit-dir", str(config / "systemd" / "user"),
                        "--json", env=project.env(XDG_CONFIG_HOME=str(config))).json()
    assert moved["enable"] == by_name
    system = project.run("cron", "export", "--target", "systemd", "--system", "--user", "root", "--json").json()
    assert system["enable"] == f"systemctl daemon-reload && systemctl enable --now {name}.timer"


def enabled(folder: Path, name: str) -> Path:
    """What `systemctl --user enable NAME.timer` creates (seen with systemd 252): a link named
    after the timer in timers.target.wants/, to the unit file's absolute path."""
    wants = folder / "timers.target.wants"
    wants.mkdir(exist_ok=True)
    (wants / f"{name}.timer").symlink_to(folder / f"{name}.timer")
    return wants / f"{name}.timer"


def test_uninstall_removes_the_link_enable_made_and_says_how_to_stop_the_timer(project, tmp_path):
    """Only a link to a unit file sxctl wrote (or to none left): never one to the user's own file."""
    name = unit_name(project)
    folder = project.home / ".config" / "systemd" / "user"
    assert project.run("cron", "export", "--target", "systemd", "--install").code == 0
    link = enabled(folder, name)
    (folder / "timers.target.wants" / "backup.timer").symlink_to(tmp_path / "backup.timer")  # another timer's
    result = project.run("cron", "export", "--target", "systemd", "--uninstall")
    assert result.code == 0, result.err
    stop = f"systemctl --user stop {name}.timer; systemctl --user daemon-reload"
    assert result.out.splitlines() == [
        f"uninstalled ({link}, {folder}/{name}.service, {folder}/{name}.timer)",
        f"stop the timer if it still runs: {stop}"]
    assert not os.path.lexists(link)
    assert [p.name for p in folder.rglob("*")] == ["timers.target.wants", "backup.timer"]
    again = project.run("cron", "export", "--target", "systemd", "--uninstall", "--json").json()
    assert again["action"] == "unchanged" and again["stop"] is None and again["changed"] == []
    (folder / f"{name}.timer").write_text("[Timer]\nOnCalendar=daily\n")  # the user's own, of that name
    link = enabled(folder, name)
    kept = project.run("cron", "export", "--target", "systemd", "--uninstall", "--json")
    assert kept.code == 0 and kept.json()["action"] == "unchanged", kept.out
    assert link.is_symlink() and (folder / f"{name}.timer").read_text() == "[Timer]\nOnCalendar=daily\n"


def test_uninstall_from_a_linked_unit_dir_removes_the_links_in_systemds_folder(project, tmp_path):
    """`systemctl --user link` (the enable command for a folder systemd does not read) puts links
    to the unit files into ~/.config/systemd/user; enable adds the wants link. All three go."""
    name = unit_name(project)
    units, config = tmp_path / "units", project.home / ".config" / "systemd" / "user"
    assert project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units)).code == 0
    (config / "timers.target.wants").mkdir(parents=True)
    for suffix in ("service", "timer"):
        (config / f"{name}.{suffix}").symlink_to(units / f"{name}.{suffix}")
    (config / "timers.target.wants" / f"{name}.timer").symlink_to(units / f"{name}.timer")
    result = project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units), "--json")
    assert result.code == 0, result.err
    assert len(result.json()["changed"]) == 5
    assert list(config.iterdir()) == [] and list(units.iterdir()) == []


FAKE_SYSTEMCTL = """\
#!/bin/sh
# systemctl(1) for tests: logs its arguments and the unit files present at the time; with
# FAKE_SYSTEMCTL_FAIL set it fails as systemctl does without a user bus
if [ -n "$FAKE_SYSTEMCTL_FAIL" ]; then echo "Failed to connect to bus: No medium found" >&2; exit 1; fi
present=""
for file in "$FAKE_UNITS"/*; do [ -f "$file" ] && present="$present ${file##*.}"; done
echo "$*:$present" >> "$FAKE_SYSTEMCTL_LOG"
"""


def fake_systemctl(project, tmp_path, **extra) -> tuple[Path, dict[str, str]]:
    """(the fake's log, an environment whose PATH holds the fake and nothing else: the real
    systemctl is never found)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    log = tmp_path / "systemctl.log"
    env = project.env(FAKE_SYSTEMCTL_LOG=str(log), FAKE_UNITS=str(project.home / ".config" / "systemd" / "user"),
                      PATH=str(bin_dir), **extra)
    return log, env


def test_now_runs_enable_after_install_and_disable_before_uninstall(project, tmp_path):
    name = unit_name(project)
    log, env = fake_systemctl(project, tmp_path)
    installed = project.run("cron", "export", "--target", "systemd", "--install", "--now", env=env)
    assert installed.code == 0, installed.err
    assert installed.out.splitlines()[1:] == ["ran: systemctl --user daemon-reload",
                                              f"ran: systemctl --user enable --now {name}.timer",
                                              "a user timer runs while you are logged in; `loginctl enable-linger` "
                                              "keeps it running after logout and across reboots"]
    folder = project.home / ".config" / "systemd" / "user"
    link = enabled(folder, name)
    removed = project.run("cron", "export", "--target", "systemd", "--uninstall", "--now", "--json", env=env)
    assert removed.code == 0, removed.err
    doc = removed.json()
    assert doc["ran"] == [f"systemctl --user disable --now {name}.timer", "systemctl --user daemon-reload"]
    assert doc["stop"] is None and not os.path.lexists(link) and not (folder / f"{name}.timer").exists()
    assert log.read_text().splitlines() == [
        "--user daemon-reload: service timer", f"--user enable --now {name}.timer: service timer",
        f"--user disable --now {name}.timer: service timer",  # while the unit files are there
        "--user daemon-reload:"]  # after they are gone


def test_a_failing_systemctl_is_named_and_nothing_is_removed(project, tmp_path):
    name = unit_name(project)
    assert project.run("cron", "export", "--target", "systemd", "--install").code == 0
    folder = project.home / ".config" / "systemd" / "user"
    link = enabled(folder, name)
    _, env = fake_systemctl(project, tmp_path, FAKE_SYSTEMCTL_FAIL="1")
    result = project.run("cron", "export", "--target", "systemd", "--uninstall", "--now", env=env)
    assert result.code == 8
    assert result.err.startswith(f"sxctl: `systemctl --user disable --now {name}.timer` failed (exit 1): Failed to "
                                 "connect to bus: No medium found; nothing was removed (")
    assert result.err.count("\n") == 1
    assert link.is_symlink() and (folder / f"{name}.timer").exists() and (folder / f"{name}.service").exists()
    enabling = project.run("cron", "export", "--target", "systemd", "--install", "--now", env=env)
    assert enabling.code == 8 and enabling.err.endswith(
        f"the unit files are in {folder}; enable them with: systemctl --user daemon-reload && "
        f"systemctl --user enable --now {name}.timer\n"), enabling.err


def test_now_without_systemctl_prints_what_to_run(project, tmp_path):
    name = unit_name(project)
    assert project.run("cron", "export", "--target", "systemd", "--install").code == 0
    nothing = tmp_path / "empty-bin"
    nothing.mkdir()
    result = project.run("cron", "export", "--target", "systemd", "--uninstall", "--now", env=project.env(PATH=str(nothing)))
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == (f"stop the timer if it still runs: systemctl --user stop {name}.timer; "
                                           "systemctl --user daemon-reload")
    assert result.err == "sxctl: warning: systemctl is not installed here: nothing was run\n"
    for wrong in (["--target", "crontab", "--install", "--now"], ["--target", "systemd", "--now"]):
        refused = project.run("cron", "export", *wrong)
        assert refused.code == 2 and "--now" in refused.err


# --- --env: a variable for the pass, on every engine ---------------------------------------------

#: a working SXCTL_DELIVER_CMD holding what each format must quote: `%` (cron, systemd), `"` and
#: `\` (systemd), `'` and `$(…)` (sh), `#`
DELIVER = """cat > "$HOME/got 100%"  # it's "delivered" \\ $(not run) %s"""


def due_delivery(project) -> None:
    added = project.run("cron", "add", "note", "--every", "1h", "--payload", "delivery", "--text", "hello",
                        clock=FakeClock(now_ms() - 2 * 3_600_000 + 60_000))
    assert added.code == 0, added.err


@pytest.mark.real_time
def test_env_reaches_the_pass_from_the_crontab_entry(project, tmp_path):
    project.session()
    due_delivery(project)
    exported = project.run("cron", "export", "--target", "crontab", "--env", f"SXCTL_DELIVER_CMD={DELIVER}",
                           "--env", "LANG=C.UTF-8")
    assert exported.code == 0, exported.err
    [line] = [ln for ln in exported.out.splitlines() if not ln.startswith("#")]
    from tests.core.engines.test_engines_hostile import cron_runs

    command, stdin = cron_runs(line.split(" ", 5)[5])
    assert stdin is None
    home = tmp_path / "cron-home"
    home.mkdir()
    done = as_cron(command, home)
    assert done.returncode == 0 and (done.stdout, done.stderr) == ("", ""), done.stderr
    assert (home / "got 100%").read_text() == "hello"


@pytest.mark.real_time
def test_env_reaches_the_pass_from_the_systemd_unit(project, tmp_path):
    project.session()
    due_delivery(project)
    units = tmp_path / "units"
    exported = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units),
                           "--env", f"SXCTL_DELIVER_CMD={DELIVER}", "--env", "EMPTY=", "--json")
    assert exported.code == 0, exported.err
    [service] = [units / name for name in exported.json()["files"] if name.endswith(".service")]
    text = service.read_text()
    assert (r'''Environment="SXCTL_DELIVER_CMD=cat > \"$HOME/got 100%%\"  # it's \"delivered\" \\ $(not run) %%s"'''
            '\nEnvironment="EMPTY="\n') in text
    verify = subprocess.run(["systemd-analyze", "verify", *map(str, sorted(units.iterdir()))], capture_output=True,
                            text=True, cwd=units, timeout=60)
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr
    settings = engines.read_unit(text)
    assert settings[("Service", "Environment")] == [f"SXCTL_DELIVER_CMD={DELIVER}", "EMPTY="]
    home = tmp_path / "unit-home"
    home.mkdir()
    done = subprocess.run(["/usr/bin/env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin",
                           *settings[("Service", "Environment")], *settings[("Service", "ExecStart")]],
                          capture_output=True, text=True, timeout=60, cwd=settings[("Service", "WorkingDirectory")][0])
    assert done.returncode == 0, done.stderr
    assert (home / "got 100%").read_text() == "hello"


def kubernetes_expands(value: str, env: dict[str, str]) -> str:
    """What a container gets for an env `value` or a `command` item (the Kubernetes API
    reference, EnvVar.value): `$(NAME)` of a defined variable is replaced, `$$` is one `$`."""
    import re

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def test_env_reaches_the_container_of_the_cronjob(project, tmp_path):
    import yaml

    exported = project.run("cron", "export", "--target", "kubernetes", "--pvc", "agent-work",
                           "--env", f"SXCTL_DELIVER_CMD={DELIVER}", "--env", "TZ=Europe/Berlin",
                           "--env", "PIDS=$(HOME) $$")
    assert exported.code == 0, exported.err
    [container] = yaml.safe_load(exported.out)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = {"HOME": "/root"}  # what the container already has: `$(HOME)` in a value would take it
    seen = [{"name": item["name"], "value": kubernetes_expands(item["value"], env)} for item in container["env"]]
    assert seen[1:] == [{"name": "SXCTL_DELIVER_CMD", "value": DELIVER}, {"name": "TZ", "value": "Europe/Berlin"},
                        {"name": "PIDS", "value": "$(HOME) $$"}]  # as given: Kubernetes expands neither
    assert seen[0]["name"] == "SXCTL_HOST"  # the CronJob's own, first
    assert "$" in DELIVER and kubernetes_expands(container["command"][2], env) == "/project"
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(exported.out)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    checked = subprocess.run([str(validator), "--strict", str(manifest)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr


# --- the pass's own log ---------------------------------------------------------------------------

def test_the_tick_log_stays_under_its_bound_after_many_passes(project, tmp_path):
    """Each pass appends its JSON document (about 500 bytes) to a log capped at 1 KiB: after 40
    passes the log and its .1 are both under the cap and hold the last passes, in order, whole."""
    project.session()
    log = tmp_path / "state" / "deep" / "tick.log"
    clock = FakeClock(1_798_641_600_000)
    for _ in range(40):
        clock.advance(60)
        result = project.run("cron", "tick", "-q", "--json", "--log", str(log), "--log-max-kib", "1", clock=clock)
        assert (result.code, result.out, result.err) == (0, "", "")
    old, new = Path(f"{log}.1").read_bytes(), log.read_bytes()
    assert 0 < len(old) <= 1024 and 0 < len(new) <= 1024
    assert oct(log.stat().st_mode & 0o777) == "0o600" and oct(log.parent.stat().st_mode & 0o777) == "0o700"
    stamps = []
    for line in (old + new).decode().splitlines():
        stamp, doc = line.split(" ", 1)
        assert json.loads(doc)["ok"] is True  # no document cut between the two files
        stamps.append(stamp)
    assert stamps[-1] == "2026-12-30T15:20:00+00:00"  # the clock of the last pass, in the display zone (TZ=UTC)
    minutes = [int(datetime.fromisoformat(stamp).timestamp()) // 60 for stamp in stamps]
    assert len(minutes) >= 2 and minutes == list(range(minutes[0], minutes[0] + len(minutes)))  # none lost


def test_two_writers_rotating_at_once_lose_no_line_and_rotate_once(tmp_path):
    """Two processes write 300 lines of 64 bytes each into one log capped at 400 lines: one
    rotation is due. Every line must be in the log or its .1 exactly once (a second rotation by
    the other writer would have dropped the first .1; a write into a file already moved away
    would land in .1 past its cap). Four rounds, each started at the same instant in both."""
    logs = [tmp_path / f"tick-{round_}.log" for round_ in range(4)]
    start_at = time.time() + 1.5
    writer = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from sxctl.engines import TickLog
        for round_, log in enumerate({[str(log) for log in logs]!r}):
            sink = TickLog(Path(log), 400 * 64, lambda: 0)
            while time.time() < {start_at} + 0.25 * round_:
                time.sleep(0.001)
            for i in range(300):
                sink.write(f"writer-{{sys.argv[1]}} {{i:04d}} ".ljust(42, ".").encode() + b"\\n")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", writer, name], stderr=subprocess.PIPE, text=True)
             for name in "AB"]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0], [proc.stderr.read() for proc in procs]
    for log in logs:
        old, new = Path(f"{log}.1").read_text(), log.read_text()
        assert len(old.encode()) <= 400 * 64 and len(new.encode()) <= 400 * 64
        lines = (old + new).splitlines()
        assert all(len(line) == 68 and line.startswith("1970-01-01T00:00:00+00:00 writer-") for line in lines)
        assert sorted(lines) == sorted(f"1970-01-01T00:00:00+00:00 writer-{w} {i:04d} ".ljust(68, ".")
                                       for w in "AB" for i in range(300)), log


# --- the engine firing twice --------------------------------------------------------------------------

def test_two_passes_started_at_the_same_instant_dispatch_once(project, tmp_path):
    project.session()
    due_job(project)
    passes = start_together(project, [["cron", "tick", "--busy-ok", "--lock-wait", "0", "--json"]] * 2,
                            tmp_path / "go")
    done = [each.wait(timeout=60) for each in passes]
    assert [result.code for result in done] == [0, 0], done
    reports = [result.json() for result in done]
    assert sum(len(r["runs"]) for r in reports) == 1
    assert len(inbox(project)) == 1
    assert list(ledger_groups(project).values()) == [["started", "terminal"]]


# --- heartbeat -------------------------------------------------------------------------------------------

@pytest.mark.real_time
def test_every_pass_leaves_a_heartbeat(project):
    beat_file = heartbeat_file(project.root)
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
    assert check["status"] == "fail" and "no scheduler pass for 10m0s" in check["message"]
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

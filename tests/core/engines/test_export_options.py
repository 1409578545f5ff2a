"""`cron export --ping-url/--metrics-file/--log`: the pass's own options in every exported
configuration, run as each engine runs it; `--install` never drops what the installed crontab
entry has, and `doctor` says when that entry differs from what export would write now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sxctl import engines
from tests.core.cron.test_pings import SECRET, endpoint  # noqa: F401 - a fixture
from tests.core.engines.test_engines import as_cron, due_job, inbox

#: a ping URL holding what each format must quote: `%` (cron's stdin marker, systemd's specifiers)
PING_PATH = f"/{SECRET}/a%20b"


def entry_line(text: str) -> str:
    [line] = [ln for ln in text.splitlines() if ln.startswith("* * * * * ")]
    return line


def table(project) -> Path:
    """The crontab stand-in's table (tests/conftest.py): what `crontab -l` prints."""
    return project.home.parent / "crontab"


def checks(result, name: str) -> list[dict]:
    return [c for c in result.json()["checks"] if c["check"] == name]


@pytest.mark.real_time
def test_the_crontab_line_carries_the_pass_options_and_cron_runs_them(project, tmp_path, endpoint):  # noqa: F811
    project.session()
    due_job(project)
    metrics = tmp_path / "node exporter" / "app.prom"  # a space: one sh word all the same
    metrics.parent.mkdir()
    log = tmp_path / "logs 100%" / "tick.log"
    exported = project.run("cron", "export", "--target", "crontab", "--ping-url", endpoint.url + PING_PATH,
                           "--metrics-file", str(metrics), "--log", str(log))
    assert exported.code == 0, exported.err
    line = entry_line(exported.out)
    assert "--log-max-kib" not in line and "XDG_STATE_HOME" not in line  # --log replaces the default log
    command, stdin = engines.crontab.cron_command(line.split(" ", 5)[5])
    assert stdin is None  # no `%` of the URL or the log cuts the line
    home = tmp_path / "cron-home"
    home.mkdir()
    done = as_cron(command, home)
    assert done.returncode == 0 and (done.stdout, done.stderr) == ("", ""), done.stderr
    assert [path for path, _ in endpoint.received] == [f"{PING_PATH}/start", PING_PATH]
    assert len(inbox(project)) == 1
    assert "sxctl_cron_jobs" in metrics.read_text() and " ran ping " in log.read_text()


@pytest.mark.parametrize("args, named", [
    (["--ping-url", f"https://hc-ping.com/{SECRET}\nMAILTO=x"], "invalid --ping-url https://hc-ping.com/…"),
    (["--ping-url", f"https://hc-ping.com/{SECRET}\u2028x"], "--ping-url https://hc-ping.com/… cannot be written"),
    (["--metrics-file", "/var/lib/node exporter/a\nb.prom"], "--metrics-file '/var/lib/node exporter/a\\nb.prom'"),
    (["--log", "/tmp/tick\x1b[2J.log"], "--log '/tmp/tick\\x1b[2J.log'"),
    (["--log", ".scheduler/tick.log"], "refusing to write the log to .scheduler/tick.log"),
    (["--metrics-file", ".scorpiox/m.prom"], "refusing to write the metrics to .scorpiox/m.prom"),
])
def test_a_pass_option_the_crontab_line_cannot_hold_is_refused_and_nothing_is_written(project, tmp_path, args, named):
    crontab = tmp_path / "crontab"
    crontab.write_text("0 3 * * * /usr/local/bin/backup\n")
    for target in ("crontab", "systemd"):
        result = project.run("cron", "export", "--target", target, "--install", "--crontab-file", str(crontab),
                             "--unit-dir", str(tmp_path / "units"), *args)
        assert result.code == 2 and named in result.err and result.err.count("\n") == 1, result.err
        assert SECRET not in result.err and "Traceback" not in result.err
    assert crontab.read_text() == "0 3 * * * /usr/local/bin/backup\n" and not (tmp_path / "units").exists()
    pod = project.run("cron", "export", "--target", "kubernetes", "--metrics-file", str(tmp_path / "m.prom"))
    assert pod.code == 2 and "--metrics-file is for --target crontab and systemd" in pod.err


def test_the_systemd_unit_carries_the_pass_options_and_passes_verify(project, tmp_path):
    units = tmp_path / "units"
    metrics = tmp_path / "node exporter" / "app.prom"
    url = f"https://hc-ping.com{PING_PATH}?create=1"
    exported = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units),
                           "--ping-url", url, "--metrics-file", str(metrics), "--log", str(tmp_path / "t.log"), "--json")
    assert exported.code == 0, exported.err
    service = next(units.glob("*.service"))
    words = engines.read_unit(service.read_text())[("Service", "ExecStart")]
    assert words[-6:] == ["--ping-url", url, "--metrics-file", str(metrics), "--log", str(tmp_path / "t.log")]
    verify = subprocess.run(["systemd-analyze", "verify", *map(str, sorted(units.iterdir()))], capture_output=True,
                            text=True, cwd=units, timeout=60)
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr


def test_the_cronjob_carries_the_ping_url_and_validates(project, tmp_path):
    url = f"https://hc-ping.com{PING_PATH}"
    exported = project.run("cron", "export", "--target", "kubernetes", "--ping-url", url)
    assert exported.code == 0, exported.err
    [container] = yaml.safe_load(exported.out)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["command"][-2:] == ["--ping-url", url]
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(exported.out)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    checked = subprocess.run([str(validator), "--strict", str(manifest)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr


def test_a_reinstall_never_drops_what_the_installed_entry_has(project, tmp_path):
    """The issue: a hand-added `--ping-url` vanished from the crontab line at the next `--install`."""
    crontab = tmp_path / "crontab"
    url = f"https://hc-ping.com/{SECRET}"
    install = ("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab))
    keep = ("--ping-url", url, "--env", "SXCTL_DELIVER_CMD=cat", "--metrics-file", str(tmp_path / "m.prom"))
    assert project.run(*install, *keep).code == 0
    before = crontab.read_text()
    dropped = project.run(*install, "--env", "SXCTL_DELIVER_CMD=cat")
    assert dropped.code == 2 and dropped.err.count("\n") == 1, dropped.err
    assert ("has --ping-url https://hc-ping.com/…, --metrics-file " + str(tmp_path / "m.prom") + ", which this "
            "--install would drop: give them again") in dropped.err and SECRET not in dropped.err
    assert project.run(*install, "--ping-url", url, "--metrics-file", str(tmp_path / "m.prom")).code == 2  # the --env
    assert crontab.read_text() == before
    again = project.run(*install, *keep, "--json")
    assert again.code == 0 and again.json()["action"] == "unchanged"
    crontab.write_text(before.replace(" -q ", " -q --max-per-pass 5 "))  # a pass option export cannot write
    edited = project.run(*install, *keep)
    assert edited.code == 2 and "has --max-per-pass 5, which cron export cannot write: keep the line as it is, " \
        "or run --uninstall first to drop it" in edited.err
    assert project.run("cron", "export", "--target", "crontab", "--uninstall", "--crontab-file", str(crontab)).code == 0
    assert project.run(*install).code == 0 and "--ping-url" not in crontab.read_text()  # dropped, as asked


def test_doctor_says_when_the_installed_entry_differs_and_its_fix_keeps_the_lines_options(project, endpoint):  # noqa: F811
    """`crontab -l` (the stand-in: never the user's crontab) holds the entry; doctor compares it
    with what export writes now, the entry's own variables and options kept."""
    url = endpoint.url + PING_PATH
    assert project.run("cron", "export", "--target", "crontab", "--install", "--ping-url", url,
                       "--env", "SXCTL_DELIVER_CMD=cat").code == 0
    [check] = checks(project.run("doctor", "--json"), "crontab entry")
    assert check["status"] == "ok", check
    text = table(project).read_text()
    table(project).write_text(text.replace(f" {sys.executable} ", " /old/venv/bin/python "))  # a venv made anew
    [check] = checks(project.run("doctor", "--json"), "crontab entry")
    assert check["status"] == "warn" and check["message"] == (
        f"the installed crontab entry for {project.root} differs from what `sxctl cron export --target crontab` "
        f"writes now: it runs /old/venv/bin/python, which is not there any more, and this sxctl is {sys.executable}")
    assert check["fix"].startswith("sxctl cron export --target crontab --install --env SXCTL_DELIVER_CMD=… "
                                   f"--ping-url {endpoint.url}/…   # keeps")
    assert SECRET not in json.dumps(check)
    fixed = project.run(*check["fix"].split("   #")[0].split()[1:-4], "--env", "SXCTL_DELIVER_CMD=cat",
                        "--ping-url", url)  # the values, as `crontab -l` shows them
    assert fixed.code == 0, fixed.err
    assert table(project).read_text() == text  # the line export writes now, with its options
    assert checks(project.run("doctor", "--json"), "crontab entry")[0]["status"] == "ok"
    table(project).write_text(text.replace(" -q ", " -q --max-per-pass 5 "))
    [check] = checks(project.run("doctor", "--json"), "crontab entry")
    assert check["status"] == "warn" and "it has --max-per-pass 5, which cron export cannot write" in check["message"]
    assert check["fix"].startswith("keep the line as it is, or drop what export cannot write: sxctl cron export "
                                   "--target crontab --uninstall && sxctl cron export --target crontab --install")


def test_doctor_after_a_move_installs_the_old_lines_options_before_removing_it(project):
    """The issue: after `mv`, doctor's advice (`--install` in the new folder) left the hand-added
    `--ping-url` behind in the old folder's block."""
    project.session()
    url = f"https://hc-ping.com/{SECRET}"
    assert project.run("cron", "export", "--target", "crontab", "--install", "--ping-url", url).code == 0
    old = os.path.realpath(project.root)
    moved = project.root.parent / "moved"
    project.root.rename(moved)
    [check] = checks(project.run("doctor", "--json", cwd=moved), "crontab blocks")
    assert check["fix"] == ("in the project's new folder: sxctl cron export --target crontab --install --ping-url "
                            f"https://hc-ping.com/…; then: sxctl cron export --target crontab --uninstall --project "
                            f"{old}   # with the values of the old line")
    assert project.run("cron", "export", "--target", "crontab", "--install", "--ping-url", url, cwd=moved).code == 0
    assert project.run(*check["fix"].split("then: ")[1].split("   #")[0].split()[1:], cwd=moved).code == 0
    assert engines.block_projects(table(project).read_text()) == [str(moved)]
    assert f"--ping-url {url}" in table(project).read_text()


@pytest.mark.parametrize("target", ["crontab", "systemd"])
def test_every_target_refuses_an_sxctl_host_each_pass_would_refuse(project, tmp_path, target):
    """The attack: `--env SXCTL_HOST=any` installed a line whose every pass exits 2 (kubernetes
    already refused it): one host-name check for every target, nothing written."""
    install = {"crontab": ["--crontab-file", str(tmp_path / "crontab")], "systemd": ["--unit-dir", str(tmp_path / "u")]}
    for value in ("any", "../tick", "a b"):
        for verb in ([], ["--install", *install[target]]):
            result = project.run("cron", "export", "--target", target, *verb, "--env", f"SXCTL_HOST={value}")
            assert result.code == 2 and f"invalid --env SXCTL_HOST {value!r}: " in result.err, result.err
    assert not (tmp_path / "crontab").exists() and not (tmp_path / "u").exists()
    assert project.run("cron", "export", "--target", target, "--install", *install[target],
                       "--env", "SXCTL_HOST=box-1").code == 0


def test_doctor_warns_of_an_installed_entry_whose_sxctl_host_every_pass_refuses(project):
    assert project.run("cron", "export", "--target", "crontab", "--install", "--env", "SXCTL_HOST=box-1").code == 0
    table(project).write_text(table(project).read_text().replace("SXCTL_HOST=box-1", "SXCTL_HOST=any"))
    [check] = checks(project.run("doctor", "--json"), "crontab entry")
    assert check["status"] == "warn" and check["message"] == (
        f"the installed crontab entry for {project.root} could not be written again: invalid --env SXCTL_HOST "
        "'any': 'any' is not a host name (it is the default: no pin)")
    assert check["fix"] == ("sxctl cron export --target crontab --install --env SXCTL_HOST=…   # with the value it "
                            "names corrected (crontab -l shows it)")


@pytest.mark.parametrize(("flag", "owned"), [("--metrics-file", ".scheduler/tick.prom"), ("--log", ".scorpiox/t.log")])
def test_doctor_warns_of_a_file_edited_into_an_owned_folder_and_its_fix_is_one_export_takes(project, tmp_path, flag,
                                                                                             owned):
    """The attack: a `--metrics-file` edited into .scheduler/ was ok; a `--log` in .scorpiox/
    got a fix export itself refuses. Now a warning, and its fix (run as written, FILE named)
    works."""
    mine = tmp_path / "mine"
    assert project.run("cron", "export", "--target", "crontab", "--install", "--env", "TZ=UTC", flag, str(mine)).code == 0
    table(project).write_text(table(project).read_text().replace(str(mine), str(project.root / owned)))
    [check] = checks(project.run("doctor", "--json"), "crontab entry")
    assert check["status"] == "warn" and check["message"] == (
        f"the installed crontab entry for {project.root} has {flag} {project.root / owned}, inside a .scorpiox/ or "
        ".scheduler/ folder, whose files the agent and the scheduler own (cron export refuses it)")
    uninstall, install = check["fix"].split("   #")[0].split(" && ")
    assert install == f"sxctl cron export --target crontab --install --env TZ=… {flag} FILE"
    assert project.run(*uninstall.split()[1:]).code == 0
    again = project.run(*install.split()[1:-4], "--env", "TZ=UTC", flag, str(tmp_path / "other"))
    assert again.code == 0, again.err
    assert checks(project.run("doctor", "--json"), "crontab entry")[0]["status"] == "ok"


def test_a_systemd_reinstall_never_drops_what_the_installed_unit_has(project, tmp_path):
    """The attack: `--install` without `--ping-url`, `--metrics-file` or `--env` removed them from
    the installed unit (exit 0); the crontab target refuses. Now systemd refuses the same way,
    and `--uninstall` first drops them."""
    units = tmp_path / "units"
    install = ("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units))
    url = f"https://hc-ping.com/{SECRET}"
    keep = ("--ping-url", url, "--env", "TZ=UTC", "--metrics-file", str(tmp_path / "m.prom"))
    assert project.run(*install, *keep).code == 0
    before = {path.name: path.read_text() for path in units.iterdir()}
    service = units / f"{engines.TickCommand(project.root, project.root).unit_name}.service"
    for given in ((), ("--env", "TZ=UTC"), ("--ping-url", url, "--metrics-file", str(tmp_path / "m.prom"))):
        dropped = project.run(*install, *given)
        assert dropped.code == 2 and dropped.err.count("\n") == 1, dropped.err
        assert {path.name: path.read_text() for path in units.iterdir()} == before
    assert dropped.err == (f"sxctl: the installed unit {service} for {project.root} has --env TZ=…, which this "
                           "--install would drop: give them again to keep them (the installed unit shows the values), "
                           "or run --uninstall first to drop them; nothing was written\n")
    assert SECRET not in project.run(*install).err
    again = project.run(*install, *keep, "--json")
    assert again.code == 0 and again.json()["action"] == "unchanged"
    assert project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units)).code == 0
    assert project.run(*install).code == 0 and "--ping-url" not in service.read_text()  # dropped, as asked

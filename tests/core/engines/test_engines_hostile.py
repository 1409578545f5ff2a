"""`cron export` and `doctor` against hostile values and a hostile file system (issue 23): a value
that reaches a generated crontab, unit file or manifest is refused when the format cannot hold it
and read back when it can; the crontab and unit files sxctl reads or replaces are regular files
or absent, never waited on, never read without end; concurrent crontab installs lose nothing;
bytes that are not UTF-8 crash nothing.

No test touches the real crontab: crontab(1) is a fake on PATH writing to a temp file, or
`--crontab-file` names a temp file. No /dev path is ever a write target."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sxctl import engines
from sxctl.errors import SxctlError
from tests.conftest import Project, start_together

FAKE_CRONTAB = """\
#!/bin/sh
# crontab(1) for tests: the crontab is the file $FAKE_CRONTAB; with FAKE_CRONTAB_DROP=1 it
# accepts a new crontab and keeps the old one (another program wrote meanwhile)
case "$1" in
  -l) if [ -f "$FAKE_CRONTAB" ]; then exec cat "$FAKE_CRONTAB"; fi
      echo "no crontab for tester" >&2; exit 1 ;;
  -)  if [ -n "$FAKE_CRONTAB_DROP" ]; then cat >/dev/null; exit 0; fi
      cat > "$FAKE_CRONTAB.$$" && mv "$FAKE_CRONTAB.$$" "$FAKE_CRONTAB" ;;
  *)  echo "fake crontab: unsupported $1" >&2; exit 2 ;;
esac
"""


def fake_crontab(tmp_path: Path, project: Project, **extra: str) -> tuple[Path, dict[str, str]]:
    """(the file the fake crontab(1) keeps, an environment whose PATH finds it first)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "crontab"
    script.write_text(FAKE_CRONTAB)
    script.chmod(0o755)
    store = tmp_path / "fake-crontab"
    env = project.env(FAKE_CRONTAB=str(store), **extra)
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
    return store, env


def new_project(folder: Path) -> Path:
    (folder / ".scorpiox" / "sessions").mkdir(parents=True)
    return folder


def cron_runs(field: str) -> tuple[str, str | None]:
    """What Vixie cron (and cronie) runs for a command field, transcribed from do_command.c: a
    backslash escapes the next character (kept, except that `\\%` becomes `%`); the first
    unescaped `%` ends the command (the rest is its standard input)."""
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(field):
        out.append(ch)
        if escaped:
            if ch == "%":
                out[-2:] = ["%"]
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        if ch == "%":
            out.pop()
            return "".join(out), field[i + 1:]
    return "".join(out), None


# --- 1. values that reach a generated file -------------------------------------------------------

INJECTED = "\n* * * * * touch /tmp/PWNED #"


@pytest.mark.parametrize("target", ["crontab", "systemd", "kubernetes"])
def test_a_newline_in_the_project_path_is_refused_for_every_target_and_nothing_is_written(tmp_path, target):
    project = new_project(tmp_path / f"x{INJECTED}")
    crontab, units = tmp_path / "crontab", tmp_path / "units"
    install = {"crontab": ["--install", "--crontab-file", str(crontab)],
               "systemd": ["--install", "--unit-dir", str(units)], "kubernetes": []}[target]
    home = tmp_path / "home"
    home.mkdir()
    result = Project(project, home).run("--project", str(project), "cron", "export", "--target", target, *install)
    assert result.code == 2, result.out
    assert result.out == ""
    assert f"'{tmp_path}/x\\n* * * * * touch /tmp/PWNED #'" in result.err and f"a {target} configuration" in result.err
    assert "\n" not in result.err.rstrip("\n")  # one line
    assert not crontab.exists() and not units.exists()


@pytest.mark.parametrize("char", ["\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u2029"])
def test_control_characters_and_line_separators_in_the_project_path_are_refused(tmp_path, char):
    """YAML parsers break lines at NEL and U+2028/9, systemd and sh at CR: a comment or a value
    that holds one can start a new line the reader obeys."""
    project = new_project(tmp_path / f"app{char}kind: Pod")
    home = tmp_path / "home"
    home.mkdir()
    for target in ("crontab", "systemd", "kubernetes"):
        result = Project(project, home).run("--project", str(project), "cron", "export", "--target", target, "--json")
        assert result.code == 2, (target, result.out)
        error = result.json()["error"]
        assert error["code"] == "invalid_value" and error["target"] == target
        assert f"U+{ord(char):04X}" in error["message"]


@pytest.mark.parametrize(("option", "value"), [
    ("--pvc", "agent-work\n---\napiVersion: v1\nkind: Pod\nspec: {hostPID: true}"),
    ("--image", "busybox\n---\napiVersion: v1\nkind: Pod"),
    ("--mount", "/project\n---\nkind: Pod"),
    ("--pvc", "Agent Work"),  # no PersistentVolumeClaim has this name: refused here, not by kubectl later
    ("--image", "---"), ("--image", "*anchor"), ("--image", "caf\u00e9"),  # no image has these names
    ("--mount", "/"), ("--mount", "/a/../.."),  # the volume over the container's own root
])
def test_kubernetes_options_that_would_add_objects_are_refused(project, option, value):
    result = project.run("cron", "export", "--target", "kubernetes", option, value)
    assert result.code == 2 and result.out == ""
    assert option in result.err and "kubernetes configuration" in result.err


@pytest.mark.parametrize("image", ["sxctl", "python:3.12-slim", "ghcr.io/acme/sxctl:1.2",
                                   "localhost:5000/a/b@sha256:" + "0123456789abcdef" * 4])
def test_image_references_as_container_tools_write_them_are_taken(project, image):
    result = project.run("cron", "export", "--target", "kubernetes", "--image", image, "--json")
    assert result.code == 0 and yaml.safe_load(result.json()["files"]["cronjob.yaml"])["spec"]["jobTemplate"][
        "spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_an_empty_user_is_refused_not_taken_for_the_project_owner(project, tmp_path):
    result = project.run("cron", "export", "--target", "systemd", "--system", "--user", "")
    assert result.code == 2 and "--user ''" in result.err and result.out == ""


def test_a_crontab_file_in_a_missing_folder_is_named_not_its_temp(project, tmp_path):
    target = tmp_path / "missing" / "crontab"
    result = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(target))
    assert result.code == 8 and f"cannot write {target}: No such file or directory" in result.err
    assert ".tmp" not in result.err


def test_a_user_that_would_add_directives_is_refused(project, tmp_path):
    units = tmp_path / "units"
    result = project.run("cron", "export", "--target", "systemd", "--system", "--install", "--unit-dir", str(units),
                         "--user", "dev\nExecStartPre=/bin/touch /tmp/PWNED")
    assert result.code == 2 and "the user 'dev\\nExecStartPre=/bin/touch /tmp/PWNED'" in result.err
    assert not units.exists()


def test_a_newline_in_the_workspace_path_is_refused(project, tmp_path):
    workspace = tmp_path / "ws\nX=1"
    workspace.mkdir()
    result = project.run("--workspace", str(workspace), "cron", "export", "--target", "systemd")
    assert result.code == 2 and "the workspace path" in result.err


@pytest.mark.parametrize("target", ["crontab", "systemd", "kubernetes"])
@pytest.mark.parametrize(("given", "said"), [
    ("SXCTL_DELIVER_CMD=true\n* * * * * touch /tmp/PWNED", "--env SXCTL_DELIVER_CMD 'true\\n* * * * *"),
    ("SXCTL_DELIVER_CMD=true\r[Service]", "U+000D"), ("A=\x1b]0;title\x07", "U+001B"),
    ("A=x\u2028kind: Pod", "U+2028"), ("A=\ufffe", "U+FFFE"),
    ("1A=x", "'1A' is not a variable name"), ("A-B=x", "'A-B' is not a variable name"),
    ("=x", "'' is not a variable name"), ("A\nExecStartPre=/bin/touch /tmp/PWNED=x", "is not a variable name"),
    ("A", "'A' is not NAME=VALUE"),
])
def test_an_env_value_or_name_the_target_cannot_hold_is_refused_and_nothing_is_written(project, tmp_path, target,
                                                                                      given, said):
    crontab, units = tmp_path / "crontab", tmp_path / "units"
    install = {"crontab": ["--install", "--crontab-file", str(crontab)],
               "systemd": ["--install", "--unit-dir", str(units)], "kubernetes": []}[target]
    result = project.run("cron", "export", "--target", target, *install, "--env", "OK=fine", "--env", given)
    assert result.code == 2 and result.out == "", result.out
    assert said in result.err and result.err.count("\n") == 1, result.err
    assert not crontab.exists() and not units.exists()


def test_an_env_variable_given_twice_or_too_long_for_cron_is_refused(project, tmp_path):
    twice = project.run("cron", "export", "--target", "systemd", "--env", "A=1", "--env", "A=2")
    assert twice.code == 2 and "--env A is given twice" in twice.err
    crontab = tmp_path / "crontab"
    long = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab),
                       "--env", "SXCTL_DELIVER_CMD=" + "x" * 1000)
    assert long.code == 2 and "with these --env values" in long.err and "cron keeps at most 999" in long.err
    assert not crontab.exists()
    from sxctl import export_scheduler
    from sxctl.errors import UsageError

    with pytest.raises(UsageError, match="U\\+000A"):
        export_scheduler("kubernetes", env={"A": "x\ny"}, project=project.root)


HOSTILE_BUT_VALID = "it's \"quoted\" $HOME `x` #not-a-comment: {a: b} [1] %p %% \\ ; & | > *"


def test_the_kubernetes_manifest_reads_back_as_one_cronjob_with_the_intended_values(tmp_path):
    """Every scalar is quoted: a project path and an image full of YAML syntax stay values."""
    project = new_project(tmp_path / HOSTILE_BUT_VALID.replace("/", "-"))
    home = tmp_path / "home"
    home.mkdir()
    image = "registry.example:5000/team/sxctl:0.1.0@sha256:" + "a" * 64
    mount = "/work/a: b #c"
    result = Project(project, home).run("--project", str(project), "cron", "export", "--target", "kubernetes",
                                        "--image", image, "--mount", mount, "--pvc", "agent-work.v2")
    assert result.code == 0, result.err
    [doc] = [d for d in yaml.safe_load_all(result.out) if d is not None]
    assert doc["kind"] == "CronJob" and doc["apiVersion"] == "batch/v1"
    pod = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == image
    assert container["command"] == ["sxctl", "--project", mount, "cron", "tick", "--busy-ok", "-q"]
    assert container["volumeMounts"] == [{"name": "project", "mountPath": mount}]
    assert pod["volumes"] == [{"name": "project", "persistentVolumeClaim": {"claimName": "agent-work.v2"}}]
    assert doc["spec"]["concurrencyPolicy"] == "Forbid" and doc["spec"]["schedule"] == "* * * * *"
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(result.out)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    checked = subprocess.run([str(validator), "--strict", str(manifest)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr


def test_a_manifest_that_would_not_read_back_is_never_printed(project, monkeypatch):
    """The read-back is the last line of defence: a manifest the parser reads differently (here
    an emitter that forgets to quote) is refused, not printed."""
    monkeypatch.setattr(engines.kubernetes, "_yaml_scalar", lambda value: str(value))
    result = project.run("cron", "export", "--target", "kubernetes", "--pvc", "agent-work", "--json")
    assert result.code == 2 and result.json()["error"]["target"] == "kubernetes"
    assert "does not read back as written" in result.json()["error"]["message"]


def test_systemd_units_for_a_hostile_but_valid_path_pass_verify_and_read_back(tmp_path):
    """`%` is a specifier, `$` a variable, `\\` and quotes are ExecStart syntax: all escaped, also
    in Description=; systemd-analyze accepts the units without a warning."""
    project = new_project(tmp_path / HOSTILE_BUT_VALID.replace("/", "-"))
    units = tmp_path / "units"
    done = subprocess.run([sys.executable, "-m", "sxctl", "--project", str(project), "cron", "export", "--target",
                           "systemd", "--install", "--unit-dir", str(units), "--json"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    files = sorted(units.iterdir())
    service = files[0].read_text()
    assert f"Description=sxctl scheduler pass for {str(project).replace('%', '%%')}\n" in service
    assert f"WorkingDirectory={str(project).replace('%', '%%')}\n" in service
    assert engines.read_unit(service)[("Service", "ExecStart")][3:5] == ["--project", str(project)]
    verify = subprocess.run(["systemd-analyze", "verify", *map(str, files)], capture_output=True, text=True,
                            cwd=units, timeout=60)
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr


@pytest.mark.parametrize("name", ["ends-in-a-backslash\\", "ends-in-a-space "])
def test_a_path_systemd_would_join_or_strip_is_refused_for_systemd_only(tmp_path, name):
    """A trailing backslash joins the next line to WorkingDirectory=; trailing whitespace is
    stripped (another folder). cron and Kubernetes hold both."""
    project = new_project(tmp_path / name)
    home = tmp_path / "home"
    home.mkdir()
    run = Project(project, home).run
    result = run("--project", str(project), "cron", "export", "--target", "systemd")
    assert result.code == 2 and "systemd configuration" in result.err and result.out == ""
    for target in ("crontab", "kubernetes"):
        assert run("--project", str(project), "cron", "export", "--target", target).code == 0


def test_a_percent_after_a_backslash_reaches_sh_whole(tmp_path):
    """cron reads `\\\\%` as an escaped backslash and an unescaped `%`, which cuts the command:
    the path `a\\%b%c` must come through cron and sh as itself, and the pass must run there."""
    root = tmp_path / "a\\%b%c"
    project = Project(new_project(root), tmp_path / "home")
    project.home.mkdir()
    project.session()
    assert project.run("cron", "add", "later", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    exported = project.run("cron", "export", "--target", "crontab")
    assert exported.code == 0, exported.err
    [line] = [ln for ln in exported.out.splitlines() if not ln.startswith("#")]
    command, stdin = cron_runs(line.split(" ", 5)[5])
    assert stdin is None, f"cron cuts the command: {command!r}"
    done = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={project.home}", "/bin/sh", "-c", command],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert (root / ".scheduler" / "sxctl-tick").is_dir()  # the pass ran there and left its heartbeat
    assert not list((project.home / ".local" / "state" / "sxctl").glob("tick-*.log"))  # quiet: no line, no file


def test_a_command_longer_than_cron_keeps_is_refused(tmp_path):
    """Debian's cron keeps 999 bytes of a command and drops the rest without a word."""
    deep = tmp_path
    for _ in range(4):
        deep = deep / ("d" * 200)
    project = new_project(deep)
    home = tmp_path / "home"
    home.mkdir()
    result = Project(project, home).run("--project", str(project), "cron", "export", "--target", "crontab")
    assert result.code == 2 and "cron keeps at most 999" in result.err


# --- 2. files outside sxctl's folders: regular or absent, capped, never waited on ----------------

def test_a_fifo_as_the_crontab_file_is_refused_without_hanging(project, tmp_path):
    fifo = tmp_path / "crontab"
    os.mkfifo(fifo)
    for args in (["cron", "export", "--target", "crontab", "--install", "--crontab-file", str(fifo)],
                 ["cron", "export", "--target", "crontab", "--uninstall", "--crontab-file", str(fifo)]):
        result = project.fork(*args, timeout=20)
        assert result.code == 5 and f"{fifo}: cannot read it (not a regular file)" in result.err, result.err
    doctor = project.fork("doctor", "--json", "--crontab-file", str(fifo), timeout=20)
    assert doctor.code in (0, 9), doctor.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_named_like_a_unit_is_refused_without_hanging(project, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    names = list(project.run("cron", "export", "--target", "systemd", "--json").json()["files"])
    os.mkfifo(units / names[0])
    for verb in ("--install", "--uninstall"):
        result = project.fork("cron", "export", "--target", "systemd", verb, "--unit-dir", str(units), timeout=20)
        assert result.code == 5 and "not a regular file" in result.err, result.err
    assert stat.S_ISFIFO(os.lstat(units / names[0]).st_mode)
    assert sorted(os.listdir(units)) == [names[0]]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_tick_log_that_is_not_a_regular_file_is_refused_and_never_written_through(project, tmp_path, kind):
    """`cron tick --log` opens its file without following a link and without waiting on a FIFO
    (exit 5, before the pass runs); the file the link points at is untouched."""
    log, elsewhere = tmp_path / "tick.log", tmp_path / "precious"
    elsewhere.write_text("keep\n")
    {"symlink": lambda: log.symlink_to(elsewhere), "fifo": lambda: os.mkfifo(log), "folder": log.mkdir}[kind]()
    assert project.run("cron", "add", "later", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    result = project.fork("cron", "tick", "--log", str(log), timeout=20)
    if kind == "folder":  # click's own check of a FILE option, as for --crontab-file
        assert result.code == 2 and "is a directory" in result.err, result.err
    else:
        assert result.code == 5 and f"invalid data in {log}" in result.err, result.err
    assert elsewhere.read_text() == "keep\n"
    assert not (project.root / ".scheduler" / "sxctl-tick.json").exists()  # the pass did not run


def test_a_device_as_the_crontab_file_is_refused_on_reading_not_read_without_end(project):
    """/dev/zero is only ever read here (never a write target): doctor refuses it at once instead
    of reading forever (the process gets 1 GiB of address space, so the old way fails, not hangs)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run([sys.executable, "-m", "sxctl", "doctor", "--json", "--crontab-file", "/dev/zero"],
                          cwd=project.root, env=project.env(), capture_output=True, text=True, timeout=60,
                          preexec_fn=limit)
    assert done.returncode in (0, 9) and "internal error" not in done.stderr, done.stderr
    with pytest.raises(SxctlError) as refused:
        engines.read_outside_file(Path("/dev/zero"))
    assert refused.value.exit_code == 5 and "not a regular file" in refused.value.message


def test_a_fifo_that_appears_before_the_rename_is_not_replaced(tmp_path):
    """The write side of the gate: a non-regular file where a crontab or unit file is about to
    be replaced stays (exit 5), checked again right before the rename."""
    fifo = tmp_path / "unit.service"
    os.mkfifo(fifo)
    with pytest.raises(SxctlError) as refused:
        engines.replace_outside_file(fifo, b"[Unit]\n", mode=0o644)
    assert refused.value.exit_code == 5 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["unit.service"]  # no temp left


def test_a_crontab_file_over_the_cap_is_refused_and_kept(project, tmp_path):
    crontab = tmp_path / "crontab"
    size = 16 * 1024 * 1024 + 1  # over the cap (8 MiB, the cap of sxctl's own settings file)
    with open(crontab, "wb") as f:
        f.truncate(size)  # sparse: costs no disk
    result = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab))
    assert result.code == 5 and f"larger than {engines.OUTSIDE_FILE_CAP} bytes" in result.err
    assert crontab.stat().st_size == size and crontab.stat().st_blocks == 0


# --- 4. concurrent installs, exact markers --------------------------------------------------------

@pytest.mark.slow
def test_four_projects_installing_at_once_all_keep_their_block(tmp_path, project):
    """The crontab edit is a read-modify-write: without sxctl's lock the last writer drops the
    blocks the others wrote in between (all exit 0). With it, every block is there, every time —
    also when each shell has its own HOME and XDG_STATE_HOME (the crontab belongs to the user id)."""
    store, env = fake_crontab(tmp_path, project)
    roots = [new_project(tmp_path / f"app{i}") for i in range(4)]
    envs = []
    for i in range(4):
        (tmp_path / f"home{i}").mkdir()
        envs.append({**env, "HOME": str(tmp_path / f"home{i}"), "XDG_STATE_HOME": str(tmp_path / f"state{i}")})
    lost = []
    for trial in range(4):
        store.unlink(missing_ok=True)
        installs = start_together(project, [["--project", str(root), "cron", "export", "--target", "crontab",
                                             "--install"] for root in roots], tmp_path / f"go-{trial}", envs=envs)
        done = [install.wait(timeout=60) for install in installs]
        assert [result.code for result in done] == [0] * 4, done
        text = store.read_text()
        missing = [str(root) for root in roots if f"# BEGIN sxctl cron tick for {root} (" not in text]
        if missing:
            lost.append((trial, missing))
        assert text.count("# BEGIN sxctl cron tick for") == 4 - len(missing)
    assert lost == []


def test_a_block_that_is_not_there_after_writing_is_a_failure(project, tmp_path):
    """Read back after writing: a crontab(1) that kept the old crontab (another program wrote at
    the same time) makes the install fail (exit 4), not report 'installed'."""
    store, env = fake_crontab(tmp_path, project, FAKE_CRONTAB_DROP="1")
    store.write_text("0 3 * * * /usr/local/bin/backup\n")
    result = project.run("cron", "export", "--target", "crontab", "--install", "--json", env=env)
    assert result.code == 4, result.out
    assert result.json()["error"]["code"] == "lost_update" and "is not there" in result.json()["error"]["message"]


def test_markers_match_exactly_app_and_app_copy(tmp_path):
    """`app`'s marker is a prefix of `app (copy)`'s: each is installed, checked and removed alone."""
    home = tmp_path / "home"
    home.mkdir()
    app, copy = new_project(tmp_path / "app"), new_project(tmp_path / "app (copy)")
    crontab = tmp_path / "crontab"

    def run(root, *args):
        return Project(root, home).run("--project", str(root), *args, "--crontab-file", str(crontab))

    def installed(root) -> bool:
        checks = run(root, "doctor", "--json").json()["checks"]
        return any("crontab block installed" in c["message"] for c in checks if c["check"] == "scheduler")

    assert run(copy, "cron", "export", "--target", "crontab", "--install").code == 0
    assert not installed(app)
    result = run(app, "cron", "export", "--target", "crontab", "--install", "--json")
    assert result.code == 0 and result.json()["action"] == "installed", result.err
    assert installed(app) and installed(copy)
    with_both = crontab.read_text()
    assert with_both.count("# BEGIN sxctl cron tick for") == 2
    again = run(app, "cron", "export", "--target", "crontab", "--install", "--json")
    assert again.json()["action"] == "unchanged" and crontab.read_text() == with_both
    assert run(app, "cron", "export", "--target", "crontab", "--uninstall").code == 0
    assert crontab.read_text() == run(copy, "cron", "export", "--target", "crontab").out
    assert installed(copy) and not installed(app)


# --- 8. bytes that are not UTF-8 ---------------------------------------------------------------------

LATIN1 = b"# Gr\xfc\xdfe: caf\xe9\n0 3 * * * /usr/local/bin/backup\n"


def test_a_latin1_byte_in_the_crontab_file_survives_install_doctor_and_uninstall(project, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_bytes(LATIN1)
    args = ["cron", "export", "--target", "crontab", "--crontab-file", str(crontab)]
    assert project.run(*args, "--install").code == 0
    assert crontab.read_bytes().startswith(LATIN1) and b"# BEGIN sxctl" in crontab.read_bytes()
    doctor = project.run("doctor", "--json", "--crontab-file", str(crontab))
    assert doctor.code in (0, 9), doctor.err
    assert project.run(*args, "--uninstall").code == 0
    assert crontab.read_bytes() == LATIN1


def test_a_latin1_byte_in_the_users_crontab_survives_install_and_uninstall(project, tmp_path):
    store, env = fake_crontab(tmp_path, project)
    store.write_bytes(LATIN1)
    for verb in ("--install", "--uninstall"):
        result = project.run("cron", "export", "--target", "crontab", verb, "--json", env=env)
        assert result.code == 0, result.err
        assert result.json()["changed"] == ["crontab"]
    assert store.read_bytes() == LATIN1


def test_a_latin1_byte_in_an_existing_unit_file(project, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    names = list(project.run("cron", "export", "--target", "systemd", "--json").json()["files"])
    service = units / names[0]
    mine = b"# sxctl scheduler pass for caf\xe9 (" + engines.MARKER.encode() + b")\n[Unit]\n"
    service.write_bytes(mine)
    install = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units))
    assert install.code == 0, install.err  # sxctl's (the marker): replaced
    assert project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units)).code == 0
    assert os.listdir(units) == []
    theirs = b"# caf\xe9\n[Service]\nExecStart=/bin/mine\n"
    service.write_bytes(theirs)
    refused = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", str(units))
    assert refused.code == 4 and "not written by sxctl" in refused.err
    assert project.run("cron", "export", "--target", "systemd", "--uninstall", "--unit-dir", str(units)).code == 0
    assert service.read_bytes() == theirs


def test_a_project_folder_whose_name_is_not_utf8(tmp_path):
    """Found from the working folder (no argument to refuse): doctor answers, export refuses the
    path with exit 2, naming the byte."""
    root = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    project = Project(new_project(root), tmp_path / "home")
    project.home.mkdir()
    project.session()

    def run(*args: str) -> tuple[int, str, str]:  # a real process: its stdout passes the byte on
        done = subprocess.run([sys.executable, "-m", "sxctl", *args], capture_output=True, cwd=root,
                              env=project.env(), timeout=60)
        return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")

    done = subprocess.run([sys.executable, "-m", "sxctl", "doctor", "--json"], capture_output=True, cwd=root,
                          env=project.env(), timeout=60)
    assert done.returncode in (0, 9), done.stdout + done.stderr
    doc = json.loads(done.stdout.decode("utf-8"))  # valid UTF-8: the byte is the escape \udce9
    assert [c["check"] for c in doc["checks"] if c["status"] == "fail"] == []
    assert b"\\udce9" in done.stdout
    for target in ("crontab", "systemd", "kubernetes"):
        code, out, err = run("cron", "export", "--target", target)
        assert code == 2 and out == "" and "caf\\xe9' cannot be written" in err and "not valid UTF-8" in err


# --- 11. PATH and folders that are not what they seem --------------------------------------------------

def test_doctor_passes_over_a_path_entry_it_cannot_use(healthy_project, tmp_path):
    """A PATH folder whose `crontab` cannot be run (as a user: a folder that cannot be searched)
    is passed over as a shell would; it is not the scheduler check's failure."""
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "crontab").write_text("#!/bin/sh\nexit 0\n")  # no execute bit: EACCES, even for root
    env = healthy_project.env(PATH=str(blocked))
    result = healthy_project.run("doctor", "--json", env=env)
    [check] = [c for c in result.json()["checks"] if c["check"] == "scheduler"]
    assert check["status"] == "ok" and "Permission denied" not in check["message"], check


@pytest.fixture
def healthy_project(project):
    project.session()
    assert project.run("cron", "add", "later", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    assert project.run("cron", "tick").code == 0
    return project


def test_an_empty_unit_dir_is_refused_and_a_relative_config_home_is_ignored(project, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    empty = project.run("cron", "export", "--target", "systemd", "--install", "--unit-dir", "", cwd=work)
    assert empty.code == 2 and "--unit-dir is empty" in empty.err
    empty = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", "", cwd=work)
    assert empty.code == 2 and "--crontab-file is empty" in empty.err
    relative = project.run("--project", str(project.root), "cron", "export", "--target", "systemd", "--install",
                           "--json", cwd=work,
                           env=project.env(XDG_CONFIG_HOME="config"))
    assert relative.code == 0, relative.err
    assert os.listdir(work) == []  # nothing relative to the working folder
    folder = project.home / ".config" / "systemd" / "user"
    assert sorted(relative.json()["changed"]) == sorted(str(folder / name) for name in relative.json()["files"])
    assert all(Path(path).is_file() for path in relative.json()["changed"])


def test_the_crontab_lock_is_one_per_user_id_whatever_home_says(project, tmp_path):
    """Two shells of one user with different HOME / XDG_STATE_HOME edit one crontab: they meet at
    /tmp/sxctl-<uid>/crontab.lock, and nothing is created under either home."""
    crontab = tmp_path / "crontab"
    for state in ("relative", str(tmp_path / "state")):
        assert project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file", str(crontab),
                           env=project.env(XDG_STATE_HOME=state)).code == 0
    lock = Path(f"/tmp/sxctl-{os.getuid()}") / "crontab.lock"
    assert lock.is_file() and stat.S_IMODE(os.stat(lock.parent).st_mode) == 0o700
    assert not (project.home / ".local").exists() and not (tmp_path / "state").exists()
    assert not (project.root / "relative").exists()
    assert json.loads(project.run("cron", "export", "--target", "crontab", "--json").out)["files"]["crontab"] \
        in crontab.read_text()


def test_a_crontab_lock_folder_others_may_enter_is_refused(project, tmp_path, monkeypatch):
    """/tmp is shared: a lock folder someone else made (or opened up) is not used (exit 5)."""
    from sxctl import engines

    folder = tmp_path / "sxctl-lock"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    monkeypatch.setattr(engines.crontab, "Path", lambda text: folder if text.startswith("/tmp/sxctl-") else Path(text))
    result = project.run("cron", "export", "--target", "crontab", "--install", "--crontab-file",
                         str(tmp_path / "crontab"), "--json")
    assert result.code == 5 and "crontab lock" in result.json()["error"]["message"], result.out
    assert not (tmp_path / "crontab").exists()

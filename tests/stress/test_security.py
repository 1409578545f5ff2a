"""Security review as tests: names that try to escape their folder, symlinks, permissions,
ownership when run as root, and environment variables that could redirect writes."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.conftest import tree

pytestmark = pytest.mark.slow

TRICKS = ["../x", "..", ".", "a/../../b", "/etc/passwd", "a/b", "x\x00y", "~root", ".hidden", "a..b", ""]


def _untouched_outside(project, before):
    assert tree(project.root.parent / "outside") == before


@pytest.fixture
def outside(project):
    folder = project.root.parent / "outside"
    folder.mkdir()
    (folder / "keep").write_text("keep")
    return folder


@pytest.mark.parametrize("name", [t for t in TRICKS if t not in ("", ".hidden", "x\x00y")])  # ".hidden" is legal
def test_session_names_cannot_escape(project, outside, name):
    project.session()
    before = tree(outside)
    for args in (["--session", name, "inbox", "send", "x"], ["--session", name, "cb", "set", "x", "--every", "5"],
                 ["--session", name, "agent", "run", "--max-turns", "1"]):
        result = project.run(*args, "--json")
        assert result.code in (2, 3), (args, result.out)
    _untouched_outside(project, before)


@pytest.mark.parametrize("name", TRICKS)
def test_stems_cannot_escape(project, outside, name):
    if "\x00" in name:
        return
    folder = project.session()
    before = tree(outside)
    for args in (["inbox", "send", "--stem", name, "x"], ["inbox", "retract", name], ["inbox", "show", name],
                 ["inbox", "wait", name, "--timeout", "0.1"]):
        result = project.run(*args, "--json")
        assert result.code in (2, 3), (args, result.out)
    _untouched_outside(project, before)
    assert not (folder / "inbox").exists() or all(p.parent.name in ("inbox", "done", "retracted", ".keys")
                                                  for p in (folder / "inbox").rglob("*"))


def test_keys_and_job_names_are_data_not_paths(project, outside):
    folder = project.session(live=False)
    before = tree(outside)
    assert project.run("inbox", "send", "x", "--key", "../../outside/keep").code == 0
    records = list((folder / "inbox" / ".keys").iterdir())
    assert len(records) == 1 and len(records[0].stem) == 64  # a hash, whatever the key says
    assert project.run("cron", "add", "../../outside/evil", "--in", "60", "--payload", "heartbeat-event",
                       "--text", "t").code == 0
    assert json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())["jobs"][0]["name"] == \
        "../../outside/evil"
    _untouched_outside(project, before)


def test_project_flag_must_hold_a_scorpiox_folder(project, outside):
    before = tree(outside)
    for args in (["--project", str(outside), "inbox", "send", "x"], ["--project", "/", "cb", "list"]):
        assert project.run(*args).code == 3
    _untouched_outside(project, before)


def test_sx_session_dir_cannot_redirect_writes(project, outside):
    project.session()
    before = tree(outside)
    for target in (outside, project.root / ".scorpiox", project.root):
        result = project.run("inbox", "send", "x", "--json", env=project.env(SX_SESSION_DIR=str(target)),
                             cwd=outside)
        assert result.code in (2, 3), (target, result.out)
    _untouched_outside(project, before)
    assert not (project.root / ".scorpiox" / "inbox").exists()


def test_symlinked_targets_are_refused(project, outside):
    folder = project.session(live=False)
    victim = outside / "victim.json"
    victim.write_text('{"rev": 1, "slots": []}')
    (folder / "callbacks.json").symlink_to(victim)
    before = tree(outside)
    result = project.run("cb", "set", "x", "--every", "5", "--json")
    assert result.code == 5, result.out
    _untouched_outside(project, before)
    (project.root / ".scheduler").mkdir()
    (project.root / ".scheduler" / "cron-jobs.json").symlink_to(victim)
    result = project.run("cron", "pause", "x", "--json")
    assert result.code == 5 and tree(outside) == before


def test_symlinked_session_folders_are_not_sessions(project, outside):
    (project.root / ".scorpiox" / "sessions" / "2026_09_21_linked").symlink_to(outside)
    result = project.run("--session", "2026_09_21_linked", "inbox", "send", "x", "--json")
    assert result.code == 5 and "symbolic link" in result.json()["error"]["message"]
    assert list(outside.rglob("*.json")) == []
    assert project.run("session", "list", "--json").json()["sessions"] == []


def test_everything_created_is_private(project):
    folder = project.session(live=False)
    png = project.root.parent / "i.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    project.run("inbox", "send", "x", "--key", "k", "--image", str(png))
    project.run("inbox", "retract", "--key", "k")
    project.run("cb", "set", "x", "--every", "5")
    project.run("cron", "add", "j", "--in", "60", "--payload", "heartbeat-event", "--text", "t")
    for path in [*folder.rglob("*"), *(project.root / ".scheduler").rglob("*")]:
        if path.name == "stats.json":
            continue  # written by this test, standing in for the agent
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
        else:
            assert mode == 0o600, path


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_as_root_new_files_belong_to_the_folder_owner(project):
    folder = project.session(live=False)
    os.chown(folder, 4321, 4321)
    os.chown(folder / "stats.json", 4321, 4321)
    project.run("cb", "set", "x", "--every", "5")
    project.run("inbox", "send", "y")
    for path in [folder / "callbacks.json", *(folder / "inbox").rglob("*"), folder / "inbox"]:
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321), path


def test_temp_names_never_follow_symlinks(project, outside):
    folder = project.session(live=False)
    (folder / "inbox").mkdir()
    victim = outside / "victim"
    victim.write_text("keep")
    stem = "planted"
    (folder / "inbox" / f"{stem}.json.tmp").symlink_to(victim)
    result = project.run("inbox", "send", "--stem", stem, "x", "--json")
    assert result.code == 4 and victim.read_text() == "keep"
    assert (folder / "inbox" / f"{stem}.json.tmp").is_symlink()  # not ours to remove

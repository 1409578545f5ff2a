"""Project discovery, session selection, liveness, worktree copies, config cascade (sessions.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from sxctl.project import liveness_of, resolve_config, select_session, worktree_copies
from sxctl.report import Reporter
from tests.conftest import EXAMPLES, SID, now_ms


def test_project_found_by_walking_up(project):
    project.session()
    nested = project.root / "src" / "deep"
    nested.mkdir(parents=True)
    result = project.run("session", "which", "--json", cwd=nested)
    assert result.code == 0, result.err
    assert result.json()["session_dir"].startswith(str(project.root))


def test_no_project_is_exit_3_with_the_spec_message(tmp_path, project):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = project.run("session", "which", cwd=outside)
    assert result.code == 3
    assert result.err.strip() == f"sxctl: no .scorpiox/ folder found from {outside} upward; pass --project DIR"
    result = project.run("--json", "session", "which", cwd=outside)
    assert result.json()["error"]["code"] == "project_not_found"


def test_explicit_project_without_scorpiox_is_exit_3(tmp_path, project):
    result = project.run("--project", str(tmp_path), "session", "list")
    assert result.code == 3 and "no .scorpiox/ folder in" in result.err


def test_project_flag_beats_env_beats_cwd(tmp_path, project):
    other = tmp_path / "other"
    (other / ".scorpiox" / "sessions" / "2026_01_01_other_one").mkdir(parents=True)
    project.session()
    env = project.env(SXCTL_PROJECT=str(other))
    assert project.run("session", "which", env=env).out.strip() == "2026_01_01_other_one"
    flagged = project.run("--project", str(project.root), "session", "which", env=env)
    assert flagged.out.strip() == "2026_09_21_quiet_euler"


def test_live_session_wins_over_newer_folder_with_a_note(project):
    project.session("2026_09_20_cool_newton", live=True)
    project.session("2026_09_21_quiet_euler", live=False)
    result = project.run("session", "which")
    assert result.out == "2026_09_20_cool_newton\n"
    assert result.err.startswith("sxctl: using session 2026_09_20_cool_newton (live, stats ")
    assert project.run("-q", "session", "which").err == ""


def test_newest_folder_when_nothing_is_live(project):
    project.session("2026_09_20_cool_newton", live=False)
    project.session("2026_09_21_quiet_euler", live=False)
    project.session("zz_no_date", live=False)
    project.session("9999_99_99_not_a_date", live=False)  # no calendar date: it does not sort first
    result = project.run("session", "which", "--json")
    assert result.json()["session"] == "2026_09_21_quiet_euler"
    assert result.json()["session_source"] == "newest"
    assert "(newest folder; no live session)" in result.err


def test_same_day_tie_is_broken_by_stats_then_name():
    clock = FakeClock(1_789_974_090_000)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, updated in (("2026_09_21_aaa", 5000), ("2026_09_21_bbb", 1000)):
            folder = root / ".scorpiox" / "sessions" / name
            folder.mkdir(parents=True)
            (folder / "stats.json").write_text(json.dumps({"updated_ms": updated}))
        assert select_session(root, environ={}, clock=clock).id == "2026_09_21_aaa"


def test_session_flag_and_env(project):
    project.session("2026_09_20_cool_newton")
    project.session("2026_09_21_quiet_euler")
    chosen = project.run("--session", "2026_09_20_cool_newton", "session", "which")
    assert chosen.out.strip() == "2026_09_20_cool_newton"
    env = project.env(SXCTL_SESSION="2026_09_20_cool_newton")
    result = project.run("session", "which", "--json", env=env)
    assert result.json()["session_source"] == "env:SXCTL_SESSION"
    assert result.err == ""  # an explicit choice needs no note


@pytest.mark.parametrize("bad", ["../etc", "a/b", "..", ".", "x" * 129, "a..b", "sp ace"])
def test_bad_session_ids_are_exit_2(project, bad):
    project.session()
    result = project.run("--session", bad, "session", "which", "--json")
    assert result.code == 2 and result.json()["error"]["code"] == "invalid_value"


def test_unknown_session_is_exit_3(project):
    project.session()
    result = project.run("--session", "2026_01_01_nobody_home", "session", "which")
    assert result.code == 3 and "not found" in result.err


def test_sx_session_dir_selects_and_implies_project(project, tmp_path):
    folder = project.session("2026_09_20_cool_newton")
    project.session("2026_09_21_quiet_euler")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = project.env(SX_SESSION_DIR=str(folder))
    result = project.run("session", "which", "--json", env=env, cwd=elsewhere)
    assert result.code == 0, result.err
    assert result.json()["session"] == "2026_09_20_cool_newton"
    assert result.json()["session_source"] == "env:SX_SESSION_DIR"


def test_sx_session_dir_stale_while_another_is_live_warns(project):
    old = project.session("2026_09_20_cool_newton", live=False)
    project.session("2026_09_21_quiet_euler", live=True)
    result = project.run("session", "which", env=project.env(SX_SESSION_DIR=str(old)))
    assert result.out.strip() == "2026_09_20_cool_newton"
    assert "warning" in result.err and "2026_09_21_quiet_euler is live" in result.err


def test_no_sessions_is_exit_3(project):
    result = project.run("session", "which")
    assert result.code == 3
    assert result.err.strip() == f"sxctl: no sessions in {project.root}/.scorpiox/sessions"


def test_liveness_rules():
    now = 1_000_000
    assert liveness_of({"updated_ms": now - 10_000}, now).state == "live"
    assert liveness_of({"updated_ms": now - 10_001}, now).state == "stale"
    skewed = liveness_of({"updated_ms": now + 20_000}, now)
    assert skewed.state == "stale" and "clock skew" in skewed.describe()
    assert liveness_of(None, now).state == "unknown"


def test_session_list_json_and_table(project):
    live = project.session("2026_09_21_quiet_euler", live=True)
    shutil.copy(EXAMPLES / "callbacks.json", live / "callbacks.json")
    (live / "inbox").mkdir()
    shutil.copy(EXAMPLES / "inbox" / "1789972202_061734902.json", live / "inbox")
    project.session("2026_09_20_cool_newton", live=None)
    (project.root / ".scorpiox" / "sessions" / "bad name").mkdir()
    result = project.run("session", "list", "--json")
    doc = result.json()
    assert doc["ok"] and doc["project"] == str(project.root)
    assert [s["id"] for s in doc["sessions"]] == ["2026_09_21_quiet_euler", "2026_09_20_cool_newton"]
    first = doc["sessions"][0]
    assert set(first) >= {"id", "dir", "state", "updated_ms", "age_ms", "model", "callbacks_active",
                          "callbacks_file", "inbox_pending", "copy"}
    assert (first["state"], first["callbacks_active"], first["inbox_pending"], first["copy"]) == ("live", 2, 1, "none")
    assert doc["sessions"][1]["state"] == "unknown" and doc["sessions"][1]["callbacks_file"] is False
    lines = project.run("session", "list").out.splitlines()
    assert lines[0].split() == ["ID", "STATE", "AGE", "MODEL", "CB", "INBOX", "COPY"]
    assert lines[1].split()[:2] == ["2026_09_21_quiet_euler", "live"]


def test_session_show_includes_stats_verbatim(project):
    folder = project.session()
    stats = json.loads((EXAMPLES / "stats.json").read_text())
    stats["updated_ms"] = now_ms()
    (folder / "stats.json").write_text(json.dumps(stats))
    doc = project.run("session", "show", "2026_09_21_quiet_euler", "--json").json()
    assert doc["stats"] == stats
    assert doc["worktree"] == {"role": "none", "worktree_dir": None, "mirror_dir": None}
    assert doc["inbox_gate"] == "on" and doc["state"] == "live"
    human = project.run("session", "show")
    assert "state     live" in human.out and "example-model" in human.out


# --- worktrees -------------------------------------------------------------------------------

def test_worktree_copy_and_mirror_are_found_both_ways(project, worktree_pair):
    wt, worktree, mirror = worktree_pair
    from_wt = worktree_copies(wt, worktree.name, worktree, None)
    assert (from_wt.role, from_wt.worktree_dir, from_wt.mirror_dir) == ("worktree", worktree, mirror)
    from_main = worktree_copies(project.root, mirror.name, mirror, json.loads((mirror / "stats.json").read_text()))
    assert (from_main.role, from_main.worktree_dir, from_main.mirror_dir) == ("mirror", worktree, mirror)
    # without a usable cwd in stats.json, the registered worktrees are searched
    from_admin = worktree_copies(project.root, mirror.name, mirror, None)
    assert from_admin.role == "mirror" and from_admin.worktree_dir == worktree


def test_send_in_main_checkout_goes_to_the_worktree_inbox(project, worktree_pair):
    wt, worktree, mirror = worktree_pair
    result = project.run("inbox", "send", "hi", "--no-wait", "--json")
    doc = result.json()
    assert doc["copy"] == "worktree"
    assert Path(doc["path"]).parent == worktree / "inbox"
    assert not (mirror / "inbox").exists()
    show = project.run("session", "show", "--json").json()
    assert show["worktree"]["role"] == "mirror" and show["worktree"]["worktree_dir"] == str(worktree)
    rows = project.run("inbox", "list", "--json").json()["messages"]
    assert [r["copy"] for r in rows] == ["worktree"]


# --- configuration cascade -------------------------------------------------------------------

def test_config_tiers_last_wins(project):
    (project.root / ".claude").mkdir()
    (project.root / ".claude" / "scorpiox-env.txt").write_text("SCORPIOX_INBOX=0\nODD\n")
    env = project.env()
    result = project.run("config", "get", "SCORPIOX_INBOX", "--json", env=env)
    doc = result.json()
    assert doc["value"] == "0" and doc["approximate"] is True
    assert [c["source"] for c in doc["chain"]] == ["default", str(project.root / ".claude" / "scorpiox-env.txt")]
    shutil.copy(EXAMPLES / "scorpiox-env.txt", project.root / ".scorpiox" / "scorpiox-env.txt")
    doc = project.run("config", "get", "SCORPIOX_INBOX", "--json").json()
    assert doc["value"] == "1" and doc["source"].endswith(".scorpiox/scorpiox-env.txt")
    env_doc = project.run("config", "get", "SCORPIOX_INBOX", "--json", env=project.env(SCORPIOX_INBOX="0")).json()
    assert env_doc["value"] == "0" and env_doc["source"] == "env"
    assert project.run("config", "get", "SESSION_RETENTION_DAYS").out == "30\n"


def test_config_file_format_rules(tmp_path):
    root = tmp_path
    (root / ".scorpiox").mkdir()
    (root / ".scorpiox" / "scorpiox-env.txt").write_text(
        "# comment\n\n  KEY = spaced value  \nQUOTED=\"x\"\nEQ=a=b\n" + "K" * 65 + "=long\nV=" + "v" * 513 + "\n"
    )
    env = {"HOME": str(tmp_path / "home"), "PATH": ""}
    get = lambda key: resolve_config(key, root, environ=env).value  # noqa: E731
    assert get("KEY") == "spaced value"
    assert get("QUOTED") == '"x"'
    assert get("EQ") == "a=b"
    assert get("K" * 65) is None and get("V") is None
    assert get("TOOL_SETCALLBACK") == "1"


def test_profile_tier_taken_whole_and_bad_names_ignored(tmp_path):
    root = tmp_path
    profiles = root / ".scorpiox" / "scorpiox-env"
    profiles.mkdir(parents=True)
    (root / ".scorpiox" / "scorpiox-env.txt").write_text("ACTIVE_PROFILE=night\nX=project\n")
    (profiles / "night.txt").write_text("X=profile\n")
    env = {"HOME": str(tmp_path / "home"), "PATH": ""}
    assert resolve_config("X", root, environ=env).value == "profile"
    assert resolve_config("X", root, environ={**env, "ACTIVE_PROFILE": "../night"}).value == "project"


def test_global_tier_from_the_agent_executable(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "scorpiox"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (bin_dir / "scorpiox-env.txt").write_text("SCORPIOX_INBOX=0\n")
    (tmp_path / ".scorpiox").mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": str(bin_dir)}
    resolved = resolve_config("SCORPIOX_INBOX", tmp_path, environ=env)
    assert resolved.value == "0" and resolved.source == str(bin_dir / "scorpiox-env.txt")


def test_reporter_collects_guess_note():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".scorpiox" / "sessions" / "2026_09_21_quiet_euler").mkdir(parents=True)
        report = Reporter()
        select_session(root, environ={}, report=report)
        assert report.notes == ["using session 2026_09_21_quiet_euler (newest folder; no live session)"]


def test_rotation_during_write_is_warned(project):
    from sxctl.project import check_rotation_after_write

    project.session("2026_09_21_quiet_euler", live=True)
    report = Reporter()
    chosen = select_session(project.root, environ={}, report=report)
    project.session("2026_09_21_brave_curie", live=True, age_ms=-500)  # fresher stats
    check_rotation_after_write(chosen, FakeClock(now_ms()), report)
    assert report.warnings == [
        "possible rotation during write: 2026_09_21_brave_curie is now the live session, not 2026_09_21_quiet_euler"]


def test_a_stats_file_with_a_key_twice_is_not_believed(project):
    """`{"updated_ms": <an hour ago>, "updated_ms": <now>}` lies about when the agent was last
    seen; neither value wins: the session's state is unknown, not live."""
    folder = project.session(SID, live=True)
    stats = json.loads((folder / "stats.json").read_text())
    stale = stats["updated_ms"] - 3_600_000
    (folder / "stats.json").write_text(f'{{"updated_ms": {stale}, "updated_ms": {stats["updated_ms"]}}}')
    listed = project.run("session", "list", "--json").json()
    assert [s["state"] for s in listed["sessions"] if s["id"] == SID] == ["unknown"], listed

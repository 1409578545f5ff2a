"""`sxctl callbacks`: documented strings, validation, the revision protocol, worktree dual-write."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from sxctl.callbacks.protocol import WriteOptions
from sxctl.callbacks.verbs import list_preview, preview_fires, set_timer
from sxctl.clock import FakeClock
from sxctl.project import select_session
from tests.conftest import EXAMPLES, example_table, now_ms, tree


def data_files(folder):
    """The folder's files but sxctl's own lock file, which a write attempt may leave behind."""
    return {name: data for name, data in tree(folder).items() if not name.endswith(".sxctl-callbacks.lock")}


NOW = 1_789_974_090_000  # the examples' moment: stats.json and callbacks.json were written then
SID = "2026_09_21_quiet_euler"


@pytest.fixture
def example_session(project):
    """The examples' session: the documented table, and stats.json written at NOW."""
    folder = project.root / ".scorpiox" / "sessions" / SID
    folder.mkdir(parents=True)
    example_table(folder / "callbacks.json")
    shutil.copy(EXAMPLES / "stats.json", folder / "stats.json")
    return folder


def invoke(project, *args, now=NOW, clock=None, input=None):
    """The CLI in-process with a fake clock (the examples are in 2026-09)."""
    return project.run(*args, clock=clock or FakeClock(now), input=input, env=project.env(NO_COLOR="1"))


def test_documented_list_rows_character_for_character(project, example_session):
    result = invoke(project, "callbacks", "list")
    assert result.code == 0, (result.out, result.err)
    assert result.out == (
        "Active callbacks (2/8):\n"
        '  [0] "Check the deploy job; report success or failure, then re-arm if still..." - fires in 0m12s (39 left)\n'
        '  [3] "Check disk usage on /tmp" - fires in 1m00s (infinite)\n'
    )
    doc = json.loads(invoke(project, "cb", "list", "--json").out)
    assert doc["text"] == result.out.rstrip("\n")
    assert [s["id"] for s in doc["slots"]] == [0, 3] and doc["slots"][0]["fires_in_ms"] == 12_000
    summary = (doc["rev"], doc["active_count"], doc["capacity"], doc["paused"], doc["file_exists"])
    assert summary == (12, 2, 8, False, True)
    assert doc["session"] == SID and doc["session_source"] == "live"


def test_set_takes_the_lowest_free_slot_and_matches_the_documented_json(project, example_session):
    before = json.loads((example_session / "callbacks.json").read_text())
    result = invoke(project, "callbacks", "set", "Poll CI", "--every", "30s", "--repeat", "40", "--json")
    assert result.code == 0, (result.out, result.err)
    doc = json.loads(result.out)
    assert doc == {
        "ok": True, "session": SID, "session_dir": str(example_session), "session_source": "live",
        "file": str(example_session / "callbacks.json"), "file_exists": True, "rev": 13, "paused": False,
        "capacity": 8, "active_count": 3, "action": "set", "verified": True,
        "slot": {"id": 1, "active": True, "message": "Poll CI", "delay_ms": 30000, "repeat_count": 40,
                 "fire_at_ms": 1789974120000, "fires_in_ms": 30000},
        "text": "Callback scheduled: fires every 30s, repeats 40 times.",
    }
    after = json.loads((example_session / "callbacks.json").read_text())
    assert after["slots"][0] == before["slots"][0] and after["slots"][2] == before["slots"][2]
    assert after["slots"][1] == {k: v for k, v in doc["slot"].items() if k != "fires_in_ms"}
    assert list(after) == list(before) and after["updated_ms"] == NOW
    human = invoke(project, "cb", "set", "Check disk usage on /var", "--every", "1m", "--repeat", "-1")
    assert human.out.splitlines()[0] == "Callback scheduled: fires every 60s, repeats infinitely."
    assert human.out.splitlines()[1].startswith("  slot 2, rev 14, first fire ")


def test_written_file_format(project, example_session):
    invoke(project, "cb", "set", "héllo ✓", "--every", "5")
    raw = (example_session / "callbacks.json").read_bytes()
    doc = json.loads(raw)
    assert raw == (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    assert "héllo ✓".encode() in raw


def test_cancel_strings(project, example_session):
    result = invoke(project, "callbacks", "cancel", "0")
    assert result.out == 'Cancelled callback slot 0: "Check the deploy job; report success or failure, then r..."\n'
    slot0 = json.loads((example_session / "callbacks.json").read_text())["slots"][0]
    assert slot0["active"] is False and slot0["repeat_count"] == 39  # other fields kept
    assert invoke(project, "callbacks", "cancel-all").out == "Cancelled 1 callback.\n"
    before = data_files(example_session)
    assert invoke(project, "callbacks", "cancel-all").out == "No active callbacks.\n"
    assert data_files(example_session) == before  # nothing to do, nothing written
    invoke(project, "cb", "set", "a", "--every", "5")
    invoke(project, "cb", "set", "b", "--every", "5")
    doc = json.loads(invoke(project, "cb", "cancel-all", "--json").out)
    assert doc["text"] == "Cancelled 2 callbacks." and doc["cancelled"] == [0, 1]


@pytest.mark.parametrize(
    ("args", "exit_code", "line"),
    [
        (["set", "", "--every", "5"], 2, "Error: missing message parameter"),
        (["set", "x", "--every", "7200"], 2, "Error: delay_seconds must be between 1 and 3600 (got 7200)"),
        (["set", "x", "--every", "0"], 2, "Error: delay_seconds must be between 1 and 3600 (got 0)"),
        (["set", "x", "--every", "1500ms"], 2, "Error: delay_seconds must be between 1 and 3600 (got 1.5)"),
        (["set", "x", "--every", "5", "--repeat", "5000"], 2,
         "Error: repeat_count must be -1 or between 1 and 1000 (got 5000)"),
        (["set", "x" * 2311, "--every", "5"], 2, "Error: message must be at most 2048 characters (got 2311)"),
        (["set", "x", "--every", "5", "--slot", "9"], 2, "Error: callback_id 9 out of range (max 7)"),
        (["set", "x", "--every", "5", "--slot", "0"], 4, "sxctl: slot 0 is active; use --replace"),
        (["cancel", "5"], 3, "Error: callback slot 5 is not active"),
        (["cancel", "1"], 3, "Error: callback slot 1 is not active"),
        (["edit", "1", "--message", "x"], 3, "Error: callback slot 1 is not active"),
        (["cancel", "8"], 2, "Error: callback_id 8 out of range (max 7)"),
        (["set", "x", "--every", "5", "--expect-rev", "11"], 4, "sxctl: expected rev 11, found 12"),
    ],
)
def test_errors_are_the_tool_strings_on_one_line_and_write_nothing(project, example_session, args, exit_code, line):
    before = data_files(example_session)
    result = project.run("--session", SID, "callbacks", *args)
    assert result.code == exit_code
    hint = ["sxctl: hint: --every takes whole seconds from 1s to 1h (e.g. 30s, 2m, 1h)"] if "delay_seconds" in line else []
    assert result.err.strip().splitlines() == [line, *hint] and result.out == ""  # the option named in the hint
    assert data_files(example_session) == before
    doc = project.run("--session", SID, "callbacks", *args, "--json").json()
    assert doc["ok"] is False and doc["error"]["exit"] == exit_code
    assert doc["error"]["message"] == line.removeprefix("sxctl: ")


def test_slots_full_is_exit_4(project):
    project.session(live=False)
    for n in range(8):
        assert project.run("cb", "set", f"t{n}", "--every", "10").code == 0
    result = project.run("cb", "set", "one too many", "--every", "10", "--json")
    assert result.code == 4
    assert result.json()["error"] == {
        "code": "slots_full", "message": "Error: all callback slots full (max 8)", "exit": 4}


def test_set_replace_and_repeat_zero(project, example_session):
    doc = json.loads(invoke(project, "cb", "set", "new", "--every", "10", "--slot", "0", "--replace",
                            "--repeat", "0", "--json").out)
    assert doc["slot"]["id"] == 0 and doc["slot"]["repeat_count"] == 1
    assert doc["text"] == "Callback scheduled: fires every 10s, repeats 1 times."
    human = invoke(project, "cb", "set", "again", "--every", "10", "--slot", "0", "--replace", "--repeat", "0")
    assert "sxctl: --repeat 0 means one fire (stored as repeat_count 1, as the agent's tool does)" in human.err
    assert invoke(project, "cb", "set", "x", "--every", "5", "--replace").code == 2


def test_repeat_help_says_what_repeat_does(project, example_session):
    """The help said "0 = one" while --repeat 1 fires once too: 1 is once, 0 is taken as 1."""
    for repeat in ("1", "0"):
        slot = invoke(project, "cb", "set", f"once {repeat}", "--every", "10", "--slot", "0", "--replace",
                      "--repeat", repeat, "--no-verify", "--json").json()["slot"]
        fires = invoke(project, "cb", "next", "-n", "50", "--json").json()["fires"]
        assert slot["repeat_count"] == 1 and [f["fire_no"] for f in fires if f["slot"] == 0] == [1]
    set_help = " ".join(invoke(project, "cb", "set", "--help").out.split())
    assert "How many times it fires: 1-1000 (1 = once; 0 is taken as 1, as the agent's tool does), or -1 = forever." \
        in set_help and "0 = one" not in set_help
    edit_help = " ".join(invoke(project, "cb", "edit", "--help").out.split())
    assert "How many fires are left, the next one included: 1-1000 (0 is taken as 1), or -1 = forever." in edit_help


def test_new_timer_in_a_retired_slot_drops_its_unknown_fields(project, example_session):
    raw = json.loads((example_session / "callbacks.json").read_text())
    raw["slots"][1]["x_agent_note"] = "retired"
    raw["slots"][0]["x_keep"] = [1, 2]
    raw["x_top"] = {"nested": True}
    (example_session / "callbacks.json").write_text(json.dumps(raw))
    invoke(project, "cb", "set", "fresh", "--every", "5")
    invoke(project, "cb", "edit", "0", "--message", "edited")
    after = json.loads((example_session / "callbacks.json").read_text())
    assert "x_agent_note" not in after["slots"][1]
    assert after["slots"][0]["x_keep"] == [1, 2] and after["x_top"] == {"nested": True}
    assert list(after)[-1] == "x_top"


def test_edit_rules(project, example_session):
    doc = json.loads(invoke(project, "cb", "edit", "0", "--message", "new text", "--json", now=NOW + 1000).out)
    assert doc["slot"]["fire_at_ms"] == 1789974102000  # message-only edit keeps the fire time
    assert doc["before"]["message"].startswith("Check the deploy job")
    doc = json.loads(invoke(project, "cb", "edit", "0", "--repeat", "5", "--json", now=NOW + 2000).out)
    assert doc["slot"]["fire_at_ms"] == 1789974102000 and doc["slot"]["repeat_count"] == 5
    doc = json.loads(invoke(project, "cb", "edit", "0", "--every", "45s", "--json", now=NOW + 3000).out)
    assert doc["slot"]["fire_at_ms"] == NOW + 3000 + 45_000
    doc = json.loads(invoke(project, "cb", "edit", "0", "--every", "45s", "--first-in", "0", "--json",
                            now=NOW + 4000).out)
    assert doc["slot"]["fire_at_ms"] == NOW + 4000
    assert invoke(project, "cb", "edit", "0").code == 2  # nothing to change


def test_pause_and_resume_rebase_overdue_slots(project, example_session):
    doc = json.loads(invoke(project, "cb", "pause", "--json").out)
    assert doc["paused"] is True and doc["text"] == "Callbacks paused." and doc["rebased"] == []
    listing = invoke(project, "cb", "list").out
    assert listing.endswith("Paused.\n")
    later = NOW + 20_000  # slot 0 (fire at NOW+12s) is now overdue, slot 3 (NOW+60s) is not
    doc = json.loads(invoke(project, "cb", "resume", "--json", now=later).out)
    slots = {s["id"]: s for s in json.loads((example_session / "callbacks.json").read_text())["slots"]}
    assert doc["rebased"] == [0] and slots[0]["fire_at_ms"] == later + 30_000
    assert slots[3]["fire_at_ms"] == 1789974150000


def test_next_preview(project, example_session):
    doc = json.loads(invoke(project, "cb", "next", "-n", "4", "--json").out)
    assert doc["fires"] == [
        {"slot": 0, "at_ms": 1789974102000, "fire_no": 1, "remaining_after": 38, "overdue": False, "idle_only": True},
        {"slot": 0, "at_ms": 1789974132000, "fire_no": 2, "remaining_after": 37, "overdue": False, "idle_only": True},
        {"slot": 3, "at_ms": 1789974150000, "fire_no": 1, "remaining_after": -1, "overdue": False, "idle_only": True},
        {"slot": 0, "at_ms": 1789974162000, "fire_no": 3, "remaining_after": 36, "overdue": False, "idle_only": True},
    ]
    overdue = json.loads(invoke(project, "cb", "next", "--slot", "0", "-n", "2", "--json", now=NOW + 15_000).out)
    assert overdue["fires"][0]["overdue"] is True and overdue["fires"][0]["at_ms"] == NOW + 15_000
    assert overdue["fires"][1]["at_ms"] == NOW + 45_000


def test_preview_counts_remaining_fires():
    doc = {"slots": [{"id": 2, "active": True, "message": "m", "delay_ms": 1000, "repeat_count": 2, "fire_at_ms": 10}]}
    assert [r["remaining_after"] for r in preview_fires(doc, 0, 10)] == [1, 0]


def test_list_preview_rule():
    assert list_preview("short") == "short"
    assert list_preview("a" * 80) == "a" * 70 + "..."
    assert list_preview("x" * 69 + " tail of the message") == "x" * 69 + "..."


def test_missing_file_warns_then_is_created_by_link(project):
    folder = project.session(live=False)
    listing = project.run("cb", "list", "--json")
    assert listing.json()["file_exists"] is False and listing.json()["text"] == "No active callbacks."
    assert f"sxctl: warning: no callbacks.json in session {folder.name}; agents older" in listing.err
    created = project.run("cb", "set", "first", "--every", "10")
    assert created.code == 0 and "warning: no callbacks.json" in created.err
    doc = json.loads((folder / "callbacks.json").read_text())
    assert list(doc) == ["rev", "updated_ms", "paused", "slots"] and doc["rev"] == 1 and doc["paused"] is False
    assert stat.S_IMODE((folder / "callbacks.json").stat().st_mode) == 0o600


def test_existing_file_mode_is_kept(project, example_session):
    os.chmod(example_session / "callbacks.json", 0o644)
    invoke(project, "cb", "set", "x", "--every", "5")
    assert stat.S_IMODE((example_session / "callbacks.json").stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "the top level is not an object"),
        (b'{"rev": -1, "slots": []}', '"rev" is not a non-negative integer'),
        (b'{"rev": "12", "slots": []}', '"rev" is not a non-negative integer'),
        (b'{"rev": 1, "slots": {}}', '"slots" is not an array'),
        (b'{"rev": 1, "slots": [3]}', "slots[0] is not an object with an integer id"),
        (b'{"rev": 1, "slots": [{"id": "0"}]}', "slots[0] is not an object with an integer id"),
        (b'{"rev": 1, "slots": [{"id": 1, "active": false}, {"id": 1, "active": false}]}', "slot id 1 appears twice"),
        (b'{"rev": 1, "slots": [{"id": 0, "active": true, "message": 5, "delay_ms": 1000, '
         b'"repeat_count": 1, "fire_at_ms": 0}]}', '"message" is not a str'),
        (b'{"rev": 1, "slots": [{"id": 0, "message": "m", "delay_ms": 1000, "repeat_count": 3}]}',
         '"fire_at_ms" is not a int'),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_corrupt_files_are_exit_5_and_left_byte_for_byte(project, content, reason):
    folder = project.session(live=False)
    path = folder / "callbacks.json"
    path.write_bytes(content)
    for args in (["cb", "list"], ["cb", "set", "x", "--every", "5"], ["cb", "cancel-all"], ["cb", "pause"],
                 ["cb", "next"]):
        result = project.run(*args)
        assert result.code == 5, (args, result.err)
        assert result.err.strip().splitlines()[-1] == f"sxctl: invalid data in {path}: {reason}" or \
            reason in result.err.strip().splitlines()[-1]
        assert "Traceback" not in result.err
        assert path.read_bytes() == content
    assert sorted(p.name for p in folder.iterdir()) in (
        ["callbacks.json", "stats.json"], [".sxctl-callbacks.lock", "callbacks.json", "stats.json"])


def test_lenient_reading_tolerates_what_the_spec_allows(project):
    folder = project.session(live=False)
    (folder / "callbacks.json").write_text(json.dumps({
        "slots": [{"id": 5, "active": False, "message": 123}, {"id": 42, "odd": True},
                  {"id": 0, "message": "implicitly active", "delay_ms": 5000, "repeat_count": 2, "fire_at_ms": 1}],
    }))
    doc = project.run("cb", "list", "--json").json()
    assert [s["id"] for s in doc["slots"]] == [0] and doc["rev"] == 0
    assert project.run("cb", "set", "x", "--every", "5").code == 0
    after = json.loads((folder / "callbacks.json").read_text())
    assert {"id": 42, "odd": True} in after["slots"] and after["rev"] == 1
    assert {"id": 5, "active": False, "message": 123} in after["slots"]


def test_lost_update_is_reported_not_hidden(project, example_session):
    """An agent that writes from a stale state right after sxctl's write: exit 4 lost_update."""
    stale = (example_session / "callbacks.json").read_bytes()

    class AgentClock(FakeClock):
        fired = False

        def sleep(self, seconds):
            super().sleep(seconds)
            if not self.fired and json.loads((example_session / "callbacks.json").read_text())["rev"] == 13:
                self.fired = True
                doc = json.loads(stale)
                doc["rev"] = 14  # the agent's next revision, built from what it read before sxctl wrote
                (example_session / "callbacks.json").write_text(json.dumps(doc, indent=2))

    result = invoke(project, "cb", "set", "will be lost", "--every", "5", "--json", clock=AgentClock(NOW))
    assert result.code == 4
    assert json.loads(result.out)["error"]["code"] == "lost_update"
    kept = invoke(project, "cb", "set", "survives", "--every", "5", "--json", clock=FakeClock(NOW))
    assert json.loads(kept.out)["verified"] is True


def test_verification_only_for_live_sessions(project):
    project.session(live=False)
    doc = project.run("cb", "set", "x", "--every", "5", "--json").json()
    assert doc["verified"] is None


def test_core_api_with_a_fake_clock(project):
    project.session(live=False)
    clock = FakeClock(NOW)
    session = select_session(project.root, environ={}, clock=clock)
    result = set_timer(session, "api", 60_000, repeat=-1, options=WriteOptions(clock=clock))
    assert result.outcome["fire_at_ms"] == NOW + 60_000 and result.rev == 1 and result.created


# --- worktrees -----------------------------------------------------------------------------------

def test_worktree_dual_write_and_higher_rev_wins(project, worktree_pair):
    wt, worktree, mirror = worktree_pair
    shutil.copy(EXAMPLES / "callbacks.json", worktree / "callbacks.json")
    shutil.copy(EXAMPLES / "callbacks.json", mirror / "callbacks.json")
    result = project.run("cb", "set", "both copies", "--every", "10", "--json", cwd=wt)
    assert result.code == 0, result.err
    assert (worktree / "callbacks.json").read_bytes() == (mirror / "callbacks.json").read_bytes()
    assert json.loads((mirror / "callbacks.json").read_text())["rev"] == 13
    # from the main checkout, the mirror is selected and the worktree copy is still written first
    from_main = project.run("cb", "cancel", "1", "--json")
    assert from_main.code == 0 and from_main.json()["file"] == str(worktree / "callbacks.json")
    assert (worktree / "callbacks.json").read_bytes() == (mirror / "callbacks.json").read_bytes()
    # the agent wrote the mirror last with a higher rev: it wins the read, and the write goes above it
    doc = json.loads((mirror / "callbacks.json").read_text())
    doc["rev"] = 40
    (mirror / "callbacks.json").write_text(json.dumps(doc, indent=2))
    assert project.run("cb", "list", "--json", cwd=wt).json()["rev"] == 40
    assert project.run("cb", "pause", "--json", cwd=wt).json()["rev"] == 41
    assert json.loads((worktree / "callbacks.json").read_text())["rev"] == 41


def test_mirror_ahead_of_the_new_write_is_skipped_with_a_warning(project, worktree_pair, monkeypatch):
    from sxctl.callbacks import protocol  # where write_table looks the mirror writer up

    wt, worktree, mirror = worktree_pair
    shutil.copy(EXAMPLES / "callbacks.json", worktree / "callbacks.json")
    real_write = protocol._write_mirror

    def agent_jumps_ahead(path, data, new_rev, now, report):
        doc = json.loads(data)
        doc["rev"] = new_rev + 5
        path.write_text(json.dumps(doc))
        return real_write(path, data, new_rev, now, report)

    monkeypatch.setattr(protocol, "_write_mirror", agent_jumps_ahead)
    clock = FakeClock(NOW)
    session = select_session(wt, environ={}, clock=clock)
    from sxctl.report import Reporter

    report = Reporter()
    result = set_timer(session, "x", 5000, options=WriteOptions(clock=clock, report=report))
    assert result.mirror_skipped is True
    assert json.loads((mirror / "callbacks.json").read_text())["rev"] == 18
    assert any("newer rev than 13" in w for w in report.warnings)


def test_create_by_link_never_clobbers_a_file_the_agent_created_meanwhile(project, monkeypatch):
    from sxctl import fsio

    folder = project.session(live=False)
    agent_doc = {"rev": 7, "updated_ms": NOW, "paused": False,
                 "slots": [{"id": 0, "active": True, "message": "agent's own", "delay_ms": 5000,
                            "repeat_count": 3, "fire_at_ms": NOW}]}
    real_refuse = fsio.refuse_symlink
    created = []

    def agent_creates_first(target):
        if os.path.basename(target) == "callbacks.json" and not created:
            created.append(True)
            target.write_text(json.dumps(agent_doc))  # lands between sxctl's check and its link
        real_refuse(target)

    monkeypatch.setattr(fsio, "refuse_symlink", agent_creates_first)
    clock = FakeClock(NOW)
    result = set_timer(select_session(project.root, environ={}, clock=clock), "mine", 10_000,
                       options=WriteOptions(clock=clock))
    after = json.loads((folder / "callbacks.json").read_text())
    assert created and result.rev == 8 and after["rev"] == 8
    assert after["slots"][0]["message"] == "agent's own" and after["slots"][1]["message"] == "mine"


@pytest.mark.real_time
def test_killed_writer_leaves_the_old_file_and_a_temp_that_a_later_write_removes(project, example_session):
    before = (example_session / "callbacks.json").read_bytes()
    result = project.run("--session", SID, "cb", "set", "never lands", "--every", "5",
                         "--fault-inject", "before-rename")
    assert result.code == 99
    assert (example_session / "callbacks.json").read_bytes() == before
    temps = list(example_session.glob("callbacks.json.sxctl-*.tmp"))
    assert len(temps) == 1 and b"never lands" in temps[0].read_bytes()
    assert project.run("--session", SID, "cb", "set", "young temp stays", "--every", "5").code == 0
    assert temps[0].exists()
    old = os.stat(temps[0]).st_mtime - 7200
    os.utime(temps[0], (old, old))
    assert project.run("--session", SID, "cb", "set", "old temp goes", "--every", "5").code == 0
    assert not temps[0].exists()
    messages = {s["message"] for s in json.loads((example_session / "callbacks.json").read_text())["slots"]}
    assert {"young temp stays", "old temp goes"} <= messages


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_while_a_timer_is_written_says_it_was_written(project, monkeypatch, signum):
    """Ctrl-C or SIGTERM during `callbacks set` armed the timer and said "interrupted" (or nothing):
    a script that set it again armed it twice."""
    import signal

    from sxctl import faults

    project.session(live=False)
    monkeypatch.setattr(faults, "hit", lambda point: point == "before-rename"
                        and os.kill(os.getpid(), getattr(signal, signum)))
    result = project.run("cb", "set", "check the build", "--every", "30s", "--json")
    assert result.code == 130, result.out
    doc = result.json()
    assert doc["error"]["code"] == "interrupted" and doc["rev"] == 1
    assert doc["error"]["message"].startswith("interrupted: the change was written to ")
    monkeypatch.undo()
    [armed] = project.run("cb", "list", "--json").json()["slots"]
    assert armed["message"] == "check the build"


# --- an edit the running agent ignores ------------------------------------------------------------

@pytest.mark.real_time
def test_a_hand_edit_without_a_new_rev_is_named_everywhere_until_published(project, agents):
    """The agent adopts callbacks.json only when its rev changes: a hand edit that kept rev was
    ignored while `callbacks list` and `status` showed it and `doctor` called the file valid. Each
    now says so with the fix, `callbacks publish`, after which the agent runs the edited timer."""
    agent = agents(project)
    table = agent.dir / "callbacks.json"
    minute_ago = now_ms() - 60_000  # the table was written a minute ago ...
    written = project.run("cb", "set", "old text", "--every", "1h", "--json", clock=FakeClock(minute_ago))
    assert written.code == 0 and written.json()["rev"] == 2, written.err
    agent.wait_for(lambda e: e["event"] == "callbacks_adopted" and e["rev"] == 2)
    doc = json.loads(table.read_text())
    doc["slots"][0].update(message="new text", fire_at_ms=minute_ago)  # ... and is edited now: due, same rev
    table.write_text(json.dumps(doc, indent=2))

    listed = project.run("cb", "list", "--json")
    assert listed.code == 0 and listed.json()["unpublished_edit"]["rev"] == 2, listed.out
    assert f"warning: {table} changed at " in listed.err and "without a new rev" in listed.err
    assert listed.err.rstrip().endswith("fix: sxctl callbacks publish"), listed.err
    [problem] = [p for p in project.run("status", "--json").json()["problems"] if p["code"] == "timer_edit_not_adopted"]
    assert "the running agent adopts the table only when its rev changes" in problem["message"]
    doctor = project.run("doctor", "--json")
    [check] = [c for c in doctor.json()["checks"] if c["check"] == "timers"]
    assert doctor.code == 9 and check["status"] == "fail" and "without a new rev" in check["message"], check
    assert check["fix"].startswith("sxctl callbacks publish   #")
    assert not agent.named("turn_start")  # the due timer of the edit never fired: the agent ignores it

    published = project.run("cb", "publish", "--json")
    assert published.code == 0 and published.json()["rev"] == 3 and published.json()["verified"] is True
    assert published.json()["text"] == "Published callbacks.json as rev 3."
    agent.wait_for(lambda e: e["event"] == "turn_start" and e["text"] == "new text")
    after = project.run("cb", "list", "--json")
    assert after.json()["unpublished_edit"] is None and "without a new rev" not in after.err
    [check] = [c for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "timers"]
    assert check["status"] == "ok", check


def test_only_a_live_agent_ignores_an_edit_and_publish_refuses_what_the_tool_would(project):
    """No live agent: the next one reads the table as it is, so nothing is said. `publish`
    refuses an active slot the agent's tool never writes (exit 2, naming it), writing nothing."""
    folder = project.session(live=False)
    assert project.run("cb", "set", "x", "--every", "1m", clock=FakeClock(now_ms() - 3_600_000)).code == 0
    table = folder / "callbacks.json"
    doc = json.loads(table.read_text())
    doc["slots"][0]["delay_ms"] = 500
    table.write_text(json.dumps(doc, indent=2))
    listed = project.run("cb", "list", "--json")
    assert listed.json()["unpublished_edit"] is None and "without a new rev" not in listed.err
    before = table.read_bytes()
    refused = project.run("-q", "cb", "publish")
    assert refused.code == 2 and refused.err == (
        f"sxctl: nothing published: slot 0 of {folder / 'callbacks.json'}: delay_seconds must be between 1 and 3600 "
        "(got 0.5)\n"), refused.err
    assert table.read_bytes() == before


@pytest.mark.parametrize("linked", [".scorpiox", ".scorpiox/sessions"])
def test_a_timer_is_never_written_through_a_link_on_the_way_down_from_the_project(project, tmp_path, linked):
    """`callbacks set`, `cancel` and `publish` wrote another folder's callbacks.json through a
    linked .scorpiox (or sessions folder) where `inbox send` refused: exit 5, nothing written."""
    project.session()
    assert project.run("callbacks", "set", "before", "--every", "1h", "--no-verify").code == 0
    other = tmp_path / "other"
    shutil.copytree(project.root / ".scorpiox", other / ".scorpiox", symlinks=True)
    before = tree(other)
    shutil.rmtree(project.root / linked)
    (project.root / linked).symlink_to(other / linked)
    for args in (("callbacks", "set", "via link", "--every", "1h", "--no-verify"), ("callbacks", "cancel-all"),
                 ("callbacks", "publish"), ("inbox", "send", "via link", "--no-wait")):
        result = project.run(*args, "--json")
        assert result.code == 5 and "symbolic link" in result.json()["error"]["message"], (args, result.out)
    assert tree(other) == before

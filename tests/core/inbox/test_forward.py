"""Messages and timers stranded by an agent restart: `inbox forward`, `callbacks move`, keys that
identify a message across the project's sessions, and a `--wait` that says no agent is live."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sxctl import faults
from sxctl.clock import FakeClock
from tests.conftest import forks, now_ms, tree

OLD = "2026_09_21_quiet_euler"
NEW = "2026_09_21_brave_curie"
NEVER = "2026_09_21_empty_folder"  # a session folder no agent was ever seen in (no stats.json)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x07" * 48


def inbox_of(folder: Path) -> Path:
    return folder / "inbox"


def pending(folder: Path) -> list[str]:
    """The pending message names of a session, in the order the agent reads them."""
    return sorted((p.name for p in inbox_of(folder).glob("*.json")), key=os.fsencode) if inbox_of(folder).is_dir() else []


def go_stale(folder: Path) -> None:
    stats = json.loads((folder / "stats.json").read_text())
    stats["updated_ms"] = now_ms() - 120_000
    (folder / "stats.json").write_text(json.dumps(stats))


def rotate(project, old: Path) -> Path:
    """The agent of `old` stopped (its stats.json goes stale) and a new one runs in NEW."""
    go_stale(old)
    return project.session(NEW, live=True)


def strand_three(project, tmp_path) -> tuple[Path, Path, dict[str, dict]]:
    """Three messages sent to OLD while it was live (one with an image, one --priority 0, one
    --key), then the restart: OLD stale, NEW live."""
    old = project.session(OLD, live=True)
    png = tmp_path / "shot.png"
    png.write_bytes(PNG)
    sent = {
        "image": project.run("inbox", "send", "look at this", "--image", str(png), "--no-wait", "--json").json(),
        "urgent": project.run("inbox", "send", "urgent", "--priority", "0", "--no-wait", "--json").json(),
        "keyed": project.run("inbox", "send", "nightly", "--key", "k-1", "--no-wait", "--json").json(),
    }
    return old, rotate(project, old), sent


def key_records(folder: Path) -> list[dict]:
    keys = inbox_of(folder) / ".keys"
    return [json.loads(p.read_text()) for p in sorted(keys.glob("*.json"))] if keys.is_dir() else []


# --- inbox forward -----------------------------------------------------------------------------

def test_forward_moves_each_message_whole_in_order_with_its_image_and_keys(project, tmp_path):
    old, new, sent = strand_three(project, tmp_path)
    before = {name: (inbox_of(old) / name).read_bytes() for name in pending(old)}
    image_stem = sent["image"]["stem"]
    result = project.run("inbox", "forward", "--json")
    doc = result.json()
    assert result.code == 0, result.err
    assert (doc["session"], doc["sources"], doc["dry_run"], doc["skipped"]) == (NEW, [OLD], False, [])
    order = [m["stem"] for m in doc["forwarded"]]
    assert order == [name[:-5] for name in before] and order[0] == sent["urgent"]["stem"]  # priority first
    assert [m["to_stem"] for m in doc["forwarded"]] == order  # stems (and their order) kept
    assert {m["stem"]: (m["image"], m["keys"]) for m in doc["forwarded"]} == {
        image_stem: ("png", []), sent["urgent"]["stem"]: (None, []), sent["keyed"]["stem"]: (None, ["k-1"])}
    # byte for byte in the new inbox, nothing left pending in the old one
    assert {name: (inbox_of(new) / name).read_bytes() for name in pending(new)} == before
    assert pending(old) == []
    assert (inbox_of(new) / f"{image_stem}.png").read_bytes() == PNG
    assert not (inbox_of(old) / f"{image_stem}.png").exists()
    assert not list(inbox_of(new).glob("*.tmp")) and not list((inbox_of(old) / ".forwarding").iterdir())
    [record] = key_records(new)
    assert record["stem"] == sent["keyed"]["stem"] and record["moved_from"] == {"session": OLD,
                                                                                "stem": sent["keyed"]["stem"]}
    # the key names the forwarded message: a re-send is a duplicate pointing at it
    again = project.run("inbox", "send", "nightly", "--key", "k-1", "--no-wait", "--json")
    dup = again.json()
    assert again.code == 0 and dup["duplicate"] is True and (dup["session"], dup["stem"]) == (NEW, sent["keyed"]["stem"])
    assert dup["path"] == str(inbox_of(new) / f"{sent['keyed']['stem']}.json") and dup["state"] == "pending"
    assert dup["forwarded_from"] == {"session": OLD, "stem": sent["keyed"]["stem"]} and "stranded" not in dup
    assert "forwarded from " + OLD in project.run("inbox", "send", "nightly", "--key", "k-1", "--no-wait").out
    assert len(pending(new)) == 3
    # nothing is left to forward; the old session says where its message went
    assert project.run("inbox", "forward", "--json").json()["forwarded"] == []
    shown = project.run("--session", OLD, "inbox", "show", sent["keyed"]["stem"], "--json")
    assert shown.code == 3 and shown.json()["error"]["moved_to"] == {"session": NEW, "stem": sent["keyed"]["stem"]}


def test_forward_human_output_and_dry_run_that_moves_nothing(project, tmp_path):
    old, new, sent = strand_three(project, tmp_path)
    snapshot = tree(project.root / ".scorpiox")
    dry = project.run("inbox", "forward", "--dry-run")
    assert dry.code == 0
    assert dry.out.splitlines() == [
        f"would forward {sent['urgent']['stem']} from {OLD} to {NEW}",
        f"would forward {sent['image']['stem']} from {OLD} to {NEW} (image png)",
        f"would forward {sent['keyed']['stem']} from {OLD} to {NEW} (key k-1)",
        f"would forward 3 message(s) from 1 session(s) to {NEW} (dry run: nothing moved)",
    ]
    assert tree(project.root / ".scorpiox") == snapshot and not (old / ".sxctl-forward.lock").exists()
    doc = project.run("inbox", "forward", "--dry-run", "--json").json()
    assert {m["outcome"] for m in doc["forwarded"]} == {"would_forward"} and doc["dry_run"] is True
    assert tree(project.root / ".scorpiox") == snapshot
    real = project.run("inbox", "forward")
    assert real.out.splitlines()[-1] == f"forwarded 3 message(s) from 1 session(s) to {NEW}"
    assert project.run("inbox", "forward").out == (
        f"nothing to forward: no pending message in a session other than {NEW} that is not live\n")


def test_consumed_and_retracted_messages_are_left_alone(project):
    old = project.session(OLD, live=True)
    read = project.run("inbox", "send", "read already", "--no-wait", "--json").json()["stem"]
    (inbox_of(old) / "done").mkdir()
    os.rename(inbox_of(old) / f"{read}.json", inbox_of(old) / "done" / f"{read}.json")  # the agent's claim
    withdrawn = project.run("inbox", "send", "withdrawn", "--no-wait", "--json").json()["stem"]
    assert project.run("inbox", "retract", withdrawn).code == 0
    waiting = project.run("inbox", "send", "waiting", "--no-wait", "--json").json()["stem"]
    new = rotate(project, old)
    kept = {path: data for path, data in tree(inbox_of(old)).items() if path.startswith(("done/", "retracted/"))}
    doc = project.run("inbox", "forward", "--json").json()
    assert [m["stem"] for m in doc["forwarded"]] == [waiting] and doc["skipped"] == []
    assert {p: d for p, d in tree(inbox_of(old)).items() if p.startswith(("done/", "retracted/"))} == kept
    assert pending(new) == [f"{waiting}.json"] and not (inbox_of(new) / "done").exists()


def test_forward_needs_a_live_session_unless_one_is_named(project):
    old = project.session(OLD, live=False)
    other = project.session("2026_09_20_cool_newton", live=False)
    stem = project.run("--session", OLD, "inbox", "send", "x", "--no-wait", "--json").json()["stem"]
    snapshot = tree(project.root / ".scorpiox")
    refused = project.run("inbox", "forward", "--json")
    assert refused.code == 3 and refused.json()["error"]["code"] == "session_not_found"
    assert "--to SESSION" in refused.json()["error"]["message"]
    assert tree(project.root / ".scorpiox") == snapshot
    named = project.run("inbox", "forward", "--to", other.name, "--json")
    assert named.code == 0 and [m["stem"] for m in named.json()["forwarded"]] == [stem]
    assert f"session {other.name} is stale: no agent reads the forwarded messages" in named.err
    assert pending(other) == [f"{stem}.json"] and pending(old) == []


@pytest.mark.parametrize(("args", "code", "error"), [
    (["--from", NEW], 2, "is the session to forward to"),
    (["--from", "2026_09_20_cool_newton"], 4, "agent_owns_session"),
    (["--from", "2026_01_01_nowhere"], 3, "session_not_found"),
    (["--from", "../x"], 2, "invalid session id"),
    (["--to", "../x"], 2, "invalid session id"),
    (["--session", OLD], 2, "use --from SESSION and --to SESSION"),
])
def test_forward_refuses_what_it_must_not_move(project, args, code, error):
    old = project.session(OLD, live=True)
    project.run("inbox", "send", "x", "--no-wait")
    rotate(project, old)
    project.session("2026_09_20_cool_newton", live=True, age_ms=2000)  # a second live agent
    snapshot = tree(project.root / ".scorpiox")
    result = project.run("inbox", "forward", *args, "--json")
    assert result.code == code and error in json.dumps(result.json()["error"]), result.out
    assert tree(project.root / ".scorpiox") == snapshot


def test_a_taken_stem_is_bumped_for_sxctl_stems_and_refused_for_chosen_ones(project):
    old = project.session(OLD, live=True)
    clock = FakeClock(now_ms())
    first = project.run("inbox", "send", "from the old session", "--priority", "3", "--no-wait", "--json",
                        clock=clock).json()["stem"]
    chosen = project.run("inbox", "send", "deploy", "--stem", "deploy", "--no-wait", "--json").json()["stem"]
    new = rotate(project, old)
    same = project.run("inbox", "send", "already in the new one", "--priority", "3", "--no-wait", "--json",
                       clock=clock).json()["stem"]
    assert same == first  # the same instant in both sessions
    project.run("inbox", "send", "another deploy", "--stem", "deploy", "--no-wait")
    dry = project.run("inbox", "forward", "--dry-run")  # says what would happen, not that it happened
    assert dry.code == 4 and dry.err.startswith("sxctl: 1 message(s) would be forwarded (dry run: nothing moved)")
    assert "1 would stay behind" in dry.err and pending(old) == sorted([f"{first}.json", "deploy.json"])
    result = project.run("inbox", "forward", "--json")
    doc = result.json()
    assert result.code == 4 and doc["ok"] is False and doc["error"]["code"] == "name_taken"
    assert f"deploy from {OLD} (name taken)" in doc["error"]["message"]
    [moved] = doc["forwarded"]
    assert moved["stem"] == first and moved["to_stem"] == first[:-9] + f"{int(first[-9:]) + 1:09d}"
    assert moved["to_stem"].startswith("03_") and sorted([first, moved["to_stem"]]) == [first, moved["to_stem"]]
    assert [(m["stem"], m["outcome"]) for m in doc["skipped"]] == [(chosen, "name_taken")]
    assert pending(old) == ["deploy.json"]  # stays where it was, whole
    assert json.loads((inbox_of(new) / f"{moved['to_stem']}.json").read_text())["text"] == "from the old session"
    human = project.run("inbox", "forward")
    assert human.code == 4 and human.err.startswith("sxctl: 0 message(s) forwarded to")


def test_a_message_the_old_agent_takes_meanwhile_is_not_forwarded(project, tmp_path, monkeypatch):
    """The move and the agent's claim are both renames of the pending file: whichever comes
    second finds nothing, so a message is read once, in one session."""
    old, new, sent = strand_three(project, tmp_path)
    (inbox_of(old) / "done").mkdir()
    claimed: list[str] = []

    def agent_claims(stem: str) -> None:  # the old agent's claim: the message, then its image
        claimed.append(stem)
        os.rename(inbox_of(old) / f"{stem}.json", inbox_of(old) / "done" / f"{stem}.json")
        if (inbox_of(old) / f"{stem}.png").exists():
            os.rename(inbox_of(old) / f"{stem}.png", inbox_of(old) / "done" / f"{stem}.png")

    real_hit = faults.hit

    def claim_at(point: str) -> None:  # right before the first message's move
        if point == "before-rename" and not claimed:
            agent_claims(sent["urgent"]["stem"])
        real_hit(point)

    monkeypatch.setattr(faults, "hit", claim_at)
    doc = project.run("inbox", "forward", "--from", OLD, "--json").json()
    # the first message (urgent) is claimed right before its move: the move finds nothing
    assert claimed == [sent["urgent"]["stem"]]
    assert [(m["stem"], m["outcome"]) for m in doc["skipped"]] == [(sent["urgent"]["stem"], "consumed")]
    assert [m["stem"] for m in doc["forwarded"]] == [sent["image"]["stem"], sent["keyed"]["stem"]]
    assert (inbox_of(old) / "done" / f"{sent['urgent']['stem']}.json").exists()
    assert not (inbox_of(new) / f"{sent['urgent']['stem']}.json").exists()
    # an image published in the new inbox before the claim is taken back with everything else
    old2 = project.session("2026_09_20_cool_newton", live=True)
    png = tmp_path / "other.png"
    png.write_bytes(PNG)
    stem = project.run("--session", old2.name, "inbox", "send", "mine", "--image", str(png), "--key", "k-2",
                       "--no-wait", "--json").json()["stem"]
    go_stale(old2)
    (inbox_of(old2) / "done").mkdir()

    def agent_claims2(point: str) -> None:
        if point == "before-rename":
            assert (inbox_of(new) / f"{stem}.png").read_bytes() == PNG  # published first
            os.rename(inbox_of(old2) / f"{stem}.json", inbox_of(old2) / "done" / f"{stem}.json")
            os.rename(inbox_of(old2) / f"{stem}.png", inbox_of(old2) / "done" / f"{stem}.png")

    monkeypatch.setattr(faults, "hit", agent_claims2)
    before_new = tree(inbox_of(new))
    doc = project.run("inbox", "forward", "--from", old2.name, "--json").json()
    assert [(m["stem"], m["outcome"]) for m in doc["skipped"]] == [(stem, "consumed")]
    assert tree(inbox_of(new)) == before_new  # no image, key record, temp or message left behind
    assert list((inbox_of(old2) / ".forwarding").iterdir()) == []


@pytest.mark.parametrize("point", ["sidecar-linked", "after-sidecar", "before-rename", "after-move"])
def test_forward_killed_at_a_fault_point_loses_and_doubles_nothing_and_the_next_run_finishes(project, tmp_path,
                                                                                              point):
    old, new, sent = strand_three(project, tmp_path)
    texts = sorted(["look at this", "urgent", "nightly"])

    def visible() -> list[str]:
        return sorted(json.loads((inbox_of(folder) / name).read_text())["text"]
                      for folder in (old, new) for name in pending(folder))

    crashed = project.run("inbox", "forward", "--fault-inject", point)
    assert crashed.code == 99, crashed.err  # the fault point fired: the process died there
    assert visible() == texts  # each message pending in exactly one session
    for folder in (old, new):  # wherever the image's message is, its image is beside it
        if (inbox_of(folder) / f"{sent['image']['stem']}.json").exists():
            assert (inbox_of(folder) / f"{sent['image']['stem']}.png").read_bytes() == PNG
    again = project.run("inbox", "forward", "--json")
    doc = again.json()
    assert again.code == 0 and doc["recovered"], doc  # the interrupted move was finished or undone
    assert {r["outcome"] for r in doc["recovered"]} == {"completed" if point == "after-move" else "undone"}
    assert pending(old) == [] and visible() == texts and len(pending(new)) == 3
    assert (inbox_of(new) / f"{sent['image']['stem']}.png").read_bytes() == PNG
    assert not list(inbox_of(old).glob("*.png")) and not list(inbox_of(new).glob("*.tmp"))
    assert list((inbox_of(old) / ".forwarding").iterdir()) == []
    dup = project.run("inbox", "send", "nightly", "--key", "k-1", "--no-wait", "--json").json()
    assert dup["duplicate"] is True and (dup["session"], dup["stem"]) == (NEW, sent["keyed"]["stem"])
    assert len(pending(new)) == 3


def test_recovery_of_a_move_that_did_not_arrive_puts_nothing_twice(project, tmp_path):
    """Killed after the image and the key record reached the target, before the move: while
    that is so, a key re-send points at the message where it still is."""
    old, new, sent = strand_three(project, tmp_path)
    assert project.run("inbox", "forward", "--fault-inject", "after-sidecar").code == 99
    assert (inbox_of(new) / f"{sent['image']['stem']}.png").exists()  # published, its message not moved
    assert project.run("inbox", "send", "nightly", "--key", "k-1", "--no-wait", "--json").json()["stem"] == \
        sent["keyed"]["stem"]
    dry = project.run("inbox", "forward", "--dry-run", "--json").json()
    assert [(r["stem"], r["outcome"]) for r in dry["recovered"]] == [(sent["image"]["stem"], "undone")]
    assert (inbox_of(new) / f"{sent['image']['stem']}.png").exists()  # a dry run repairs nothing


@pytest.mark.parametrize("point", ["sidecar-linked", "after-sidecar", "before-rename", "after-move"])
def test_a_rehome_killed_at_a_fault_point_is_finished_by_the_next_follow(project, tmp_path, point):
    """`--follow`'s re-home died mid-move; a keyed re-send with --wait --follow timed out (its
    move found the stem reserved) and dropped the crashed move's intent, so `inbox forward` then
    moved the message under another stem while the key record named the old one (exit 3). The
    next move of the message finishes or undoes the crashed one first, then moves it once."""
    old = project.session(OLD, live=True)
    png = tmp_path / "i.png"
    png.write_bytes(PNG)
    send = ("--session", OLD, "inbox", "send", "m", "--key", "K", "--image", str(png), "--follow")
    stem = project.run(*send, "--no-wait", "--json").json()["stem"]
    new = rotate(project, old)
    crashed = project.run(*send, "--wait", "25", "--fault-inject", point, clock=FakeClock(now_ms()))
    assert crashed.code == 99, crashed.err  # the re-home died at the fault point
    again = project.run(*send, "--wait", "4", "--json", clock=FakeClock(now_ms()))
    doc = again.json()
    assert again.code == 6 and (doc["session"], doc["stem"], doc["state"]) == (NEW, stem, "pending"), again.out
    assert pending(old) == [] and pending(new) == [f"{stem}.json"]
    assert (inbox_of(new) / f"{stem}.png").read_bytes() == PNG and not list(inbox_of(new).glob("*.tmp"))
    assert [r["stem"] for r in key_records(new)] == [stem]
    forward = project.run("inbox", "forward", "--json").json()  # killed after the commit: it finishes the move
    assert forward["forwarded"] == [] and [r["outcome"] for r in forward["recovered"]] == (
        ["completed"] if point == "after-move" else []), forward
    assert not list(inbox_of(old).glob("*.png")) and list((inbox_of(old) / ".forwarding").iterdir()) == []
    (inbox_of(new) / "done").mkdir()
    os.rename(inbox_of(new) / f"{stem}.json", inbox_of(new) / "done" / f"{stem}.json")  # the agent reads it
    done = project.run("inbox", "wait", "--key", "K", "--timeout", "1", "--json")
    assert done.code == 0 and (done.json()["state"], done.json()["stem"]) == ("consumed", stem), done.out


# --- keys across the project's sessions ---------------------------------------------------------

def test_a_key_resent_after_a_rotation_is_a_duplicate_of_the_stranded_message(project):
    old = project.session(OLD, live=True)
    first = project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait", "--json").json()
    new = rotate(project, old)
    again = project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait", "--json")
    doc = again.json()
    assert again.code == 0
    assert (doc["duplicate"], doc["stem"], doc["session"], doc["state"]) == (True, first["stem"], OLD, "pending")
    assert doc["path"] == first["path"] and doc["stranded"] is True and doc["session_source"] == "key"
    assert pending(new) == [] and pending(old) == [f"{first['stem']}.json"]
    assert f"sxctl inbox forward --from {OLD}" in again.err
    conflict = project.run("inbox", "send", "other text", "--key", "nightly", "--json")
    assert conflict.code == 4 and conflict.json()["error"]["code"] == "key_conflict"
    assert f"in session {OLD}" in conflict.json()["error"]["message"] and pending(new) == []


def test_a_key_whose_first_writer_died_before_a_restart_is_written_once(project):
    """The writer in the old session died before its rename; after the restart the key's message
    was written in the new session, and a send of the key to the old one completed a second."""
    old = project.session(OLD, live=True)
    assert project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait",
                       "--fault-inject", "before-rename").code == 99
    new = rotate(project, old)
    first = project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait", "--json").json()
    assert first["session"] == NEW and first["duplicate"] is False
    again = project.run("--session", OLD, "inbox", "send", "nightly report", "--key", "nightly", "--no-wait",
                        "--json", clock=FakeClock(now_ms() + 2_000))
    doc = again.json()
    assert again.code == 0 and (doc["duplicate"], doc["stem"], doc["session"]) == (True, first["stem"], NEW)
    assert pending(old) == [] and pending(new) == [f"{first['stem']}.json"]


def test_a_key_whose_message_was_read_in_the_old_session_stays_a_duplicate(project):
    old = project.session(OLD, live=True)
    stem = project.run("inbox", "send", "once", "--key", "once", "--no-wait", "--json").json()["stem"]
    (inbox_of(old) / "done").mkdir()
    os.rename(inbox_of(old) / f"{stem}.json", inbox_of(old) / "done" / f"{stem}.json")
    rotate(project, old)
    doc = project.run("inbox", "send", "once", "--key", "once", "--wait", "5", "--json").json()
    assert (doc["ok"], doc["duplicate"], doc["state"], doc["session"]) == (True, True, "consumed", OLD)
    assert "stranded" not in doc


def test_send_wait_timing_out_without_a_live_agent_says_so(project):
    project.session(OLD, live=False)
    result = project.run("inbox", "send", "anyone?", "--wait", "3", "--json", clock=FakeClock(now_ms()))
    doc = result.json()
    assert result.code == 6 and doc["error"]["code"] == "timeout"
    assert doc["agent_live"] is False and doc["live_session"] is None and doc["state"] == "pending"
    assert "no agent is live in session" in doc["error"]["message"]
    assert doc["error"]["reason"] == "no_live_agent"
    human = project.run("inbox", "send", "anyone?", "--wait", "3", clock=FakeClock(now_ms()))
    assert human.code == 6 and "still pending: no agent is live in session " + OLD in human.err
    # with another session live, it says how to get the message there (a pinned session the agent
    # left is refused before anything is written, test_superseded.py; one no agent was seen in is not)
    project.session(NEW, live=True)
    project.session(NEVER, live=None)
    pinned = project.run("--session", NEVER, "inbox", "send", "still?", "--wait", "3", "--json",
                         clock=FakeClock(now_ms()))
    doc = pinned.json()
    assert pinned.code == 6 and doc["live_session"] == NEW
    assert f"session {NEW} is live: `sxctl inbox forward --from {NEVER}` moves the message there" in \
        doc["error"]["message"]
    # a slow agent that is live is not reported as absent
    slow = project.run("--session", NEW, "inbox", "wait", doc["stem"], "--timeout", "1", "--json")
    assert slow.code == 3  # that stem is in OLD, not NEW
    live_wait = project.run("--session", NEW, "inbox", "send", "slow", "--wait", "0.3", "--json")
    assert live_wait.code == 6 and live_wait.json()["agent_live"] is True
    assert "no agent is live" not in live_wait.json()["error"]["message"]
    # … and the timeout says why nobody read it (an agent killed a moment ago still counts as live)
    assert f"the agent of session {NEW} counts as live (stats " in live_wait.json()["error"]["message"]
    assert "an agent that stopped less than 10 s ago" in live_wait.json()["error"]["message"]


# --- callbacks move ------------------------------------------------------------------------------

def _table(folder: Path) -> dict:
    return json.loads((folder / "callbacks.json").read_text())


def _active(folder: Path) -> list[tuple[str, int]]:
    return [(s["message"], s["delay_ms"]) for s in _table(folder)["slots"] if s.get("active")]


def test_callbacks_move_adds_to_the_live_table_then_cancels_at_the_source(project):
    old = project.session(OLD, live=True)
    for args in (["poll the deploy", "--every", "2m", "--repeat", "30"], ["check disk", "--every", "1h", "--repeat",
                                                                           "-1"]):
        assert project.run("cb", "set", *args, "--no-verify").code == 0
    new = rotate(project, old)
    assert project.run("cb", "set", "check disk", "--every", "1h", "--repeat", "-1", "--no-verify").code == 0
    before = _table(old)
    snapshot = tree(project.root / ".scorpiox")
    dry = project.run("cb", "move", "--dry-run", "--json").json()
    assert [(r["slot"], r["to_slot"], r["action"]) for r in dry["moved"]] == [(0, 1, "moved"), (1, 0, "already_there")]
    assert tree(project.root / ".scorpiox") == snapshot
    result = project.run("cb", "move", "--no-verify")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == f"Moved 1 callback into session {NEW}; 1 already there."
    assert f'"poll the deploy" from {OLD} to slot 1' in result.out and "already in slot 0" in result.out
    assert _active(new) == [("check disk", 3_600_000), ("poll the deploy", 120_000)] and _active(old) == []
    moved = _table(new)["slots"][1]
    original = before["slots"][0]
    assert {k: moved[k] for k in ("message", "delay_ms", "repeat_count", "fire_at_ms")} == {
        k: original[k] for k in ("message", "delay_ms", "repeat_count", "fire_at_ms")}
    assert moved["moved_from"] == {"session": OLD, "slot": 0, "rev": before["rev"]}
    assert _table(old)["slots"][0]["moved_to"] == {"session": NEW, "slot": 1}
    assert _table(old)["rev"] == before["rev"] + 1  # the revision protocol: rev only goes up
    again = project.run("cb", "move", "--json").json()
    assert again["moved"] == [] and again["text"] == "No active callbacks to move."


def test_callbacks_move_overwritten_by_the_live_agent_is_a_lost_update_and_the_timer_stays(project):
    """The live agent writes its older table over the move: exit 4, and the timer is still active
    in the old session (it is cancelled there only once it is safe in the new one)."""
    old = project.session(OLD, live=True)
    project.run("cb", "set", "poll the deploy", "--every", "2m", "--no-verify")
    new = rotate(project, old)
    project.run("cb", "set", "mine", "--every", "1m", "--no-verify")
    stale = (new / "callbacks.json").read_bytes()

    class AgentClock(FakeClock):
        wrote = False

        def sleep(self, seconds):  # the first sleep is the watch after the write
            super().sleep(seconds)
            if not self.wrote:
                self.wrote = True
                doc = json.loads(stale)
                doc["rev"] = json.loads((new / "callbacks.json").read_text())["rev"]
                (new / "callbacks.json").write_text(json.dumps(doc, indent=2))

    clock = AgentClock(now_ms())
    result = project.run("cb", "move", "--json", clock=clock)
    assert clock.wrote and result.code == 4 and result.json()["error"]["code"] == "lost_update"
    assert _active(old) == [("poll the deploy", 120_000)] and _active(new) == [("mine", 60_000)]
    again = project.run("cb", "move", "--json")
    assert again.code == 0 and again.json()["verified"] is True
    assert _active(new) == [("mine", 60_000), ("poll the deploy", 120_000)] and _active(old) == []


def test_callbacks_move_that_does_not_fit_writes_nothing(project):
    old = project.session(OLD, live=True)
    for n in range(2):
        project.run("cb", "set", f"old {n}", "--every", "1m", "--no-verify")
    new = rotate(project, old)
    for n in range(7):
        project.run("cb", "set", f"new {n}", "--every", "1m", "--no-verify")
    snapshot = tree(project.root / ".scorpiox")
    result = project.run("cb", "move", "--json")
    assert result.code == 4 and result.json()["error"]["code"] == "slots_full"
    assert result.json()["error"]["message"].startswith("Error: all callback slots full (max 8): ")
    assert "1 free slot(s) and moving needs 2" in result.json()["error"]["message"]
    assert tree(project.root / ".scorpiox") == snapshot
    assert len(_active(new)) == 7


def test_callbacks_move_killed_between_its_two_writes_is_finished_by_the_next(project):
    old = project.session(OLD, live=True)
    project.run("cb", "set", "poll the deploy", "--every", "2m", "--no-verify")
    new = rotate(project, old)
    crashed = project.run("cb", "move", "--no-verify", "--fault-inject", "after-move")
    assert crashed.code == 99
    assert _active(new) == _active(old) == [("poll the deploy", 120_000)]  # in both, never in none
    # the timer the agent carried over fires meanwhile: still the same timer, not a new one
    table = _table(new)
    table["slots"][0]["repeat_count"] -= 1
    table["rev"] += 1
    (new / "callbacks.json").write_text(json.dumps(table))
    doc = project.run("cb", "move", "--no-verify", "--json").json()
    assert [(r["slot"], r["to_slot"], r["action"]) for r in doc["moved"]] == [(0, 0, "already_there")]
    assert _active(new) == [("poll the deploy", 120_000)] and _active(old) == []
    assert _table(new)["slots"][0]["repeat_count"] == 19


def test_forward_offers_the_timers_it_does_not_move(project):
    old = project.session(OLD, live=True)
    project.run("cb", "set", "poll", "--every", "1m", "--no-verify")
    project.run("inbox", "send", "x", "--no-wait")
    new = rotate(project, old)
    result = project.run("inbox", "forward")
    assert f"session {OLD} also has 1 active timer(s): `sxctl callbacks move --from {OLD}` moves them" in result.err
    assert _active(old) == [("poll", 60_000)] and not (new / "callbacks.json").exists()


# --- hostile folders -------------------------------------------------------------------------------

def test_a_symlink_in_the_way_is_refused_and_nothing_moves(project, tmp_path):
    old = project.session(OLD, live=True)
    stem = project.run("inbox", "send", "x", "--no-wait", "--json").json()["stem"]
    rotate(project, old)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.json.sxctl-0.tmp").write_text("not sxctl's")  # what a clean-up of dead temps would take
    (elsewhere / "1796111313_609354967.json").write_text('{"stem": "1796111313_609354967", "to_session": "x"}')
    outside = tree(elsewhere)
    (inbox_of(old) / ".forwarding").symlink_to(elsewhere)
    for args in (["inbox", "forward", "--json"], ["inbox", "forward", "--dry-run", "--json"]):
        result = project.run(*args)
        assert result.code == 5 and "symbolic link" in result.json()["error"]["message"], args
    assert tree(elsewhere) == outside and pending(old) == [f"{stem}.json"]
    (inbox_of(old) / ".forwarding").unlink()
    new = project.root / ".scorpiox" / "sessions" / NEW
    (inbox_of(new) / ".keys").mkdir(parents=True, exist_ok=True)
    os.rmdir(inbox_of(new) / ".keys")
    (inbox_of(new) / ".keys").symlink_to(elsewhere)
    result = project.run("inbox", "forward", "--json")
    assert result.code == 5 and "symbolic link" in result.json()["error"]["message"]
    assert tree(elsewhere) == outside and pending(old) == [f"{stem}.json"] and pending(new) == []


def test_an_intent_that_points_outside_the_project_is_never_acted_on(project, tmp_path):
    old = project.session(OLD, live=True)
    stem = project.run("inbox", "send", "x", "--no-wait", "--json").json()["stem"]
    new = rotate(project, old)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "x.json.tmp").write_text("someone else's")
    (victim / "x.png").write_bytes(PNG)
    outside = tree(victim)
    (inbox_of(old) / ".forwarding").mkdir()
    for name, body in (("a", {"stem": "a", "to_session": "../../../victim", "to_stem": "x", "token": "0" * 16}),
                       ("b", {"stem": "b", "to_session": NEW, "to_stem": "../../../../victim/x", "token": "0" * 16})):
        (inbox_of(old) / ".forwarding" / f"{name}.json").write_text(json.dumps(body))
    doc = project.run("inbox", "forward", "--json").json()
    assert [m["stem"] for m in doc["forwarded"]] == [stem] and doc["recovered"] == []
    assert tree(victim) == outside and pending(new) == [f"{stem}.json"]


def test_a_message_that_is_not_a_regular_file_stays(project):
    old = project.session(OLD, live=True)
    project.run("inbox", "send", "x", "--no-wait")
    new = rotate(project, old)
    os.mkfifo(inbox_of(old) / "0_fifo.json")
    result = project.run("inbox", "forward", "--json")
    doc = result.json()
    assert result.code == 4 and [(m["stem"], m["outcome"]) for m in doc["skipped"]] == [("0_fifo", "not_regular")]
    assert len(doc["forwarded"]) == 1 and len(pending(new)) == 1
    assert (inbox_of(old) / "0_fifo.json").exists()


# --- end to end, with the reference agent ---------------------------------------------------------

@pytest.mark.slow
def test_a_restarted_agent_gets_what_was_sent_while_it_was_down_once_and_in_order(project, tmp_path):
    from tests.conftest import Agent

    first = Agent(project, "--turn-seconds", "0.1", session=OLD)
    try:
        assert project.run("cb", "set", "look again", "--every", "60", "--first-in", "3600", "--no-verify").code == 0
    finally:
        assert first.stop() == 0
    png = tmp_path / "shot.png"
    png.write_bytes(PNG)
    sent = [project.run("inbox", "send", "look at this", "--image", str(png), "--no-wait", "--json").json(),
            project.run("inbox", "send", "urgent", "--priority", "0", "--no-wait", "--json").json(),
            project.run("inbox", "send", "nightly", "--key", "k-9", "--no-wait", "--json").json()]
    assert {doc["session"] for doc in sent} == {OLD}
    timed_out = project.run("inbox", "send", "anyone there?", "--wait", "1", "--json")
    assert timed_out.code == 6 and timed_out.json()["agent_live"] is False
    assert "no agent is live in session " + OLD in timed_out.json()["error"]["message"]
    second = Agent(project, "--turn-seconds", "0.1", session=NEW)
    try:
        stems = sorted([doc["stem"] for doc in sent] + [timed_out.json()["stem"]], key=os.fsencode)
        dry = project.run("inbox", "forward", "--dry-run", "--json").json()
        assert [m["stem"] for m in dry["forwarded"]] == stems and len(pending(project.root / ".scorpiox" / "sessions"
                                                                              / OLD)) == 4
        doc = project.run("inbox", "forward", "--json").json()
        assert [m["stem"] for m in doc["forwarded"]] == stems
        taken = second.wait_for(lambda e: e["event"] == "inbox" and e["action"] != "invalid", count=4)
        assert [e["stem"] for e in taken] == stems  # once each, in the order they were sent (priority first)
        moved = project.run("cb", "move", "--json").json()
        assert [r["action"] for r in moved["moved"]] == ["moved"]
        second.wait_for(lambda e: e["event"] == "callbacks_adopted")
        done = second.dir / "inbox" / "done"
        assert (done / f"{sent[0]['stem']}.png").read_bytes() == PNG
        again = project.run("inbox", "send", "nightly", "--key", "k-9", "--no-wait", "--json").json()
        assert (again["duplicate"], again["session"], again["state"]) == (True, NEW, "consumed")
        assert again["forwarded_from"] == {"session": OLD, "stem": sent[2]["stem"]}
        assert len([e for e in second.events if e["event"] == "inbox"]) == 4  # nothing read twice
    finally:
        assert second.stop() == 0


# --- what follows a forwarded message ---------------------------------------------------------------

def _consume(folder: Path, stem: str) -> None:
    """The agent's claim: the message into done/."""
    (inbox_of(folder) / "done").mkdir(exist_ok=True)
    os.rename(inbox_of(folder) / f"{stem}.json", inbox_of(folder) / "done" / f"{stem}.json")


def test_a_forwarded_keyed_message_read_and_pruned_stays_a_duplicate_everywhere(project):
    old = project.session(OLD, live=True)
    stem = project.run("inbox", "send", "once only", "--key", "once", "--no-wait", "--json").json()["stem"]
    new = rotate(project, old)
    assert project.run("inbox", "forward").code == 0
    _consume(new, stem)
    assert project.run("inbox", "prune", "--older-than", "0").code == 0  # the read message is gone from done/
    for pin in ([], ["--session", OLD]):  # the live session, or the old one the key was first sent to
        doc = project.run(*pin, "inbox", "send", "once only", "--key", "once", "--no-wait", "--json").json()
        assert (doc["duplicate"], doc["state"], doc["stem"]) == (True, "consumed", stem), pin
    assert pending(old) == pending(new) == []


def test_a_cron_run_whose_message_was_forwarded_shows_where_it_was_read(project):
    old = project.session(OLD, live=True)
    assert project.run("cron", "add", "ping", "--in", "60", "--payload", "heartbeat-event", "--text", "ping").code == 0
    path = project.root / ".scheduler" / "cron-jobs.json"
    store = json.loads(path.read_text())
    store["jobs"][0]["schedule"]["atMs"] = store["jobs"][0]["lifecycle"]["nextRunAtMs"] = now_ms() - 500
    path.write_text(json.dumps(store, separators=(",", ":")) + "\n")
    [run] = project.run("cron", "tick", "--json").json()["runs"]
    stem = run["outcome"]["stem"]
    new = rotate(project, old)
    assert project.run("inbox", "forward").code == 0
    _consume(new, stem)
    [row] = project.run("cron", "runs", "ping", "--json").json()["runs"]
    assert row["consumption"]["state"] == "read" and row["consumption"]["forwardedTo"] == {"session": NEW,
                                                                                           "stem": stem}
    from sxctl.inbox.manage import evidence_for_key  # what `cron runs --evidence` says of an `unknown` run
    from sxctl.project import list_sessions

    for sessions in (list_sessions(project.root), list(reversed(list_sessions(project.root)))):
        evidence = evidence_for_key(project.root, sessions, row["executionId"])
        assert (evidence["session"], evidence["stem"], evidence["state"]) == (NEW, stem, "consumed")


@pytest.mark.slow
def test_two_keyed_sends_into_two_sessions_at_once_write_one_message(project):
    """Each session's key record excludes a second sender of that session only: two sends of one
    key, one pinned to the old session and one to the live one, both found no record and both
    wrote (and `inbox forward` then put both copies in front of the agent). They take turns on
    the project's key lock: one message per key, whichever session it landed in. (The other
    session is one no agent was seen in: a new message pinned to one whose agent left for NEW
    is refused, test_superseded.py.)"""
    project.session(OLD, live=None)
    project.session(NEW, live=True)
    env = project.env()
    for n in range(12):
        sends = [forks().start([*pin, "inbox", "send", f"n{n}", "--key", f"k{n}", "--no-wait", "-q"], cwd=project.root,
                               env=env) for pin in (["--session", OLD], ["--session", NEW])]
        for send in sends:
            result = send.wait()
            assert result.code == 0, result.err
    texts = [json.loads(path.read_text())["text"]
             for path in project.root.glob(".scorpiox/sessions/*/inbox/*.json")]
    assert sorted(texts) == sorted(f"n{n}" for n in range(12)), texts


def test_two_identical_timers_of_one_session_both_move(project):
    """Same message and period, different fire times: two timers. The second matched the copy of
    the first just written and was cancelled at the source as 'already there' (2 before, 1 after)."""
    old = project.session(OLD, live=True)
    assert project.run("cb", "set", "ping", "--every", "10m", "--repeat", "5", "--no-verify").code == 0
    assert project.run("cb", "set", "ping", "--every", "10m", "--repeat", "5", "--first-in", "5m",
                       "--no-verify").code == 0
    new = rotate(project, old)
    result = project.run("cb", "move", "--no-verify", "--json")
    assert result.code == 0, result.err
    assert [r["action"] for r in result.json()["moved"]] == ["moved", "moved"]
    assert _active(new) == [("ping", 600_000), ("ping", 600_000)] and _active(old) == []


@pytest.mark.parametrize("verb", ["wait", "send"])
def test_a_wait_follows_its_message_when_inbox_forward_moves_it(project, verb):
    """`inbox forward` is the fix status and doctor print; a CI step waiting on the message it
    moved (send --wait, inbox wait) exited 3 'not found' although the message was delivered. The
    wait follows the move and ends when the new session's agent reads it."""
    import subprocess
    import sys

    old = project.session(OLD, live=False)
    if verb == "wait":
        stem = project.run("--session", OLD, "inbox", "send", "x", "--no-wait", "--json").json()["stem"]
        argv = ["--session", OLD, "inbox", "wait", stem, "--timeout", "60", "--json", "-v"]
    else:
        argv = ["--session", OLD, "inbox", "send", "x", "--wait", "60", "--json", "-v"]
    proc = subprocess.Popen([sys.executable, "-m", "sxctl", *argv], cwd=project.root, env=project.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for line in proc.stderr:  # -v says when the wait begins
        if b"waiting for " in line:
            break
    [name] = pending(old)
    new = project.session(NEW, live=True)
    assert project.run("inbox", "forward").code == 0
    [moved] = pending(new)
    (inbox_of(new) / "done").mkdir()
    os.rename(inbox_of(new) / moved, inbox_of(new) / "done" / moved)  # the new agent reads it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert (doc["state"], doc["session"], doc["stem"]) == ("consumed", NEW, moved[:-5]), doc

"""`sxctl inbox list|show|retract|clean|prune`."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, tree

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _age(path: Path, seconds: float) -> None:
    """Make a file look `seconds` old (mtime; ctime cannot be set, so prune tests use --older-than 0)."""
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_list_pending_in_consumption_order_with_rows(project):
    folder = project.session(live=False)
    inbox = folder / "inbox"
    inbox.mkdir()
    for name in ("1789972202_061734902.json", "03_1789974090_125000000.json"):
        shutil.copy(EXAMPLES / "inbox" / name, inbox / name)
    (inbox / "1789972202_061734902.png").write_bytes(PNG)
    (inbox / "zz_broken.json").write_text("{not json")
    (inbox / "1789972203_000000000.json.tmp").write_text("partial")
    doc = project.run("inbox", "list", "--json").json()
    rows = doc["messages"]
    assert [r["stem"] for r in rows] == ["03_1789974090_125000000", "1789972202_061734902", "zz_broken"]
    first = rows[0]
    assert set(first) == {"stem", "state", "mode", "bytes", "mtime_ms", "ctime_ms", "image", "preview", "copy",
                          "expires_ms", "read_by_ms"}
    assert (first["mode"], first["bytes"], first["image"], first["copy"]) == ("interrupt", 79, None, "none")
    assert first["preview"] == "Stop: the release branch is frozen; do not push."
    assert rows[1]["image"] == "png"
    assert rows[2]["mode"] is None and rows[2]["invalid"].startswith("not valid JSON")
    human = project.run("inbox", "list").out.splitlines()
    assert human[0].split() == ["STEM", "STATE", "MODE", "BYTES", "IMAGE", "COPY", "PREVIEW"]
    assert "(invalid: not valid JSON" in human[3]


def test_list_done_and_retracted_newest_first_and_limit(project):
    folder = project.session(live=False)
    stems = [project.run("inbox", "send", f"m{i}", "--json").json()["stem"] for i in range(4)]
    inbox = folder / "inbox"
    (inbox / "done").mkdir()
    for stem in stems[:2]:
        (inbox / f"{stem}.json").rename(inbox / "done" / f"{stem}.json")
        time.sleep(0.02)  # distinct ctimes: the rename order is the consumption order
    assert project.run("inbox", "retract", stems[2]).code == 0
    doc = project.run("inbox", "list", "--all", "--json").json()
    assert [(r["stem"], r["state"]) for r in doc["messages"]] == [
        (stems[3], "pending"), (stems[1], "consumed"), (stems[0], "consumed"), (stems[2], "retracted")]
    assert [r["stem"] for r in project.run("inbox", "list", "--done", "--limit", "2", "--json").json()["messages"]] == [
        stems[3], stems[1]]
    assert project.run("inbox", "list", "--limit", "0").code == 2


def test_show_message_in_each_state(project):
    folder = project.session(live=False)
    doc = project.run("inbox", "send", "line one\nline two", "--mode", "queue", "--json").json()
    shown = project.run("inbox", "show", doc["stem"], "--json").json()
    assert shown["message"] == {"text": "line one\nline two", "mode": "queue"}
    assert shown["raw_bytes"] == '{"text":"line one\\nline two","mode":"queue"}\n'
    assert shown["state"] == "pending" and shown["path"] == doc["path"]
    human = project.run("inbox", "show", doc["stem"] + ".json")
    assert "state  pending" in human.out and human.out.endswith("line one\nline two\n")
    (folder / "inbox" / "done").mkdir()
    Path(doc["path"]).rename(folder / "inbox" / "done" / Path(doc["path"]).name)
    assert project.run("inbox", "show", doc["stem"], "--json").json()["state"] == "consumed"
    missing = project.run("inbox", "show", "1789972202_061734902", "--json")
    assert missing.code == 3 and missing.json()["error"]["code"] == "stem_not_found"
    assert project.run("inbox", "show", "../etc/passwd").code == 2


def test_retract_pending_then_again_then_consumed(project):
    folder = project.session(live=False)
    png = project.root.parent / "a.png"
    png.write_bytes(PNG)
    doc = project.run("inbox", "send", "withdraw me", "--image", str(png), "--key", "job-7", "--json").json()
    stem = doc["stem"]
    result = project.run("inbox", "retract", "--key", "job-7", "--json")
    assert result.code == 0
    assert result.json()["state"] == "retracted" and result.json()["already"] is False
    retracted = folder / "inbox" / "retracted"
    assert sorted(p.name for p in retracted.iterdir()) == [f"{stem}.json", f"{stem}.png"]
    assert oct(retracted.stat().st_mode & 0o777) == "0o700"
    again = project.run("inbox", "retract", stem, "--json")
    assert again.code == 0 and again.json()["already"] is True
    # the key now reports the retracted message, and waiting on it is exit 4
    dup = project.run("inbox", "send", "withdraw me", "--image", str(png), "--key", "job-7", "--json").json()
    assert dup["duplicate"] is True and dup["state"] == "retracted"
    assert project.run("inbox", "wait", stem, "--timeout", "1").code == 4

    consumed = project.run("inbox", "send", "too late", "--json").json()["stem"]
    (folder / "inbox" / "done").mkdir()
    (folder / "inbox" / f"{consumed}.json").rename(folder / "inbox" / "done" / f"{consumed}.json")
    late = project.run("inbox", "retract", consumed, "--json")
    assert late.code == 7 and late.json()["error"]["code"] == "too_late"
    assert late.json()["error"]["message"] == f"{consumed} was already consumed"
    assert project.run("inbox", "retract", "1789972202_061734902").code == 3
    assert project.run("inbox", "retract").code == 2
    assert project.run("inbox", "retract", "--key", "never-used").code == 3


def test_retract_refuses_to_overwrite_a_retracted_twin(project):
    folder = project.session(live=False)
    project.run("inbox", "send", "--stem", "dup", "x")
    (folder / "inbox" / "retracted").mkdir()
    (folder / "inbox" / "retracted" / "dup.json").write_text('{"text":"older","mode":"auto"}\n')
    before = tree(folder)
    result = project.run("inbox", "retract", "dup")
    assert result.code == 4 and tree(folder) == before


@pytest.mark.real_time
def test_clean_removes_only_sxctl_leftovers_older_than_the_age(project):
    folder = project.session(live=False)
    inbox = folder / "inbox"
    (inbox / ".keys").mkdir(parents=True)
    (inbox / "done").mkdir()
    leftovers = [
        inbox / "1789972202_061734902.json.tmp",
        inbox / "03_1789972202_061734902.png.tmp",
        inbox / "1789972202_061734903.png",  # orphan sidecar
        inbox / ".keys" / "abc.json.sxctl-0123.tmp",
    ]
    keep = [
        inbox / "1789972202_061734904.json",  # a pending message
        inbox / "1789972202_061734904.png",  # its sidecar
        inbox / "1789972202_061734905.gif",  # sidecar of a consumed message
        inbox / "done" / "1789972202_061734905.json",
        inbox / "deploy.json.tmp",  # user stem: not sxctl's pattern
        inbox / "notes.txt",
        inbox / "1789972202_061734906.json.tmp.bak",
        inbox / ".keys" / "abc.json",
    ]
    for path in leftovers + keep:
        path.write_bytes(b"x")
        _age(path, 7200)
    fresh = inbox / "1789972202_061734907.json.tmp"
    fresh.write_bytes(b"x")
    dry = project.run("inbox", "clean", "--dry-run", "--json").json()
    assert sorted(dry["removed"]) == sorted(map(str, leftovers)) and dry["dry_run"] is True
    assert all(p.exists() for p in leftovers)
    result = project.run("inbox", "clean")
    assert result.code == 0 and result.out.endswith("removed 4 file(s)\n")
    assert not any(p.exists() for p in leftovers)
    assert all(p.exists() for p in keep) and fresh.exists()
    assert project.run("inbox", "clean", "--older-than", "0", "--json").json()["removed"] == [str(fresh)]


@pytest.mark.real_time
def test_prune_consumed_messages_and_keys(project):
    folder = project.session(live=False)
    done_stem = project.run("inbox", "send", "old", "--key", "k-done", "--json").json()["stem"]
    pending_stem = project.run("inbox", "send", "still pending", "--key", "k-pending", "--json").json()["stem"]
    retracted_stem = project.run("inbox", "send", "withdrawn", "--json").json()["stem"]
    inbox = folder / "inbox"
    (inbox / "done").mkdir()
    (inbox / f"{done_stem}.json").rename(inbox / "done" / f"{done_stem}.json")
    project.run("inbox", "retract", retracted_stem)
    keep_all = project.run("inbox", "prune", "--json").json()  # default 7d: nothing is that old
    assert keep_all["removed"] == [] and keep_all["kept"] == 1
    doc = project.run("inbox", "prune", "--older-than", "0", "--keys", "--json").json()
    removed = set(doc["removed"])
    assert str(inbox / "done" / f"{done_stem}.json") in removed
    assert not any("retracted" in p for p in removed)
    key_files = {p.name for p in (inbox / ".keys").iterdir()}
    assert len(key_files) == 1  # the pending message's key stays
    assert (inbox / f"{pending_stem}.json").exists()
    doc = project.run("inbox", "prune", "--older-than", "0", "--retracted", "--json").json()
    assert doc["removed"] == [str(inbox / "retracted" / f"{retracted_stem}.json")]

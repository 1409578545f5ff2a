"""`sxctl inbox send` and `inbox wait`: bytes on disk, modes, caps, refusals, keys, waiting."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sxctl.clock import FakeClock
from sxctl.inbox.message import InboxMessage
from sxctl.inbox.request import SendRequest
from sxctl.inbox.sending import send
from sxctl.project import select_session
from tests.conftest import EXAMPLES, now_ms, tree

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32
GIF = b"GIF89a" + b"\x00" * 32
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 32
STEM = re.compile(r"^\d{10}_\d{9}$")


def inbox_of(folder: Path) -> Path:
    return folder / "inbox"


def test_message_bytes_match_the_examples(project):
    folder = project.session()
    result = project.run("inbox", "send", "--no-wait", "--stem", "1789972202_061734902", "--mode", "queue",
                         "Review the current project risks.")
    assert result.code == 0, result.err
    written = inbox_of(folder) / "1789972202_061734902.json"
    assert written.read_bytes() == (EXAMPLES / "inbox" / "1789972202_061734902.json").read_bytes()
    result = project.run("inbox", "send", "--no-wait", "--priority", "3", "--mode", "interrupt", "--json",
                         "Stop: the release branch is frozen; do not push.")
    doc = result.json()
    assert re.fullmatch(r"03_\d{10}_\d{9}", doc["stem"])
    example = (EXAMPLES / "inbox" / "03_1789974090_125000000.json").read_bytes()
    assert Path(doc["path"]).read_bytes() == example
    assert doc["bytes"] == len(example)
    names = sorted(p.name for p in inbox_of(folder).glob("*.json"))
    assert names[0] == doc["stem"] + ".json"  # priority messages sort first


def test_json_result_has_the_documented_keys_in_order(project):
    project.session()
    doc = project.run("inbox", "send", "hello", "--no-wait", "--json").json()
    example = json.loads((EXAMPLES / "inbox-send-result.json").read_text())
    assert list(doc) == list(example)
    assert doc["ok"] is True and doc["inbox"] is True and doc["consumed"] is False
    assert doc["state"] == "pending" and doc["duplicate"] is False and doc["key"] is None
    assert doc["session_source"] == "live" and doc["inbox_gate"] == "on" and doc["copy"] == "none"
    assert STEM.match(doc["stem"]) and doc["project"] == str(project.root)


def test_files_are_0600_and_folders_0700(project):
    folder = project.session()
    doc = project.run("inbox", "send", "hi", "--no-wait", "--key", "k1", "--image", str(_image(project, "a.png", PNG)),
                      "--json").json()
    inbox = inbox_of(folder)
    assert stat.S_IMODE(inbox.stat().st_mode) == 0o700
    assert stat.S_IMODE((inbox / ".keys").stat().st_mode) == 0o700
    for path in inbox.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert (inbox / f"{doc['stem']}.png").read_bytes() == PNG


def _image(project, name: str, data: bytes) -> Path:
    path = project.root.parent / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("name", "data", "ext"),
    [("shot.PNG", PNG, "png"), ("a.jpg", JPEG, "jpg"), ("a.jpeg", JPEG, "jpeg"), ("a.gif", GIF, "gif"),
     ("a.webp", WEBP, "webp")],
)
def test_image_sidecar_types(project, name, data, ext):
    folder = project.session()
    doc = project.run("inbox", "send", "--no-wait", "--json", "--image", str(_image(project, name, data)),
                      "look").json()
    assert doc["image"] == ext
    assert (inbox_of(folder) / f"{doc['stem']}.{ext}").read_bytes() == data


def test_image_only_message(project):
    folder = project.session()
    doc = project.run("inbox", "send", "--no-wait", "--json", "--image", str(_image(project, "a.png", PNG))).json()
    assert (inbox_of(folder) / f"{doc['stem']}.json").read_bytes() == b'{"mode":"auto"}\n'


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--stem", "../evil", "x"], 2, "invalid stem '../evil'"),
        (["--stem", ".hidden", "x"], 2, "invalid stem"),
        (["--stem", "-dash", "x"], 2, "invalid stem"),
        (["--stem", "a..b", "x"], 2, "invalid stem"),
        (["--stem", "a.json", "x"], 2, "invalid stem"),
        (["--stem", "a.tmp", "x"], 2, "invalid stem"),
        (["--stem", "a.png", "x"], 2, "invalid stem"),
        (["--stem", "a/b", "x"], 2, "invalid stem"),
        (["--stem", "x" * 65, "x"], 2, "invalid stem"),
        (["--priority", "3", "--stem", "abc", "x"], 2, "cannot be combined"),
        (["--priority", "10", "x"], 2, "--priority"),
        (["--mode", "later", "x"], 2, "--mode"),
        (["x" * 64_000], 2, "the inbox limit is 64000"),
        ([""], 2, "empty message"),
        (["--session", "../../etc", "x"], 2, "invalid session id"),
        (["--session", "2026_01_01_nobody", "x"], 3, "session 2026_01_01_nobody not found"),
        (["--key", "a\x01b", "x"], 2, "invalid --key"),
        (["--wait", "soon", "x"], 2, "Invalid value for '--wait': invalid duration 'soon'"),
    ],
)
def test_refusals_exit_with_one_line_and_write_nothing(project, args, code, needle):
    project.session()
    before = tree(project.root)
    result = project.run("inbox", "send", *args)
    assert result.code == code, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sxctl: ") and needle in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert tree(project.root) == before
    doc = project.run("inbox", "send", "--json", *args).json()
    assert doc["ok"] is False and doc["error"]["exit"] == code


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [("a.png", JPEG, "its content is not PNG"), ("a.gif", b"GIF90a", "its content is not GIF"),
     ("a.webp", b"RIFF\x00\x00\x00\x00WAVE", "its content is not WEBP"), ("a.bmp", b"BM", "unsupported type"),
     ("noext", PNG, "unsupported type")],
)
def test_wrong_image_type_is_refused(project, name, data, needle):
    project.session()
    image = _image(project, name, data)
    before = tree(project.root)
    result = project.run("inbox", "send", "x", "--image", str(image))
    assert result.code == 2 and needle in result.err
    assert tree(project.root) == before


def test_oversize_image_is_refused(project):
    project.session()
    image = _image(project, "big.png", PNG + b"\x00" * 8_000_000)
    result = project.run("inbox", "send", "x", "--image", str(image))
    assert result.code == 2 and "larger than 8000000 bytes" in result.err


def test_size_cap_is_on_the_encoded_bytes(project):
    folder = project.session()
    overhead = len(InboxMessage("", "auto").encode())
    fits = "a" * (64_000 - overhead)
    assert project.run("inbox", "send", "--no-wait", fits).code == 0
    assert [p.stat().st_size for p in inbox_of(folder).glob("*.json")] == [64_000]
    assert project.run("inbox", "send", "--no-wait", fits + "a").code == 2
    # a multi-byte character counts by its UTF-8 bytes
    assert project.run("inbox", "send", "--no-wait", "é" * 32_000).code == 2


def test_tilde_means_queue_only_for_argument_text_without_mode(project):
    folder = project.session()

    def sent(*args, input=None):
        doc = project.run("inbox", "send", "--no-wait", "--json", *args, input=input).json()
        return doc["mode"], json.loads(Path(doc["path"]).read_text()).get("text")

    assert sent("~  also check the docs") == ("queue", "also check the docs")
    assert sent("--mode", "auto", "~ literal") == ("auto", "~ literal")
    assert sent("-", input="~ from stdin\n") == ("auto", "~ from stdin")
    text_file = project.root.parent / "msg.txt"
    text_file.write_text("~ from file\n")
    assert sent("--text-file", str(text_file)) == ("auto", "~ from file")
    assert sent(input="piped, no argument\n") == ("auto", "piped, no argument")
    assert len(list(inbox_of(folder).glob("*.json"))) == 5


def test_taken_stem_is_name_taken(project):
    folder = project.session()
    assert project.run("inbox", "send", "--no-wait", "--stem", "deploy-1", "a").code == 0
    before = tree(folder)
    result = project.run("inbox", "send", "--no-wait", "--stem", "deploy-1", "b", "--json")
    assert result.code == 4 and result.json()["error"]["code"] == "name_taken"
    assert tree(folder) == before
    (inbox_of(folder) / "done").mkdir()
    (inbox_of(folder) / "deploy-1.json").rename(inbox_of(folder) / "done" / "deploy-1.json")
    assert project.run("inbox", "send", "--no-wait", "--stem", "deploy-1", "c").code == 4  # consumed stays taken


def test_default_stems_bump_by_one_nanosecond_when_taken(project):
    project.session()
    clock = FakeClock(1_789_972_202_061)
    session = select_session(project.root, environ={}, clock=clock)
    first = send(session, SendRequest("a", no_wait=True), clock=clock)
    second = send(session, SendRequest("b", no_wait=True), clock=clock)
    third = send(session, SendRequest("c", priority=2, no_wait=True), clock=clock)
    assert (first.stem, second.stem, third.stem) == (
        "1789972202_061000000", "1789972202_061000001", "02_1789972202_061000000")


def test_gate_off_warns_and_still_writes(project):
    folder = project.session()
    (project.root / ".scorpiox" / "scorpiox-env.txt").write_text("SCORPIOX_INBOX=0\n")
    result = project.run("inbox", "send", "hi", "--no-wait", "--json")
    assert result.code == 0 and result.json()["inbox_gate"] == "off"
    source = project.root / ".scorpiox" / "scorpiox-env.txt"
    assert (f"sxctl: warning: SCORPIOX_INBOX=0 (from {source}): the agent does not poll its inbox; "
            "the message will wait") in result.err
    assert len(list(inbox_of(folder).glob("*.json"))) == 1


def test_stale_session_write_warns(project):
    project.session(live=False)
    result = project.run("inbox", "send", "hi")
    assert result.code == 0
    assert "is stale (stats" in result.err and "written, not yet consumed" in result.out


# --- idempotency keys ------------------------------------------------------------------------

def test_same_key_returns_the_first_stem(project):
    folder = project.session(live=False)
    first = project.run("inbox", "send", "nightly report", "--key", "nightly-2026-11-30", "--json").json()
    second = project.run("inbox", "send", "nightly report", "--key", "nightly-2026-11-30", "--json").json()
    assert second["stem"] == first["stem"] and second["duplicate"] is True and first["duplicate"] is False
    assert second["key"] == "nightly-2026-11-30"
    assert len(list(inbox_of(folder).glob("*.json"))) == 1
    records = list((inbox_of(folder) / ".keys").glob("*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert set(record) == {"key", "stem", "content_sha256", "created_ms"} and record["stem"] == first["stem"]
    conflict = project.run("inbox", "send", "other text", "--key", "nightly-2026-11-30", "--json")
    assert conflict.code == 4
    assert conflict.json()["error"] == {
        "code": "key_conflict", "message": "key reused with different content", "exit": 4, "file": str(records[0])}


def test_key_duplicate_reports_current_state(project):
    folder = project.session(live=False)
    first = project.run("inbox", "send", "x", "--key", "k", "--json").json()
    (inbox_of(folder) / "done").mkdir()
    Path(first["path"]).rename(inbox_of(folder) / "done" / Path(first["path"]).name)
    again = project.run("inbox", "send", "x", "--key", "k", "--json").json()
    assert again["duplicate"] is True and again["state"] == "consumed" and again["consumed"] is True


def test_key_record_without_message_is_completed(project):
    folder = project.session(live=False)
    first = project.run("inbox", "send", "x", "--key", "k", "--json").json()
    Path(first["path"]).unlink()  # as if the first sender died after reserving the key
    again = project.run("inbox", "send", "x", "--key", "k", "--json").json()
    assert again["stem"] == first["stem"] and again["duplicate"] is True and again["completed_abandoned"] is True
    assert (inbox_of(folder) / f"{first['stem']}.json").exists()


# --- waiting ---------------------------------------------------------------------------------

def test_soft_wait_reports_consumption_by_a_live_agent(project, consumer_factory):
    folder = project.session()
    consumer = consumer_factory(folder)
    doc = project.run("inbox", "send", "hello", "--json").json()
    assert doc["consumed"] is True and doc["state"] == "consumed"
    assert doc["path"] == str(inbox_of(folder) / "done" / f"{doc['stem']}.json")
    assert project.run("inbox", "send", "hello again").out.endswith(": consumed\n")
    records = consumer.stop()
    assert [r["text"] for r in records] == ["hello", "hello again"]


def test_no_soft_wait_for_a_session_that_is_not_live(project):
    project.session(live=False)
    started = time.monotonic()
    doc = project.run("inbox", "send", "x", "--json").json()
    assert doc["waited_ms"] == 0 and doc["consumed"] is False
    assert time.monotonic() - started < 2


def test_hard_wait_timeout_is_exit_6_and_names_the_stem(project):
    folder = project.session(live=False)
    result = project.run("inbox", "send", "x", "--wait", "0.3", "--json")
    assert result.code == 6
    doc = result.json()
    assert doc["ok"] is False and doc["error"]["code"] == "timeout" and doc["state"] == "pending"
    assert (inbox_of(folder) / f"{doc['stem']}.json").exists()
    waited = project.run("inbox", "wait", doc["stem"], "--timeout", "200ms")
    assert waited.code == 6 and "still pending" in waited.err


def test_hard_wait_consumed(project, consumer_factory):
    folder = project.session()
    consumer_factory(folder)
    doc = project.run("inbox", "send", "x", "--wait", "10", "--json").json()
    assert doc["state"] == "consumed" and doc["waited_ms"] >= 0
    again = project.run("inbox", "wait", doc["stem"], "--json").json()
    assert again["state"] == "consumed" and again["consumed"] is True


def _background_send(project, *args):
    return subprocess.Popen([sys.executable, "-m", "sxctl", "inbox", "send", "--json", *args],
                            cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_pending(folder: Path) -> Path:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = list(inbox_of(folder).glob("*.json"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("no message appeared")


def test_hard_wait_sees_retraction_as_exit_4(project):
    folder = project.session(live=False)
    proc = _background_send(project, "x", "--wait", "30")
    pending = _wait_for_pending(folder)
    assert project.run("inbox", "retract", pending.stem).code == 0
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 4 and json.loads(out)["error"]["code"] == "retracted"


def test_hard_wait_sees_removal_as_exit_3(project):
    folder = project.session(live=False)
    proc = _background_send(project, "x", "--wait", "30")
    _wait_for_pending(folder).unlink()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3 and json.loads(out)["error"]["code"] == "stem_not_found"


def test_wait_for_unknown_stem_is_exit_3(project):
    project.session()
    result = project.run("inbox", "wait", "1789972202_061734902", "--timeout", "1")
    assert result.code == 3


@pytest.mark.parametrize("verb", ["send", "wait"])
def test_follow_rehomes_after_rotation(project, verb):
    old = project.session("2026_09_21_quiet_euler", live=True)
    base = [sys.executable, "-m", "sxctl", "--session", old.name, "inbox"]
    if verb == "wait":
        stem = project.run("--session", old.name, "inbox", "send", "carry me", "--no-wait", "--json").json()["stem"]
        argv = [*base, "wait", stem, "--timeout", "30", "--follow", "--json"]
    else:
        argv = [*base, "send", "carry me", "--wait", "30", "--follow", "--json"]
    proc = subprocess.Popen(argv, cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pending = _wait_for_pending(old)  # a sender waits once its message is written …
    first_event = proc.stdout.readline() if verb == "wait" else b""  # … a waiter says so
    # rotation: the old folder goes stale, a new one becomes live
    stats = json.loads((old / "stats.json").read_text())
    stats["updated_ms"] -= 120_000
    (old / "stats.json").write_text(json.dumps(stats))
    new = project.session("2026_09_21_brave_curie", live=True)
    deadline = time.monotonic() + 20
    while not (inbox_of(new) / pending.name).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (inbox_of(new) / pending.name).read_text() == '{"text":"carry me","mode":"auto"}\n'
    assert not pending.exists()
    (inbox_of(new) / "done").mkdir()
    (inbox_of(new) / pending.name).rename(inbox_of(new) / "done" / pending.name)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"re-homed {pending.stem} from {old.name} to {new.name}" in err.decode()
    lines = [json.loads(line) for line in (first_event + out).decode().splitlines()]
    if verb == "wait":
        assert [e["event"] for e in lines] == ["waiting", "rehomed", "done"]
        assert lines[1]["session"] == new.name and lines[2]["state"] == "consumed"
        assert all(isinstance(e["ts_ms"], int) for e in lines)
    else:
        assert len(lines) == 1 and lines[0]["state"] == "consumed" and lines[0]["session"] == new.name


def test_without_follow_a_rotation_only_warns(project):
    old = project.session("2026_09_21_quiet_euler", live=True)
    stem = project.run("inbox", "send", "stay", "--no-wait", "--json").json()["stem"]
    # the waiter's clock runs past the 10 s liveness window: the agent stopped writing stats.json
    result = project.run("inbox", "wait", stem, "--timeout", "15", clock=FakeClock(now_ms()))
    assert result.code == 6
    assert result.err.count("turned stale while") == 1 and (inbox_of(old) / f"{stem}.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_root_gives_new_files_to_the_session_folder_owner(project):
    folder = project.session(live=False)
    os.chown(folder, 4321, 4321)
    doc = project.run("inbox", "send", "from root", "--key", "k", "--json").json()
    for path in (folder / "inbox", folder / "inbox" / ".keys", Path(doc["path"])):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (4321, 4321), path
    assert project.run("inbox", "retract", doc["stem"]).code == 0
    assert (folder / "inbox" / "retracted").stat().st_uid == 4321


def test_wait_by_key(project, consumer_factory):
    folder = project.session()
    stem = project.run("inbox", "send", "keyed", "--key", "build-42", "--no-wait", "--json").json()["stem"]
    consumer_factory(folder)
    doc = project.run("inbox", "wait", "--key", "build-42", "--timeout", "20", "--json").json()
    assert doc["stem"] == stem and doc["state"] == "consumed"


def test_tampered_key_record_is_invalid_data(project):
    folder = project.session(live=False)
    project.run("inbox", "send", "x", "--key", "k")
    record = next((folder / "inbox" / ".keys").glob("*.json"))
    record.write_text(json.dumps({"key": "k", "stem": "../../escape", "content_sha256": "x", "created_ms": 1}))
    before = tree(folder)
    result = project.run("inbox", "send", "x", "--key", "k")
    assert result.code == 5 and str(record) in result.err and "unsafe stem" in result.err
    assert tree(folder) == before


def test_symlinked_inbox_is_refused(project, tmp_path):
    folder = project.session(live=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "inbox").symlink_to(elsewhere)
    result = project.run("inbox", "send", "x", "--json")
    assert result.code == 5 and result.json()["error"]["message"] == f"refusing to use {folder / 'inbox'}: it is a symbolic link"
    assert list(elsewhere.iterdir()) == []

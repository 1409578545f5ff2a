"""No value from a file or an argument drives the terminal: every human line escapes control
characters (issue 23, item 9). A job name, a message, a pause reason in the policy file, the
scheduler heartbeat's fields and an error message carrying an OSC 52 clipboard write, a CSI, a
bare CR, a C1 CSI (U+009B), a backspace and DEL are walked through every command that shows
them; not one such character may reach stdout or stderr raw."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime

import pytest

from sxctl.clock import FakeClock

SID = "2026_12_01_steady_hopper"
T0 = int(datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp() * 1000)
MIN = 60_000
#: an OSC 52 clipboard write (ESC ] 52 ; c ; base64 BEL), a CSI clearing the screen, a bare CR,
#: the one-byte C1 CSI, a backspace and DEL
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rfake\x9b31m\x08\x7f"
#: what a terminal must never receive from a value: C0 controls but for tab and line feed, DEL, C1
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run(project, *args: str, at: int) -> tuple[int, str]:
    """`sxctl ARGS` in-process at the instant `at`, its stdout and stderr as a terminal would get
    them (click strips nothing: `color=True`, as on a TTY)."""
    result = project.run("--project", str(project.root), *args, clock=FakeClock(at), color=True)
    return result.code, result.out + result.err


def _agent_at(folder, ms: int) -> None:
    (folder / "stats.json").write_text(json.dumps({"updated_ms": ms, "model": "m"}))


@pytest.fixture
def hostile(project):
    """A project whose files all carry HOSTILE: a job named HOSTILE (run once, then waiting for the
    agent), a job paused by sxctl whose pause message in the policy file is HOSTILE, a pending
    message and a timer whose text is HOSTILE. Returns what each command printed on the way."""
    folder = project.session(SID)
    printed: dict[str, tuple[int, str]] = {}

    def step(label: str, *args: str, at: int) -> None:
        printed[label] = run(project, *args, at=at)

    step("cron add", "cron", "add", HOSTILE, "--cron", "*/30 * * * *", "--tz", "UTC", "--payload",
         "heartbeat-event", "--text", HOSTILE, at=T0)
    step("cron add --paused", "cron", "add", "p" + HOSTILE, "--every", "1h", "--payload", "agent-turn", "--text",
         HOSTILE, "--paused", at=T0)
    _agent_at(folder, T0 + 30 * MIN)
    step("cron tick (ran)", "cron", "tick", at=T0 + 30 * MIN)
    step("cron tick (waiting)", "cron", "tick", at=T0 + 60 * MIN)  # the agent is gone: the job waits
    store = json.loads((project.root / ".scheduler" / "cron-jobs.json").read_text())
    paused_id = next(job["id"] for job in store["jobs"] if job["name"] == "p" + HOSTILE)
    policy_file = project.root / ".scheduler" / "sxctl-policy.json"
    policy = json.loads(policy_file.read_text()) if policy_file.exists() else {"formatVersion": 1, "jobs": {}}
    policy["jobs"][paused_id] = {"paused": {"reason": "max_unconsumed", "atMs": T0, "message": HOSTILE}}
    policy_file.write_text(json.dumps(policy))
    step("callbacks set", "callbacks", "set", HOSTILE, "--every", "2m", "--repeat", "3", "--no-verify",
         at=T0 + 60 * MIN)
    step("inbox send", "inbox", "send", HOSTILE, "--no-wait", "--session", SID, at=T0 + 60 * MIN)
    return printed


def _heartbeat(project, **fields) -> None:
    doc = {"formatVersion": 1, "lastPassMs": T0 + 60 * MIN, "host": "h", "pid": 1, "sxctlVersion": "0",
           "outcome": "ok", "detail": None, **fields}
    (project.root / ".scheduler" / "sxctl-tick.json").write_text(json.dumps(doc))


def _raw(text: str) -> list[str]:
    return sorted(set(RAW.findall(text)))


def test_no_command_lets_a_hostile_value_reach_the_terminal(project, hostile):
    later = T0 + 61 * MIN
    stem = run(project, "inbox", "list", "--json", "--session", SID, at=later)[1]
    stem = json.loads(stem)["messages"][0]["stem"]
    walks = {
        **hostile,
        "cron list": run(project, "cron", "list", at=later),
        "cron show": run(project, "cron", "show", HOSTILE, at=later),
        "cron show (paused)": run(project, "cron", "show", "p" + HOSTILE, at=later),
        "cron next": run(project, "cron", "next", at=later),
        "cron runs": run(project, "cron", "runs", HOSTILE, at=later),
        "cron runs --all-jobs": run(project, "cron", "runs", "--all-jobs", at=later),
        "cron status": run(project, "cron", "status", at=later),
        "status": run(project, "status", "--session", SID, at=later),
        "next": run(project, "next", "--session", SID, at=later),
        "inbox list": run(project, "inbox", "list", "--session", SID, at=later),
        "inbox show": run(project, "inbox", "show", stem, "--session", SID, at=later),
        "callbacks list": run(project, "callbacks", "list", "--session", SID, at=later),
        "error: no such job": run(project, "cron", "show", "x" + HOSTILE, at=later),
        "error: bad stem": run(project, "inbox", "show", HOSTILE, "--session", SID, at=later),
        "error: bad session": run(project, "status", "--session", HOSTILE, at=later),
        "error: no such command": run(project, HOSTILE, at=later),
        "error: bad duration": run(project, "cron", "add", "j", "--every", HOSTILE, "--payload", "heartbeat-event",
                                   "--text", "t", at=later),
    }
    _heartbeat(project, host=HOSTILE, sxctlVersion=HOSTILE)  # a record a pass could write
    walks["doctor (heartbeat host)"] = run(project, "doctor", "--session", SID, at=later)
    _heartbeat(project, outcome="failed", detail=HOSTILE)
    walks["doctor (heartbeat detail)"] = run(project, "doctor", "--session", SID, at=later)
    leaks = {label: _raw(text) for label, (_, text) in walks.items() if _raw(text)}
    assert leaks == {}, leaks
    # and the walk did reach the values: each surface shows the hostile value, escaped
    shown = r"\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rfake\x9b31m\x08\x7f"
    for label in ("cron add", "cron tick (ran)", "cron tick (waiting)", "cron list", "cron show", "cron next",
                  "cron runs --all-jobs", "status", "next", "inbox list", "inbox show", "callbacks list",
                  "error: no such job", "doctor (heartbeat host)", "doctor (heartbeat detail)"):
        assert shown in walks[label][1], (label, walks[label])
    assert "waiting " + shown in walks["cron tick (waiting)"][1]
    assert "p" + shown + ": " + shown in walks["status"][1]  # the policy file's pause message
    assert all(code != 1 for code, _ in walks.values()), {k: v for k, v in walks.items() if v[0] == 1}


def test_rich_tables_escape_their_cells_too(project, hostile, monkeypatch):
    """On a colour terminal the tables come from rich: the cells are escaped before rich sees them
    (rich would pass ESC through, and read `[...]` as markup)."""
    from sxctl.cli import output

    monkeypatch.setattr(output, "color_enabled", lambda s=None: True)
    for args in (["cron", "list"], ["cron", "next"], ["next", "--session", SID], ["inbox", "list", "--session", SID]):
        code, text = run(project, *args, at=T0 + 61 * MIN)
        assert code == 0 and "\\x1b]52" in text, (args, text)
        assert _raw(text.replace("\x1b[", "")) == [], (args, text)  # rich's own styles aside


def test_the_live_watch_view_escapes_every_value(project, hostile):
    """`sxctl watch` on a terminal: the header, the next-up table, an event line and the problems
    reach rich escaped (no raw control character, no markup taken from a value)."""
    import click
    from rich.console import Console

    from sxctl.api import watch
    from sxctl.cli.observe import _event_line, _render, watch_command
    from sxctl.cli.output import Settings

    clock = FakeClock(T0 + 61 * MIN)
    watching = watch(session=SID, project=str(project.root), clock=clock)
    event = {"event": "inbox_pending", "ts_ms": T0, "stem": "1", "preview": HOSTILE + "[bold]x[/bold]"}
    screen = io.StringIO()
    with click.Context(watch_command, obj=Settings(clock=clock)):
        log = [_event_line(event)]
        Console(file=screen, width=300, color_system=None, force_terminal=False).print(_render(watching, log))
    text = screen.getvalue()
    assert "\\x1b]52" in text and "[bold]x[/bold]" in text, text
    assert _raw(text) == [], text


@pytest.mark.parametrize("text, shown", [
    ("plain", "plain"),
    ("tab\there", "tab\\there"),
    ("line\nbreak", "line\\nbreak"),
    ("\x1b]52;c;eA==\x07", "\\x1b]52;c;eA==\\x07"),
    ("\x9b2J\r\x08\x7f\x00", "\\x9b2J\\r\\x08\\x7f\\x00"),
    ("\u202eevil\u2028", "\\u202eevil\\u2028"),  # a bidi override and a line separator do not print
    ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),  # printable text stays as it is
    ("lone \udc80", "lone \\udc80"),
    ("dev \U0001f469\u200d\U0001f4bb\u00a0ok", "dev \U0001f469\u200d\U0001f4bb\u00a0ok"),  # a joiner, a no-break space
])
def test_printable_is_the_one_rule(text, shown):
    from sxctl.cli.output import printable

    assert printable(text) == shown
    assert printable(shown) == shown  # escaping twice changes nothing


def test_printable_keeps_the_line_breaks_of_a_multi_line_text_only_when_asked():
    from sxctl.cli.output import printable

    assert printable("one\x1b[2J\r\ntwo\n", newlines=True) == "one\\x1b[2J\\r\ntwo\n"
    assert printable("one\ntwo") == "one\\ntwo"


def test_a_line_break_in_a_value_cannot_fake_a_line(project):
    """Only a multi-line text (a message body) keeps its line breaks: a job name with one stays on
    its own line of `cron add`, `cron tick` and `cron list`."""
    project.session(SID, live=None)  # no live agent: the due job waits
    name = "n\nok    scheduler    last pass 1s ago"
    code, text = run(project, "cron", "add", name, "--every", "1m", "--payload", "agent-turn", "--text", "t", at=T0)
    assert code == 0 and text.startswith("added n\\nok    scheduler") and text.count("\n") == 1, text
    code, text = run(project, "cron", "tick", at=T0 + 2 * MIN)
    assert code == 0 and text.startswith("waiting n\\nok    scheduler") and text.count("\n") == 1, text
    code, text = run(project, "cron", "list", at=T0 + 2 * MIN)
    assert code == 0 and text.count("\n") == 2 and "n\\nok" in text, text  # the header and one row


def test_json_output_carries_the_value_and_no_raw_control_character(project, hostile):
    """json.dumps escapes C0 but leaves DEL and the C1 controls raw when it writes UTF-8: they are
    escaped too (`\\u009b`), and the document still holds the value byte for byte."""
    later = T0 + 61 * MIN
    for args in (["cron", "list"], ["cron", "show", HOSTILE], ["status", "--session", SID],
                 ["next", "--session", SID], ["inbox", "list", "--session", SID], ["cron", "show", "x" + HOSTILE]):
        code, text = run(project, *args, "--json", at=later)
        assert code in (0, 3) and _raw(text) == [], (args, text)
        assert "\\u009b" in text and any(HOSTILE in value for value in _strings(json.loads(text))), (args, text)


def _strings(doc) -> list[str]:
    """Every string of a JSON document, keys and values."""
    if isinstance(doc, dict):
        return [*doc, *(s for value in doc.values() for s in _strings(value))]
    if isinstance(doc, list):
        return [s for value in doc for s in _strings(value)]
    return [doc] if isinstance(doc, str) else []


@pytest.mark.slow
def test_the_live_watch_view_in_a_terminal_shows_a_hostile_event_escaped(project, hostile):
    """`sxctl watch` in a pty: a message that arrives while it runs (one event) and the hostile job
    and timer of the upcoming table reach the screen escaped; no hostile byte does."""
    import signal
    import sys
    import time

    pexpect = pytest.importorskip("pexpect")
    env = {**project.env(), "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "40"}
    env.pop("NO_COLOR", None)
    _agent_at(project.root / ".scorpiox" / "sessions" / SID, int(time.time() * 1000))
    screen = io.BytesIO()
    child = pexpect.spawn(sys.executable, ["-m", "sxctl", "--session", SID, "watch"], cwd=str(project.root),
                          env=env, dimensions=(40, 200), timeout=20,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    child.logfile_read = screen
    try:
        child.expect("press q to quit")
        inbox = project.root / ".scorpiox" / "sessions" / SID / "inbox"
        (inbox / "1999999999_000000001.json").write_text(json.dumps({"text": "late" + HOSTILE, "mode": "auto"}))
        child.expect("inbox_pending")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    output = screen.getvalue()
    assert b"\\x1b]52;c;cm0gLXJmIH4=" in output, output  # shown, escaped
    for raw in ("\x1b]52", "\x07", "\x9b", "\x7f", "\rfake", "\x08"):
        assert raw.encode() not in output, (raw, output)



def test_shell_completion_never_offers_a_name_with_a_control_character(project):
    from tests.cli.test_promises import _complete

    for name in ("ok-job", HOSTILE, "n\nforged"):
        assert run(project, "cron", "add", name, "--every", "1h", "--payload", "heartbeat-event", "--text", "t",
                   at=T0)[0] == 0
    completed, _ = _complete(project, "sxctl cron pause ")
    assert completed == ["ok-job"]

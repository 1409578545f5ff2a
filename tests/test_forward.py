"""Messages and timers stranded by an agent restart: `inbox forward`, `callbacks move`, keys that
identify a message across the project's sessions, and a `--wait` that says no agent is live."""

from __future__ import annotations

import json
from pathlib import Path

from sxctl.clock import FakeClock

from .conftest import now_ms

OLD = "2026_09_21_quiet_euler"
NEW = "2026_09_21_brave_curie"


def inbox_of(folder: Path) -> Path:
    return folder / "inbox"


def pending(folder: Path) -> list[str]:
    return sorted(p.name for p in inbox_of(folder).glob("*.json")) if inbox_of(folder).is_dir() else []


def rotate(project, old: Path) -> Path:
    """The agent of `old` stopped (its stats.json goes stale) and a new one runs in NEW."""
    stats = json.loads((old / "stats.json").read_text())
    stats["updated_ms"] = now_ms() - 120_000
    (old / "stats.json").write_text(json.dumps(stats))
    return project.session(NEW, live=True)


def test_a_key_resent_after_a_rotation_is_a_duplicate_of_the_stranded_message(project):
    old = project.session(OLD, live=True)
    first = project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait", "--json").json()
    new = rotate(project, old)
    again = project.run("inbox", "send", "nightly report", "--key", "nightly", "--no-wait", "--json")
    doc = again.json()
    assert again.code == 0
    assert (doc["duplicate"], doc["stem"], doc["session"], doc["state"]) == (True, first["stem"], OLD, "pending")
    assert doc["path"] == first["path"] and doc["stranded"] is True
    assert pending(new) == [] and pending(old) == [f"{first['stem']}.json"]
    assert f"sxctl inbox forward --from {OLD}" in again.err


def test_send_wait_timing_out_without_a_live_agent_says_so(project):
    project.session(OLD, live=False)
    result = project.run("inbox", "send", "anyone?", "--wait", "3", "--json", clock=FakeClock(now_ms()))
    doc = result.json()
    assert result.code == 6 and doc["error"]["code"] == "timeout"
    assert doc["agent_live"] is False and doc["live_session"] is None and doc["state"] == "pending"
    assert "no agent is live in session" in doc["error"]["message"]
    human = project.run("inbox", "send", "anyone?", "--wait", "3", clock=FakeClock(now_ms()))
    assert human.code == 6 and "still pending: no agent is live in session " + OLD in human.err

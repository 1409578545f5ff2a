"""`session list --limit N` reads only the folders that can be among the N newest (issue #27):
the date in a folder's name orders it first, so 2,000 folders cost a directory listing and N reads."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def many(project):
    sessions = project.root / ".scorpiox" / "sessions"
    for day in range(1, 29):
        for month in (1, 2, 3):
            folder = sessions / f"2026_{month:02d}_{day:02d}_agent"
            folder.mkdir(parents=True)
            (folder / "stats.json").write_text(json.dumps({"updated_ms": 0, "model": f"m{month}-{day}"}))
    # two folders of the newest day: their stats.json decide which is newer
    for name, updated in (("2026_03_28_early", 1), ("2026_03_28_late", 2)):
        folder = sessions / name
        folder.mkdir()
        (folder / "stats.json").write_text(json.dumps({"updated_ms": updated}))
    return sessions


@pytest.fixture
def reads(monkeypatch):
    from sxctl.project import sessions

    seen: list[str] = []
    real = sessions.read_stats
    monkeypatch.setattr(sessions, "read_stats", lambda folder: seen.append(folder.name) or real(folder))
    return seen


def test_limit_reads_only_the_newest_folders(project, many, reads):
    result = project.run("session", "list", "--limit", "4", "--json")
    assert result.code == 0, result.err
    ids = [row["id"] for row in result.json()["sessions"]]
    assert ids == ["2026_03_28_late", "2026_03_28_early", "2026_03_28_agent", "2026_03_27_agent"]
    assert sorted(reads) == sorted(ids)


def test_limit_keeps_the_full_scan_order(project, many, reads):
    whole = [row["id"] for row in project.run("session", "list", "--json").json()["sessions"]]
    assert len(reads) == len(whole) == 86
    for limit in (1, 2, 3, 10, 86, 500):
        rows = project.run("session", "list", "--limit", str(limit), "--json").json()["sessions"]
        assert [row["id"] for row in rows] == whole[:limit]


def test_limit_must_be_positive(project, many):
    result = project.run("session", "list", "--limit", "0")
    assert result.code == 2 and "--limit" in result.err and "0" in result.err

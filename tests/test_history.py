"""Reads that do not grow with history: listings read only the newest consumed messages, status
reads none, and `inbox prune --keep N` bounds what stays."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def history(project):
    """A session with 200 consumed messages (consumed one second apart, oldest first)."""
    folder = project.session(live=False)
    done = folder / "inbox" / "done"
    done.mkdir(parents=True)
    for n in range(200):
        path = done / f"17899{n:05d}_000000000.json"
        path.write_text(f'{{"text":"message {n}","mode":"auto"}}\n')
    return folder


@pytest.fixture
def opened(monkeypatch):
    """Every message file sxctl opens to read, by path."""
    from sxctl import fsio

    seen: list[str] = []
    real = fsio.open_regular

    def counting(path):
        seen.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(fsio, "open_regular", counting)
    return seen


def test_listing_the_newest_consumed_opens_only_those(project, history, opened):
    result = project.run("inbox", "list", "--done", "--limit", "20", "--json")
    assert result.code == 0
    rows = result.json()["messages"]
    assert len(rows) == 20
    in_done = [p for p in opened if "/inbox/done/" in p]
    assert len(in_done) == 20


def test_status_reads_no_consumed_message(project, history, opened):
    doc = project.run("status", "--json").json()
    assert doc["inbox"]["consumed_last_hour"] == 200  # counted from the directory entries
    assert [p for p in opened if "/inbox/done/" in p] == []


def test_prune_keep_leaves_the_newest_n(project, history):
    done = history / "inbox" / "done"
    names = sorted(p.name for p in done.iterdir())
    # consumed in name order: a rename sets the ctime, renamed again until it has moved on
    last = 0
    for name in names:
        while True:
            os.rename(done / name, done / f"{name}.tmp")
            os.rename(done / f"{name}.tmp", done / name)
            ctime = (done / name).stat().st_ctime_ns
            if ctime > last:
                last = ctime
                break
    result = project.run("inbox", "prune", "--older-than", "0", "--keep", "15", "--json")
    assert result.code == 0 and result.json()["kept"] == 15
    assert sorted(p.name for p in done.iterdir()) == names[-15:]

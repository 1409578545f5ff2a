"""What keeps `inbox list --done --limit N` and `status` at the cost of one listing of `done/`
(issue #27): the newest names come from a bounded selection (heapq.nlargest), names are told
apart by a length sum, a minimum and a check of those few one by one — no regular expression over
every name — and only about N + READ_ORDER_SLACK names are stat'ed."""

from __future__ import annotations

import os
import re

import pytest

from sxctl.inbox import folder as inbox_folder


@pytest.fixture
def history(project):
    """2,000 consumed messages with plain names, one of them with a sidecar image."""
    session = project.session(live=False)
    done = session / "inbox" / "done"
    done.mkdir(parents=True)
    for n in range(2000):
        (done / f"17899{n:05d}_000000000.json").write_text(f'{{"text":"message {n}","mode":"auto"}}\n')
    (done / "1789900007_000000000.png").write_bytes(b"\x89PNG")  # sorts among the plain names
    return done


@pytest.fixture
def counted(monkeypatch):
    """lstat calls in done/, names checked one by one, regular-expression passes over whole listings."""
    seen: dict[str, list] = {"lstat": [], "checked": [], "whole": []}
    real_lstat, real_findall, plain = os.lstat, re.findall, inbox_folder._PLAIN

    def lstat(path, *args, **kwargs):
        if "/inbox/done/" in os.fspath(path) and os.fspath(path).endswith(".json"):  # not a sidecar probe
            seen["lstat"].append(os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    def findall(pattern, text, *args, **kwargs):
        if isinstance(text, str) and text.count("\n") > 1000:
            seen["whole"].append(pattern)
        return real_findall(pattern, text, *args, **kwargs)

    class Checked:
        def fullmatch(self, name):
            seen["checked"].append(name)
            return plain.fullmatch(name)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(re, "findall", findall)
    monkeypatch.setattr(inbox_folder, "_PLAIN", Checked())
    return seen


def test_the_newest_twenty_cost_a_bounded_selection(project, history, counted):
    result = project.run("inbox", "list", "--done", "--limit", "20", "--json")
    stems = [row["stem"] for row in result.json()["messages"]]
    assert stems == [f"17899{n:05d}_000000000" for n in range(1999, 1979, -1)]
    assert len(set(counted["lstat"])) <= 20 + inbox_folder.READ_ORDER_SLACK
    assert counted["whole"] == [] and len(counted["checked"]) <= inbox_folder._HEAD


@pytest.mark.real_time
def test_status_counts_the_last_hour_with_a_bounded_selection(project, history, counted):
    doc = project.run("status", "--json").json()
    assert doc["inbox"]["consumed_last_hour"] == 2000 and doc["inbox"]["consumed_kept"] == 2000
    assert counted["whole"] == [] and len(counted["checked"]) <= inbox_folder._HEAD


def test_odd_names_are_still_told_apart(project, history, counted):
    """A user stem that sorts above the plain names is another message, so is a priority name
    (another length); a sidecar is never a row; a plain-length name below `1` sends the check back
    to one pass over every name."""
    (history / "zz-a-user-stem-of-20.json").write_text('{"text":"user","mode":"auto"}\n')
    rows = project.run("inbox", "list", "--done", "--json").json()["messages"]
    stems = {row["stem"] for row in rows}
    assert "zz-a-user-stem-of-20" in stems and len(rows) == 2001
    assert not any(stem.endswith(".png") or "png" in stem for stem in stems)
    assert counted["whole"] == []
    (history / "01_1789900500_000000000.json").write_text('{"text":"urgent","mode":"auto"}\n')
    rows = project.run("inbox", "list", "--done", "--json").json()["messages"]
    assert len(rows) == 2002 and "01_1789900500_000000000" in {row["stem"] for row in rows}
    assert counted["whole"] == []
    (history / "0-user-stem-of-20chr.json").write_text('{"text":"low","mode":"auto"}\n')
    rows = project.run("inbox", "list", "--done", "--json").json()["messages"]
    assert len(rows) == 2003 and len(counted["whole"]) == 1

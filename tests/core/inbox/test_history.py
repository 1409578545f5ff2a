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


@pytest.mark.real_time
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


@pytest.fixture
def stats(monkeypatch):
    """Every path sxctl stats through os.lstat (the cost of a history is its stat calls)."""
    seen: list[str] = []
    real = os.lstat

    def counting(path, *args, **kwargs):
        seen.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counting)
    return seen


def test_the_newest_consumed_are_found_with_a_stat_for_few_more_than_asked(project, history, stats):
    from sxctl.inbox.folder import READ_ORDER_SLACK

    result = project.run("inbox", "list", "--done", "--limit", "5", "--json")
    names = [row["stem"] for row in result.json()["messages"]]
    assert names == sorted((p.name[:-5] for p in (history / "inbox" / "done").iterdir()), reverse=True)[:5]
    in_done = [p for p in stats if "/inbox/done/" in p]
    assert len(in_done) <= 2 * (5 + READ_ORDER_SLACK) < 200


def test_status_counts_the_last_hour_and_stops_at_older_ones(project, history, stats):
    """Two hours later, none of the 200 was consumed in the last hour: an unchanged done/ is not
    even listed; one changed since (a message moved out, say) is listed and the count stops after
    READ_ORDER_SLACK older ones instead of stat-ing the whole history."""
    from sxctl.clock import FakeClock
    from sxctl.inbox.folder import READ_ORDER_SLACK
    from tests.conftest import now_ms

    later = now_ms() + 2 * 3_600_000
    doc = project.run("status", "--json", clock=FakeClock(later)).json()
    assert doc["inbox"]["consumed_last_hour"] == 0 and doc["inbox"]["consumed_kept"] is None
    assert [p for p in stats if "/inbox/done/" in p] == []
    done = history / "inbox" / "done"
    os.utime(done, ns=(later * 1_000_000, later * 1_000_000))
    doc = project.run("status", "--json", clock=FakeClock(later)).json()
    assert doc["inbox"]["consumed_last_hour"] == 0 and doc["inbox"]["consumed_kept"] == 200
    assert len([p for p in stats if "/inbox/done/" in p]) == READ_ORDER_SLACK


def test_watch_keeps_a_mark_of_the_history_not_its_names(project, history, monkeypatch):
    """A look at an unchanged done/ lists nothing; the snapshot holds no name per consumed message;
    a message consumed meanwhile is still reported."""
    from sxctl.api import watch

    done = history / "inbox" / "done"
    os.utime(done, (1_700_000_000, 1_700_000_000))  # unchanged for a long time
    watching = watch(project=project.root)
    first = watching.look()
    mark = first.moved[str(done)]
    assert mark.others == frozenset() and mark.latest == "1789900199_000000000.json"
    listed: list[str] = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path=".": listed.append(os.fspath(path)) or real(path))
    second = watching.look(first)
    assert str(done) not in listed and watching.changes(first, second) == []
    (done / "1789900300_000000000.json").write_text('{"text":"new","mode":"auto"}\n')
    third = watching.look(second)
    assert [e["stem"] for e in watching.changes(second, third) if e["event"] == "inbox_consumed"] == [
        "1789900300_000000000"]


@pytest.mark.real_time
def test_status_and_doctor_say_when_the_history_is_large(project, history, monkeypatch):
    import sxctl.observe.summary

    monkeypatch.setattr(sxctl.observe.summary, "LARGE_HISTORY", 150)
    doc = project.run("status", "--json").json()
    assert doc["inbox"]["consumed_kept"] == 200
    [problem] = [p for p in doc["problems"] if p["code"] == "inbox_history_large"]
    assert "sxctl inbox prune --older-than 30d --keep 1000" in problem["message"]
    [check] = [c for c in project.run("doctor", "--json").json()["checks"] if c["check"] == "history"]
    assert check["status"] == "warn" and check["fix"] == "sxctl inbox prune --older-than 30d --keep 1000"

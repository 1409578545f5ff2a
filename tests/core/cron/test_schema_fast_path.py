"""The schema kit's fast path (`schema_kit.fast_check`): a generated predicate per object node
that accepts only what the step-by-step check accepts, so every error keeps its exact message.
Random mutations of the spec's example store and ledger rows are checked both ways."""

from __future__ import annotations

import copy
import json
import os
import random

import pytest

from sxctl.cron.run.ledger_rows import check_row
from sxctl.cron.store import schema_kit
from sxctl.cron.store.schema import validate_store
from tests.conftest import EXAMPLES

SEED = int(os.environ.get("SXCTL_TEST_SEED", "4141"))
ODD_VALUES = (None, True, False, 0, -1, 1.5, 1.0, 2**53, "", "x", ["heartbeat_event"], "ü" * 3, "a" * 300, [], {}, [1], {"k": 1},
              "cron", "every", "at", "scheduled", "heartbeat_event", "agent_turn", 1_700_000_000_000)


def _paths(value, path=()):
    """Every (container, key) in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path + (key,)
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield path + (index,)
            yield from _paths(item, path + (index,))


def _mutate(doc, rng: random.Random):
    doc = copy.deepcopy(doc)
    path = rng.choice(list(_paths(doc)))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    move = rng.randrange(3)
    if move == 0 and isinstance(parent, dict):
        del parent[path[-1]]
    elif move == 1 and isinstance(parent, dict):
        parent[rng.choice(("extra", "kind", "tz", "everyMs"))] = rng.choice(ODD_VALUES)
    else:
        parent[path[-1]] = rng.choice(ODD_VALUES)
    return doc


def _outcome(check, doc) -> str | None:
    try:
        result = check(doc)
    except schema_kit.SchemaError as error:
        return f"{error.path}: {error.rule}"
    return None if result is None else str(result)


def _slow(monkeypatch) -> None:
    """Every object node checked step by step only (as before the fast path)."""
    monkeypatch.setattr(schema_kit.Obj, "_compiled", lambda self: (lambda value: False))
    monkeypatch.setattr(schema_kit.Obj, "_fast", None, raising=False)


@pytest.mark.parametrize("kind", ["store", "ledger row"])
def test_the_fast_path_accepts_and_refuses_exactly_what_the_step_by_step_check_does(kind, monkeypatch):
    rng = random.Random(SEED)
    if kind == "store":
        base = json.loads((EXAMPLES / "cron-jobs.json").read_text())
        check = validate_store
    else:
        rows = [json.loads(line) for line in (EXAMPLES / "cron-executions.jsonl").read_text().splitlines()]
        base = rows
        check = None
    docs = [_mutate(base, rng) for _ in range(400)] + [copy.deepcopy(base)]
    if kind == "ledger row":
        pairs = [(doc, lambda rows: next((p for row in rows if isinstance(row, dict) and (p := check_row(row, full=True))),
                                         None)) for doc in docs]
    else:
        pairs = [(doc, check) for doc in docs]
    fast = [_outcome(fn, doc) for doc, fn in pairs]
    with monkeypatch.context() as patch:
        _slow(patch)
        for node in _object_nodes():
            patch.setattr(node, "_fast", None)
        slow = [_outcome(fn, doc) for doc, fn in pairs]
    refused = sum(1 for outcome in slow if outcome is not None)
    assert refused > 100 and fast[-1] is None, (refused, fast[-1])  # the mutations break rules; the example holds
    for n, (mine, theirs) in enumerate(zip(fast, slow, strict=True)):
        assert mine == theirs, f"seed {SEED}, mutation {n}: fast path {mine!r}, step by step {theirs!r}"


def _object_nodes():
    """The object nodes of the store and ledger schemas (their compiled predicates are reset)."""
    import gc

    return [obj for obj in gc.get_objects() if isinstance(obj, schema_kit.Obj)]


def test_the_fast_path_is_what_accepts_a_valid_job_and_row():
    """Not a path never taken: each job and row of the examples is accepted by its predicate."""
    from sxctl.cron.run.ledger_rows import ROW
    from sxctl.cron.store.schema import JOB_VARIANTS

    store = json.loads((EXAMPLES / "cron-jobs.json").read_text())
    assert all(schema_kit.fast_check(JOB_VARIANTS[job["payload"]["kind"]])(job) for job in store["jobs"])
    rows = [json.loads(line) for line in (EXAMPLES / "cron-executions.jsonl").read_text().splitlines()]
    assert rows and all(schema_kit.fast_check(ROW)(row) for row in rows)


def test_a_ledger_outcome_whose_kind_is_no_string_is_refused_not_a_crash():
    """Found by the mutations above: `{"kind": {}}` raised TypeError (unhashable) in the check."""
    rows = [json.loads(line) for line in (EXAMPLES / "cron-executions.jsonl").read_text().splitlines()]
    terminal = next(row for row in rows if row["recordType"] == "terminal")
    assert check_row({**terminal, "outcome": {"kind": {"k": 1}}}, full=True) == "Cron execution ledger contains an invalid row"


def test_hostile_values_where_a_kind_or_a_version_belongs_are_refused_not_crashes(project):
    """Attacker: `payload.kind` a list was `internal error: TypeError` (exit 1) in every reader;
    `formatVersion` 1.0 was accepted and written back; a ledger row's key given twice was read."""
    assert project.run("cron", "add", "hb", "--every", "1h", "--payload", "heartbeat-event", "--text", "x").code == 0
    store = project.root / ".scheduler" / "cron-jobs.json"
    good = store.read_bytes()
    doc = json.loads(good)
    doc["jobs"][0]["payload"]["kind"] = ["heartbeat_event"]
    store.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    for args in (("cron", "list"), ("cron", "validate"), ("cron", "tick"), ("status", "--json")):
        result = project.run(*args)
        assert result.code in (0, 5) and "internal error" not in result.err + result.out, (args, result.err)
    assert project.run("cron", "list").code == 5
    store.write_bytes(good.replace(b'{"formatVersion":1,', b'{"formatVersion":1.0,'))
    refused = project.run("cron", "pause", "hb")
    assert refused.code == 5 and "formatVersion" in refused.err and store.read_bytes().startswith(b'{"formatVersion":1.0')
    store.write_bytes(good)
    ledger = project.root / ".scheduler" / "cron-executions.jsonl"
    ledger.write_text((EXAMPLES / "cron-executions.jsonl").read_text().replace('"trigger":', '"trigger":"manual","trigger":', 1))
    result = project.run("cron", "validate")
    assert result.code == 5 and "cron-executions.jsonl" in result.err, result.err

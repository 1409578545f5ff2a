"""The one reader of the agent's usage figures (project/usage.py) and the reference agent's
stand-in counters (agent/usage_model.py), on the injectable clock."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sxctl.agent.usage_model import UsageModel
from sxctl.clock import FakeClock
from sxctl.project.usage import FIGURES, read_usage, usage_line
from tests.conftest import EXAMPLES


def test_the_protocol_example_reads_whole():
    stats = json.loads((EXAMPLES / "stats.json").read_text())
    usage = read_usage(stats)
    assert usage.unreadable == {}
    assert usage.get("total_tokens") == 51331 and usage.get("rl_5h") == 0.12 and usage.get("rl_7d") == 0.03
    assert usage_line(usage) == "51,331 tokens, rl 5h 12% 7d 3%"


@pytest.mark.parametrize(("value", "why"), [
    ("51331", "is a string ('51331'), not a number"),
    (-5, "is negative (-5)"),
    (float("nan"), "is not a finite number"),
    (float("inf"), "is not a finite number"),
    (2**80, "is too large (above 9007199254740991)"),
    (1e300, "is too large (above 9007199254740991)"),
    (True, "is a boolean (true), not a number"),
    (None, "is null, not a number"),
    ([1], "is list, not a number"),
    (12.5, "is 12.5, not a whole number of tokens"),
])
def test_a_hostile_token_count_is_unreadable_with_its_reason(value, why):
    usage = read_usage({"updated_ms": 1, "usage": {"total_tokens": value, "rl_5h": 0.5}})
    assert usage.get("total_tokens") is None
    assert usage.unreadable["total_tokens"] == why
    assert usage.get("rl_5h") == 0.5  # the other figures still read
    json.dumps(usage.to_json(), allow_nan=False)  # what status/doctor/metrics print is JSON


@pytest.mark.parametrize(("value", "why"), [
    (1.5, "is 1.5, above 1.0 (a fraction of the limit)"),
    (-0.1, "is negative (-0.1)"),
    ("0.9", "is a string ('0.9'), not a number"),
    (False, "is a boolean (false), not a number"),
    (float("nan"), "is not a finite number"),
])
def test_a_hostile_rate_is_unreadable_with_its_reason(value, why):
    usage = read_usage({"updated_ms": 1, "usage": {"rl_5h": value, "rl_7d": 1}})
    assert usage.unreadable["rl_5h"] == why and usage.get("rl_7d") == 1.0


@pytest.mark.parametrize(("stats", "why"), [
    (None, "no readable stats.json"),
    ({"updated_ms": 1}, "stats.json has no usage block"),
    ({"updated_ms": 1, "usage": [1, 2]}, "stats.json's usage is not an object"),
    ({"updated_ms": 1, "usage": "lots"}, "stats.json's usage is not an object"),
])
def test_a_missing_block_makes_every_figure_unreadable(stats, why):
    usage = read_usage(stats)
    assert usage.figures == {} and usage.unreadable == dict.fromkeys(FIGURES, why)
    assert usage_line(usage) == "? tokens, rl 5h ? 7d ?"


def test_a_partial_block_says_which_figures_are_missing():
    usage = read_usage({"updated_ms": 1, "usage": {"total_tokens": 10}, "history": "not a list"})
    assert usage.get("total_tokens") == 10 and usage.unreadable["rl_5h"] == "missing"
    assert usage.history_turns is None


def test_the_reference_agent_counts_grow_per_turn_and_the_rate_falls_with_time():
    clock = FakeClock()
    model = UsageModel(clock, tokens_per_turn=1000, rl_per_turn=0.25, rl_window_s=3600)
    assert model.block()["total_tokens"] == 0 and model.block()["rl_5h"] == 0
    totals = []
    for _ in range(3):
        model.turn_ended("hello")
        totals.append(model.block()["total_tokens"])
        clock.advance(600)
    assert totals[0] > 0 and totals[0] < totals[1] < totals[2]
    assert model.block()["rl_5h"] == 0.75  # three turns in the last hour
    clock.advance(1800)  # the first turn leaves the window
    assert model.block()["rl_5h"] == 0.5
    clock.advance(3600)
    assert model.block()["rl_5h"] == 0 and model.block()["rl_7d"] == 0.075
    usage = read_usage({"updated_ms": 1, "usage": model.block(), "history": model.history})
    assert usage.unreadable == {} and usage.history_turns == 3


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=100, deadline=None)
@given(block=_JSON | st.dictionaries(st.sampled_from(FIGURES), _JSON), history=_JSON)
def test_any_usage_block_reads_without_raising_and_every_figure_is_a_value_or_a_reason(block, history):
    usage = read_usage({"updated_ms": 1, "usage": block, "history": history})
    assert set(usage.figures) | set(usage.unreadable) == set(FIGURES)
    assert not set(usage.figures) & set(usage.unreadable)
    for name, value in usage.figures.items():
        assert value >= 0 and (value <= 1 if name.startswith("rl_") else isinstance(value, int))
    json.dumps(usage.to_json(), allow_nan=False)
    usage_line(usage)

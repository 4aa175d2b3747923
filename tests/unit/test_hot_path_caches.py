"""What the worker keeps per process to spare its hot path work: the same answers as without."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, Counter

from shared.metrics import series
from worker.context import estimate_tool_tokens
from worker.providers.base import ToolSpec

_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}}


def test_a_metric_child_is_the_labelled_series_and_counts_there() -> None:
    counter = Counter("hot_path_test", "test", ["outcome"], registry=CollectorRegistry())
    kept = series.child(counter, "ok")
    assert kept is counter.labels("ok")
    assert series.child(counter, "ok") is kept
    assert series.child(counter, "failed") is not kept
    series.child(counter, "ok").inc(2)
    assert counter.labels("ok")._value.get() == 2
    assert counter.labels("failed")._value.get() == 0


def test_the_tool_estimate_is_the_json_length_and_follows_each_change() -> None:
    calculator = ToolSpec("calculator", "Evaluates arithmetic.", _SCHEMA)
    expected = len(json.dumps([["calculator", "Evaluates arithmetic.", _SCHEMA]])) // 4
    assert estimate_tool_tokens([calculator]) == expected
    assert estimate_tool_tokens([calculator]) == expected  # from the cache, the same
    longer = ToolSpec("calculator", "Evaluates arithmetic, " + "at length " * 40, _SCHEMA)
    assert estimate_tool_tokens([longer]) > expected
    other_schema = {**_SCHEMA, "required": ["expression"] * 20}
    assert estimate_tool_tokens([ToolSpec("calculator", "Evaluates arithmetic.", other_schema)]) > (
        expected
    )
    assert estimate_tool_tokens([calculator, longer]) > estimate_tool_tokens([longer])
    assert estimate_tool_tokens([]) == 0

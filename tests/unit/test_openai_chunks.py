"""Server-sent events to chunks, and chunks to provider events, as servers really send them."""

from __future__ import annotations

from typing import Any

import pytest

from shared.models.steps import ToolCall, UsageMetadata
from worker.providers.base import FinishEvent, TextDelta, ThinkingDelta, ToolCallEvent, UsageEvent
from worker.providers.openai_chunks import ChunkReader, sse_data


def test_events_split_anywhere_across_pieces_come_out_whole() -> None:
    stream = b'data: {"a": 1}\n\ndata: {"b": 2}\r\n\r\n: a comment\nevent: x\ndata: [DONE]\n\n'
    for size in (1, 2, 3, 7, len(stream)):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert list(sse_data(iter(pieces))) == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"], size


def test_data_lines_join_with_newlines_and_a_cut_event_is_dropped() -> None:
    pieces = [b"data: first\ndata:second\n\n", b"id: 7\ndata: cut off"]
    assert list(sse_data(iter(pieces))) == [b"first\nsecond"]


def test_a_carriage_return_split_from_its_line_feed_ends_one_line() -> None:
    pieces = [b"data: x\r", b"\n\r", b"\n"]
    assert list(sse_data(iter(pieces))) == [b"x"]


def read(*chunks: Any) -> list[Any]:
    reader = ChunkReader()
    events = [event for chunk in chunks for event in reader.feed(chunk)]
    return events + list(reader.end())


def test_text_reasoning_and_refusal_become_deltas_and_usage_comes_last() -> None:
    events = read(
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hm", "content": "Hi"}}]},
        {"choices": [{"index": 0, "delta": {"refusal": "no"}, "finish_reason": "stop"}]},
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 3},
                "completion_tokens_details": {"reasoning_tokens": 1},
            },
        },
    )
    usage = UsageMetadata(
        prompt_token_count=5,
        candidates_token_count=2,
        total_token_count=7,
        cached_content_token_count=3,
        thoughts_token_count=1,
    )
    assert events == [
        ThinkingDelta("hm"),
        TextDelta("Hi"),
        TextDelta("no"),
        UsageEvent(usage),
        FinishEvent("stop"),
    ]


def test_fields_of_the_wrong_type_count_as_absent() -> None:
    events = read(
        {"choices": "none", "usage": None},
        {"choices": [None, {"index": 1, "delta": {"content": "other choice"}}]},
        {"choices": [{"delta": {"content": 5, "tool_calls": [{"index": "0"}, 3]}}]},
        {"choices": [{"delta": None, "finish_reason": "length"}], "usage": {"prompt_tokens": "9"}},
    )
    assert events[0] == ToolCallEvent(ToolCall(id="call_0", name="", args={}))
    usage = UsageMetadata()
    assert events[1:] == [UsageEvent(usage), FinishEvent("length")]


def test_a_chunk_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="not a JSON object"):
        list(ChunkReader().feed(["a", "list"]))


def test_fragments_join_by_index_and_a_new_id_at_an_index_starts_a_call() -> None:
    def fragment(index: int | None, **fields: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **fields}]}}]}

    events = read(
        fragment(0, id="a", function={"name": "get_weather", "arguments": '{"ci'}),
        fragment(0, function={"name": "get_weather", "arguments": 'ty": "Oslo"}'}),
        fragment(0, id="b", function={"name": "now", "arguments": ""}),
        fragment(None, function={"arguments": "not json"}),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    assert events == [
        ToolCallEvent(ToolCall(id="a", name="get_weather", args={"city": "Oslo"})),
        ToolCallEvent(ToolCall(id="b", name="now", args={"_raw": "not json"})),
        FinishEvent("tool_calls"),
    ]

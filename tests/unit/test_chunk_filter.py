"""The chunk filter, rule by rule (seed rules 1-4)."""

from __future__ import annotations

from shared.models.chunks import ChunkFilter, Text, Thought, ToolCallChunk, filter_chunks
from shared.models.steps import Step, StepSource, StepTarget, StepType, ToolCall


def model_step(**fields: object) -> Step:
    base: dict[str, object] = {
        "source": StepSource.MODEL,
        "target": StepTarget.USER,
        "type": StepType.TEXT_RESPONSE,
    }
    return Step.model_validate(base | fields)


def test_rule1_thought_from_model_to_user_with_thinking_delta() -> None:
    assert filter_chunks([model_step(step_index=3, thinking_delta="hmm")]) == [
        Thought(step_index=3, text="hmm")
    ]


def test_rule1_no_thought_from_other_sources_or_targets() -> None:
    steps = [
        Step(source=StepSource.USER, target=StepTarget.USER, thinking_delta="a"),
        Step(source=StepSource.SYSTEM, target=StepTarget.USER, thinking_delta="b"),
        Step(source=StepSource.MODEL, target=StepTarget.UNSPECIFIED, thinking_delta="c"),
        model_step(thinking="full thinking but no delta"),
    ]
    assert filter_chunks(steps) == []


def test_rule2_text_from_model_to_user_with_content_delta() -> None:
    chunks = filter_chunks(
        [
            model_step(step_index=1, content_delta="Hel"),
            model_step(step_index=1, content_delta="lo"),
        ]
    )
    assert chunks == [Text(step_index=1, text="Hel"), Text(step_index=1, text="lo")]


def test_rule2_accumulated_content_alone_is_not_a_chunk() -> None:
    assert filter_chunks([model_step(content="Hello", is_complete_response=True)]) == []


def test_thought_comes_before_text_within_one_step() -> None:
    chunks = filter_chunks([model_step(step_index=2, thinking_delta="t", content_delta="x")])
    assert chunks == [Thought(step_index=2, text="t"), Text(step_index=2, text="x")]


def test_rule3_one_chunk_per_call_deduplicated_by_id() -> None:
    a, b = ToolCall(id="a", name="f", args={"x": 1}), ToolCall(id="b", name="g")
    steps = [
        model_step(type=StepType.TOOL_CALL, tool_calls=[a]),
        model_step(type=StepType.TOOL_CALL, tool_calls=[a, b]),
    ]
    assert filter_chunks(steps) == [ToolCallChunk(call=a), ToolCallChunk(call=b)]


def test_rule3_empty_ids_are_never_deduplicated() -> None:
    call = ToolCall(id="", name="f")
    steps = [model_step(tool_calls=[call]), model_step(tool_calls=[call, call])]
    assert filter_chunks(steps) == [ToolCallChunk(call=call)] * 3


def test_rule3_applies_to_steps_not_from_the_model() -> None:
    call = ToolCall(id="s1", name="f")
    step = Step(source=StepSource.SYSTEM, target=StepTarget.USER, tool_calls=[call])
    assert filter_chunks([step]) == [ToolCallChunk(call=call)]


def test_rule4_environment_targeted_steps_are_dropped() -> None:
    step = Step(
        source=StepSource.MODEL,
        target=StepTarget.ENVIRONMENT,
        thinking_delta="t",
        content_delta="c",
        tool_calls=[ToolCall(id="e", name="dispatch")],
    )
    assert filter_chunks([step]) == []


def test_dedup_state_lives_in_one_filter() -> None:
    call = ToolCall(id="same", name="f")
    first, second = ChunkFilter(), ChunkFilter()
    assert list(first.feed(model_step(tool_calls=[call]))) == [ToolCallChunk(call=call)]
    assert list(first.feed(model_step(tool_calls=[call]))) == []
    assert list(second.feed(model_step(tool_calls=[call]))) == [ToolCallChunk(call=call)]

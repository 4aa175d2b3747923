"""Runtime features end to end: structured output, limits, timeout, slash commands, tools."""

from __future__ import annotations

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from shared.models.chunks import Thought
from shared.models.events import StepEvent
from shared.models.steps import StepSource, StepStatus, StepTarget, StepType

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "integer", "minimum": 1}},
    "required": ["answer", "confidence"],
}


def test_response_schema_gives_validated_structured_output(client: Client) -> None:
    conversation = client.new_conversation(response_schema=SCHEMA)
    response = conversation.chat_to_completion("rate this")
    assert isinstance(response.structured_output, dict)
    assert response.structured_output["confidence"] >= 1
    finish = response.steps[-1]
    assert finish.type is StepType.FINISH and finish.structured_output == response.structured_output
    assert conversation.last_structured_output == response.structured_output


def test_model_call_cap_makes_one_last_call_without_tools(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True, max_model_calls=1)
    response = conversation.chat_to_completion('call calculator {"expression": "2+2"}')
    assert not any(s.type is StepType.TOOL_CALL for s in response.steps)
    assert "not to use tools" in response.text


def test_tool_call_cap_refuses_extra_calls_and_still_answers(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True, max_tool_calls=1)
    response = conversation.chat_to_completion(
        'call calculator {"expression": "1+1"} call calculator {"expression": "2+2"}'
    )
    results = [s for s in response.steps if s.type is StepType.TOOL_RESULT]
    assert [r.status for r in results] == [StepStatus.DONE, StepStatus.ERROR]
    assert "limit of 1" in results[1].error
    assert response.steps[-1].type is StepType.FINISH


def test_turn_timeout_ends_the_turn_with_an_error(client: Client) -> None:
    conversation = client.new_conversation(timeout_s=0.5)
    with pytest.raises(TurnFailed, match=r"timed out after 0\.5s"):
        conversation.chat_to_completion("#slow #long")
    assert conversation.history[-1].status is StepStatus.ERROR


def test_help_lists_the_commands(client: Client) -> None:
    response = client.new_conversation().chat_to_completion("/help")
    assert "/compact" in response.text and "/help" in response.text


def test_compact_records_a_compaction_step_and_index(client: Client) -> None:
    conversation = client.new_conversation()
    conversation.chat_to_completion("first fact: the sky is green")
    response = conversation.chat_to_completion("/compact")
    assert response.text.startswith("History compacted")
    history = conversation.history
    [index] = conversation.compaction_indices
    assert history[index].type is StepType.COMPACTION and history[index].content
    after = conversation.chat_to_completion("and now?")
    assert after.text.startswith("[demo model]")


def test_automatic_compaction_past_the_token_budget(client: Client) -> None:
    conversation = client.new_conversation(compaction_token_budget=30)
    conversation.chat_to_completion("a fairly long opening message " * 5)
    conversation.chat_to_completion("a second message that pushes the context past its budget")
    assert len(conversation.compaction_indices) >= 1
    compaction = conversation.history[conversation.compaction_indices[0]]
    assert compaction.type is StepType.COMPACTION


def test_read_file_returns_exact_content_and_canonical_path(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True)
    response = conversation.chat_to_completion('call read_file {"path": "hello.txt"}')
    call = next(s for s in response.steps if s.type is StepType.TOOL_CALL).tool_calls[0]
    assert call.canonical_path == "hello.txt"
    result = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert "hello from the workspace\\n" in result.content


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "escape"])
def test_workspace_escapes_are_refused(client: Client, path: str) -> None:
    conversation = client.new_conversation(allow_all=True)
    response = conversation.chat_to_completion(f'call read_file {{"path": "{path}"}}')
    result = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert result.status is StepStatus.ERROR
    assert "do not read" not in result.content and "root:" not in result.content


def test_invalid_tool_arguments_go_back_to_the_model(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True)
    response = conversation.chat_to_completion('call calculator {"expr": 1}')
    result = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert result.status is StepStatus.ERROR and "invalid arguments" in result.error
    assert response.steps[-1].type is StepType.FINISH


def test_tool_policy_deny_refuses(client: Client) -> None:
    conversation = client.new_conversation(tools={"calculator": "deny"})
    response = conversation.chat_to_completion('call calculator {"expression": "1"}')
    result = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert "denied by policy" in result.error


def test_every_event_carries_ids_and_deltas_come_in_order(client: Client) -> None:
    conversation = client.new_conversation()
    chunks = list(conversation.chat("check the events"))
    events = client.events.after(conversation.conversation_id)
    assert all(
        e.id and e.conversation_id == conversation.conversation_id and e.turn_id for e in events
    )
    step_events = [e for e in events if isinstance(e, StepEvent)]
    assert all(e.step_index == e.step.step_index for e in step_events)
    ids = [e.id for e in events]
    assert ids == sorted(ids, key=lambda i: tuple(int(p) for p in i.split("-")))
    thinking = "".join(c.text for c in chunks if isinstance(c, Thought))
    model_step = next(s for s in conversation.history if s.source is StepSource.MODEL)
    assert thinking == model_step.thinking
    assert model_step.target is StepTarget.USER


def test_tool_selection_required_and_none(client: Client) -> None:
    required = client.new_conversation(tools={"get_time": "auto"}, tool_selection="required")
    response = required.chat_to_completion("no directive here")
    assert [s.tool_calls[0].name for s in response.steps if s.type is StepType.TOOL_CALL] == [
        "get_time"
    ]
    assert "get_time returned" in response.text
    none = client.new_conversation(allow_all=True, tool_selection="none")
    refused = none.chat_to_completion('call calculator {"expression": "1+1"}')
    assert not any(s.type is StepType.TOOL_CALL for s in refused.steps)
    assert "not to use tools" in refused.text

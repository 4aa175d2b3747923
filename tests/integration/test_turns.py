"""Turns end to end: a real Redis, a real Celery worker, the scripted model."""

from __future__ import annotations

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from shared.models.chunks import Text, Thought, ToolCallChunk
from shared.models.events import CompletedEvent, FailedEvent, StepEvent, TurnStartedEvent
from shared.models.steps import StepType


def test_chat_streams_thoughts_then_text_and_completes(client: Client) -> None:
    conversation = client.new_conversation()
    chunks = list(conversation.chat("Hello there"))
    kinds = [type(c) for c in chunks]
    assert Thought in kinds and Text in kinds
    assert kinds.index(Thought) < kinds.index(Text)
    text = "".join(c.text for c in chunks if isinstance(c, Text))
    assert text.startswith("[demo model]")
    assert conversation.last_response == text
    assert conversation.turn_count == 1
    assert conversation.is_idle


def test_chat_to_completion_with_a_tool_call(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True)
    response = conversation.chat_to_completion('call calculator {"expression": "6*7"}')
    assert "42" in response.text
    types = [s.type for s in response.steps]
    assert types[0] is StepType.USER_INPUT
    assert StepType.TOOL_CALL in types and StepType.TOOL_RESULT in types
    assert types[-1] is StepType.FINISH
    assert response.usage_metadata is not None and response.usage_metadata.total_token_count > 0
    chunks = list(conversation.chat('call calculator {"expression": "1+1"}'))
    assert [c.call.name for c in chunks if isinstance(c, ToolCallChunk)] == ["calculator"]


def test_events_follow_a_turn_to_its_terminal_event(client: Client) -> None:
    conversation = client.new_conversation(allow_all=True)
    first = conversation.send("an earlier turn")
    turn_id = conversation.send('call calculator {"expression": "6*7"}')
    events = list(conversation.events(turn_id))
    assert first != turn_id and all(e.turn_id == turn_id for e in events)
    assert isinstance(events[0], TurnStartedEvent) and isinstance(events[-1], CompletedEvent)
    assert "42" in events[-1].response.text
    ids = [e.id for e in events]
    assert None not in ids and ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert any(isinstance(e, StepEvent) for e in events)


def test_events_end_from_the_turn_record_when_the_stream_lost_the_terminal(
    client: Client,
) -> None:
    conversation = client.new_conversation()
    turn_id = conversation.send("hello")
    conversation.wait_for_turn(turn_id, timeout=30)
    client.redis.delete(client.keys.events(conversation.conversation_id))  # as if trimmed
    (rebuilt,) = list(conversation.events(turn_id))
    assert isinstance(rebuilt, CompletedEvent) and rebuilt.id is None
    assert rebuilt.response.text == conversation.last_response
    assert conversation.wait_for_turn(turn_id, timeout=5).text == conversation.last_response


def test_events_of_a_failed_turn_end_with_its_failed_event(client: Client) -> None:
    conversation = client.new_conversation()
    conversation.send("this one will #fail")
    events = list(conversation.events())  # the running (or queued) turn
    assert isinstance(events[-1], FailedEvent) and "scripted failure" in events[-1].error
    with pytest.raises(TurnFailed, match="scripted failure"):
        conversation.wait_for_turn(events[-1].turn_id, timeout=5)

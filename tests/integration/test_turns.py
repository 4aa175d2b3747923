"""Turns end to end: a real Redis, a real Celery worker, the scripted model."""

from __future__ import annotations

from shared.chunks import Text, Thought, ToolCallChunk
from shared.client import Client
from shared.steps import StepType


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

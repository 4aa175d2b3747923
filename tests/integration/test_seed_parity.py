"""The seed's semantics through the public Python API against a real worker.

Slash text that is not a command reaches the model; a turn's steps survive trimming;
close settles; per-prompt options hold for their turn only.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from shared.client import Client
from shared.client.aio import AsyncClient
from shared.errors import ConversationClosed, InvalidInput, PromptRejected, TurnFailed
from shared.models.chunks import ToolCallChunk
from shared.models.content import Content, SlashCommand, TextPart
from shared.models.events import ConversationStatus, TurnStatus
from shared.models.notifications import Allow
from shared.models.steps import StepSource, StepType
from shared.settings import Settings
from tests.stack import effect_prompt, parked

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {
    "SIGNOFF_FLUSH_INTERVAL_MS": "10",
}


# Slash commands


@pytest.mark.parametrize(
    "prompt",
    [
        "/etc/hosts is which file?",
        Content(parts=[TextPart(text="/help me understand this")]),
        "/frobnicate now",
    ],
)
def test_text_that_starts_with_a_slash_reaches_the_model(
    client: Client, prompt: str | Content
) -> None:
    conversation = client.new_conversation()
    text = prompt if isinstance(prompt, str) else prompt.text
    response = conversation.chat_to_completion(prompt)
    assert f'You said: "{text}"' in response.text
    [user_input] = [s for s in response.steps if s.type is StepType.USER_INPUT]
    assert user_input.content == text and user_input.command == ""


def test_a_command_with_a_control_character_is_still_the_command(client: Client) -> None:
    response = client.new_conversation().chat_to_completion("/help\x00")
    assert response.text.startswith("Slash commands:")
    assert not any(s.source is StepSource.MODEL for s in response.steps)


def test_a_command_turn_never_reaches_the_model_later(client: Client) -> None:
    conversation = client.new_conversation()
    conversation.chat_to_completion("/help")
    response = conversation.chat_to_completion("hello")
    assert 'You said: "hello"' in response.text
    assert "/help" not in response.thinking


def test_an_unknown_explicit_command_is_refused_before_anything_is_queued(client: Client) -> None:
    conversation = client.new_conversation()
    with pytest.raises(PromptRejected, match="unknown slash command 'frobnicate'"):
        conversation.send(Content(parts=[SlashCommand(name="frobnicate")]))
    assert conversation.record().queued == 0 and conversation.history == []


# Steps of a turn, whatever the history bound


def test_steps_are_complete_when_history_is_trimmed_across_an_approval(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"}, max_history_size=2)
    turn_id = conversation.send(effect_prompt("trimmed"))
    [note] = parked(conversation)
    conversation.resolve_notification(note.id, Allow())
    response = conversation.wait_for_turn(turn_id, timeout=30)
    kinds = [s.type for s in response.steps]
    assert kinds == [
        StepType.USER_INPUT,
        StepType.TOOL_CALL,
        StepType.TOOL_RESULT,
        StepType.TEXT_RESPONSE,
        StepType.FINISH,
    ]
    assert [s.step_index for s in response.steps] == list(range(5))
    assert len(conversation.history) == 2  # the bound still holds for retained history
    second = conversation.chat_to_completion("and then?")
    assert second.steps[0].type is StepType.USER_INPUT
    assert len(second.steps) == 3  # the previous turn's overflow is not carried over


# close settles


def test_close_returns_once_the_running_turn_has_ended(client: Client) -> None:
    conversation = client.new_conversation()
    turn_id = conversation.send("#slow #long")
    deadline = time.monotonic() + 10
    while client.store.turn(conversation.conversation_id, turn_id).status is TurnStatus.QUEUED:
        assert time.monotonic() < deadline, "the turn never started"
        time.sleep(0.01)
    conversation.close(timeout=30)
    assert client.store.turn(conversation.conversation_id, turn_id).status in (
        TurnStatus.CANCELLED,
        TurnStatus.COMPLETED,
    )
    assert conversation.is_idle and conversation.status is ConversationStatus.CLOSED
    with pytest.raises(ConversationClosed):
        conversation.send("more")


def test_close_settles_a_parked_turn(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn_id = conversation.send(effect_prompt("closed-while-parked"))
    parked(conversation)
    conversation.close(timeout=30)
    turn = client.store.turn(conversation.conversation_id, turn_id)
    assert turn.status is TurnStatus.CANCELLED
    assert conversation.pending_notifications() == []


def test_close_times_out_when_no_worker_settles_the_turn(client: Client) -> None:
    conversation = client.new_conversation()
    # A turn marked running that no worker holds: close cannot settle it in time.
    client.redis.hset(client.keys.conversation(conversation.conversation_id), "active_turn", "x")
    with pytest.raises(TimeoutError, match=r"had not settled within 0\.3s"):
        conversation.close(timeout=0.3)
    with pytest.raises(ConversationClosed):
        conversation.send("refused at once, whatever the wait")


# Per-prompt options


def test_tool_selection_applies_to_its_turn_only(client: Client) -> None:
    conversation = client.new_conversation(tools={"get_time": "auto"})
    refused = conversation.chat_to_completion("call get_time {}", tool_selection="none")
    assert "not to use tools" in refused.text
    assert not any(s.type is StepType.TOOL_CALL for s in refused.steps)
    required = conversation.chat_to_completion("no directive here", tool_selection="required")
    assert any(s.type is StepType.TOOL_CALL for s in required.steps)
    default = conversation.chat_to_completion("no directive here")
    assert not any(s.type is StepType.TOOL_CALL for s in default.steps)


def test_timeout_applies_to_its_turn_only(client: Client) -> None:
    conversation = client.new_conversation()
    with pytest.raises(TurnFailed, match=r"timed out after 0\.3s"):
        conversation.chat_to_completion("#slow #long", timeout_s=0.3)
    assert conversation.chat_to_completion("#slow quick one").text.startswith("[demo model]")


def test_response_schema_applies_to_its_turn_only(client: Client) -> None:
    conversation = client.new_conversation()
    structured = conversation.chat_to_completion("rate this", response_schema=ANSWER)
    assert isinstance(structured.structured_output, dict)
    assert isinstance(structured.structured_output["answer"], str)
    plain = conversation.chat_to_completion("and now plainly")
    assert plain.structured_output is None and plain.text.startswith("[demo model]")


def test_stream_and_content_take_options(client: Client) -> None:
    conversation = client.new_conversation(tools={"get_time": "auto"})
    chunks = list(conversation.chat("plain", tool_selection="required"))
    assert any(isinstance(c, ToolCallChunk) for c in chunks)
    response = conversation.chat_content(
        Content(parts=[TextPart(text="rate it")]), response_schema=ANSWER
    )
    assert isinstance(response.structured_output, dict)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": float("inf")}, "timeout_s"),
        ({"tool_selection": "sometimes"}, "tool_selection"),
        ({"response_schema": {"type": "no-such-type"}}, "response_schema"),
    ],
)
def test_bad_options_are_refused_before_anything_is_queued(
    client: Client, options: dict[str, object], problem: str
) -> None:
    conversation = client.new_conversation()
    with pytest.raises(InvalidInput, match=problem):
        conversation.send("hello", **options)  # type: ignore[arg-type]
    assert conversation.record().queued == 0


def test_async_client_takes_options_and_close_settles(stack_env: dict[str, str]) -> None:
    async def scenario() -> None:
        settings = Settings(
            redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
        )
        async with AsyncClient(settings) as client:
            conversation = await client.new_conversation(tools={"get_time": "auto"})
            response = await conversation.chat_to_completion(
                "call get_time {}", tool_selection="none"
            )
            assert "not to use tools" in response.text
            structured = await conversation.chat_to_completion("rate", response_schema=ANSWER)
            assert isinstance(structured.structured_output, dict)
            await conversation.send("#slow #long")
            await conversation.close(timeout=30)
            assert await conversation.is_idle

    asyncio.run(scenario())

"""Turn semantics from the seeds: boundaries, abort, close, double-text policies, limits."""

from __future__ import annotations

import threading
import time

import pytest

from shared.client import Client
from shared.errors import (
    Cancelled,
    Conflict,
    ConversationClosed,
    PayloadTooLarge,
    PromptRejected,
    TurnFailed,
)
from shared.models.chunks import Text
from shared.models.steps import StepSource, StepStatus, StepType


def test_history_turns_and_usage_over_several_turns(client: Client) -> None:
    conversation = client.new_conversation()
    first = conversation.chat_to_completion("one")
    second = conversation.chat_to_completion("two")
    history = conversation.history
    assert conversation.turn_count == 2
    starts = conversation.snapshot().turn_start_indices
    assert [history[i].content for i in starts] == ["one", "two"]
    assert all(history[i].type is StepType.USER_INPUT for i in starts)
    assert first.usage_metadata is not None and second.usage_metadata is not None
    # the second call's context holds the first turn too
    assert second.usage_metadata.prompt_token_count > first.usage_metadata.prompt_token_count + 1
    total = first.usage_metadata + second.usage_metadata
    assert conversation.total_usage == total
    assert conversation.last_turn_usage == second.usage_metadata
    assert [s.step_index for s in history] == list(range(len(history)))


def test_each_stream_sees_only_its_own_turn(client: Client) -> None:
    conversation = client.new_conversation()
    first = conversation.send("first #slow")
    second_chunks = list(conversation.chat("second"))
    text = "".join(c.text for c in second_chunks if isinstance(c, Text))
    assert "second" in text and "first" not in text
    assert conversation.wait_for_turn(first).text.count("first") >= 1


def test_dropping_a_stream_cancels_nothing(client: Client) -> None:
    conversation = client.new_conversation()
    stream = conversation.chat("keep going #slow")
    next(stream)
    stream.close()
    assert conversation.wait_for_idle(timeout=30)
    assert conversation.last_response.startswith("[demo model]")
    assert conversation.history[-1].type is StepType.FINISH


def test_a_caller_who_stops_reading_loses_nothing(client: Client) -> None:
    conversation = client.new_conversation()
    stream = conversation.chat("abandoned #slow")
    next(stream)
    response = conversation.chat_to_completion("next")
    history = conversation.history
    starts = conversation.snapshot().turn_start_indices
    assert history[starts[1]].content == "next"
    assert history[starts[1] - 1].type is StepType.FINISH  # the first turn ended, whole, before
    assert response.steps[0].content == "next"


def test_abort_mid_stream_ends_running_and_queued_turns(client: Client) -> None:
    conversation = client.new_conversation()
    stream = conversation.chat("a long one #slow #long")
    queued = conversation.send("queued behind it")
    next(stream)
    conversation.abort()
    with pytest.raises(Cancelled):
        list(stream)
    with pytest.raises(Cancelled):
        conversation.wait_for_turn(queued, timeout=10)
    assert conversation.wait_for_idle(timeout=10)
    partial = [s for s in conversation.history if s.status is StepStatus.CANCELED]
    assert partial and partial[0].source is StepSource.MODEL
    assert conversation.chat_to_completion("after abort").text.startswith("[demo model]")


def test_close_refuses_new_prompts_and_keeps_history(client: Client) -> None:
    conversation = client.new_conversation()
    conversation.chat_to_completion("remember me")
    conversation.close()
    with pytest.raises(ConversationClosed, match="closed"):
        conversation.send("more")
    assert conversation.history[0].content == "remember me"
    assert conversation.status.value == "closed"


def test_policy_reject_refuses_a_second_prompt(client: Client) -> None:
    conversation = client.new_conversation(double_text_policy="reject")
    running = conversation.send("busy #slow")
    with pytest.raises(Conflict, match="reject"):
        conversation.send("too soon")
    conversation.wait_for_turn(running, timeout=30)
    assert conversation.chat_to_completion("now").text


def test_policy_interrupt_cancels_the_running_turn(client: Client) -> None:
    conversation = client.new_conversation(double_text_policy="interrupt")
    running = conversation.send("slow one #slow #long")
    time.sleep(0.3)
    response = conversation.chat_to_completion("replacement")
    assert "replacement" in response.text
    with pytest.raises(Cancelled, match=r"aborted|interrupted"):
        conversation.wait_for_turn(running, timeout=10)


def test_policy_enqueue_runs_turns_in_order(client: Client) -> None:
    conversation = client.new_conversation()
    turns = [conversation.send(f"number {i}") for i in range(3)]
    texts = [conversation.wait_for_turn(t, timeout=30).text for t in turns]
    assert all(f"number {i}" in text for i, text in enumerate(texts))
    starts = conversation.snapshot().turn_start_indices
    assert [conversation.history[i].content for i in starts] == [f"number {i}" for i in range(3)]


def test_bad_prompts_are_rejected_before_anything_is_queued(client: Client) -> None:
    conversation = client.new_conversation()
    with pytest.raises(PromptRejected, match="empty"):
        conversation.send("\x00\x01  ")
    with pytest.raises(PayloadTooLarge):
        conversation.send("x" * (client.settings.max_prompt_text_bytes + 1))
    assert conversation.turn_count == 0
    assert conversation.is_idle
    assert client.redis.llen(client.keys.inbox(conversation.conversation_id)) == 0


def test_failed_turn_raises_and_records_an_error_step(client: Client) -> None:
    conversation = client.new_conversation()
    with pytest.raises(TurnFailed, match="scripted failure"):
        conversation.chat_to_completion("please #fail")
    last = conversation.history[-1]
    assert last.status is StepStatus.ERROR and last.http_code == 500


def test_unknown_model_is_a_clear_error_not_a_fallback(client: Client) -> None:
    conversation = client.new_conversation(model="gpt-imaginary")
    with pytest.raises(TurnFailed, match="unknown model 'gpt-imaginary'"):
        conversation.chat_to_completion("hi")


def test_unknown_provider_ends_the_turn_with_an_error(client: Client) -> None:
    conversation = client.new_conversation(provider="nonesuch")
    with pytest.raises(TurnFailed, match=r"unknown provider 'nonesuch'"):
        conversation.chat_to_completion("hi")
    assert conversation.chat_to_completion is not None  # the worker is still alive:
    assert client.new_conversation().chat_to_completion("alive?").text


def test_wait_for_idle_returns_at_once_when_idle(client: Client) -> None:
    conversation = client.new_conversation()
    started = time.monotonic()
    assert conversation.wait_for_idle(timeout=5)
    assert time.monotonic() - started < 0.5


def test_wait_for_idle_is_woken_by_the_turn_ending(client: Client) -> None:
    conversation = client.new_conversation()
    conversation.send("slowly #slow")
    assert not conversation.is_idle
    done = threading.Event()
    threading.Thread(
        target=lambda: done.set() if conversation.wait_for_idle(timeout=30) else None
    ).start()
    assert done.wait(30)
    assert conversation.history[-1].type is StepType.FINISH

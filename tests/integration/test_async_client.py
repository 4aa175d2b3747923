"""The asyncio client against a real worker: the same semantics with `async for`."""

from __future__ import annotations

import asyncio

import pytest

from shared.client import Client
from shared.client.aio import AsyncClient
from shared.errors import Cancelled, Conflict, InvalidInput, PromptRejected
from shared.models.chunks import Text, Thought
from shared.models.events import CancelledEvent, CompletedEvent, EventBase
from shared.models.steps import StepType


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_async_chat_streams_and_completes(client: Client) -> None:
    async def scenario() -> tuple[list, object, int]:
        async with AsyncClient(client.settings) as aclient:
            conversation = await aclient.new_conversation(allow_all=True)
            chunks = [c async for c in await conversation.chat("hello async")]
            response = await conversation.chat_to_completion(
                'call calculator {"expression": "3*3"}'
            )
            return chunks, response, await conversation.turn_count

    chunks, response, turns = run(scenario())
    assert isinstance(chunks[0], Thought)
    assert "hello async" in "".join(c.text for c in chunks if isinstance(c, Text))
    assert "9" in response.text  # type: ignore[attr-defined]
    assert turns == 2


def test_async_send_under_a_turn_id_queues_once(client: Client) -> None:
    async def scenario() -> tuple[str, str, str]:
        async with AsyncClient(client.settings) as aclient:
            conversation = await aclient.new_conversation()
            first = await conversation.send("once, async", turn_id="async-once")
            again = await conversation.send("once, async", turn_id="async-once")
            with pytest.raises(Conflict, match="another prompt"):
                await conversation.send("something else", turn_id="async-once")
            response = await conversation.wait_for_turn("async-once", timeout=30)
            return first, again, conversation.conversation_id + " " + response.text

    first, again, found = run(scenario())
    cid, text = found.split(" ", 1)
    assert first == again == "async-once" and "once, async" in text
    assert client.redis.smembers(client.keys.turn_ids(cid)) == {"async-once"}
    assert client.redis.hget(client.keys.conversation(cid), "active_turn") in (None, "")


def test_async_abort_and_validation(client: Client) -> None:
    async def scenario() -> list[StepType]:
        async with AsyncClient(client.settings) as aclient:
            conversation = await aclient.new_conversation()
            with pytest.raises(PromptRejected):
                await conversation.send("\x00")
            stream = await conversation.chat("slow #slow #long")
            await stream.__anext__()
            await conversation.abort()
            with pytest.raises(Cancelled):
                async for _ in stream:
                    pass
            assert await conversation.wait_for_idle(timeout=10)
            return [s.type for s in await conversation.history]

    types = run(scenario())
    assert types[0] is StepType.USER_INPUT and StepType.FINISH not in types


def test_async_events_follow_a_turn_and_end_cancelled(client: Client) -> None:
    async def scenario() -> tuple[list[EventBase], list[EventBase]]:
        async with AsyncClient(client.settings) as aclient:
            conversation = await aclient.new_conversation(allow_all=True)
            turn_id = await conversation.send('call calculator {"expression": "3*3"}')
            done = [e async for e in conversation.events(turn_id)]
            await conversation.send("slow #slow #long")
            cancelled: list[EventBase] = []
            async for event in conversation.events():  # the running (or queued) turn
                if not cancelled:
                    await conversation.abort()
                cancelled.append(event)
            return done, cancelled

    done, cancelled = run(scenario())
    assert isinstance(done[-1], CompletedEvent) and "9" in done[-1].response.text
    assert len({e.turn_id for e in done}) == 1
    assert isinstance(cancelled[-1], CancelledEvent)
    assert cancelled[-1].turn_id != done[-1].turn_id


def test_async_fork_keeps_the_first_steps_and_goes_on_from_there(client: Client) -> None:
    async def scenario() -> None:
        async with AsyncClient(client.settings) as aclient:
            original = await aclient.new_conversation(allow_all=True)
            await original.chat_to_completion('call calculator {"expression": "6*7"}')
            await original.chat_to_completion("a second turn")
            before = await original.snapshot()
            k = before.turn_start_indices[1]  # the whole first turn, its tool call and result
            assert k > 3 and before.steps[k - 1].type is StepType.FINISH

            fork = await original.fork(k, conversation_id="async-fork")
            assert fork.conversation_id == "async-fork"
            assert await fork.is_idle and await fork.history == before.steps[:k]
            response = await fork.chat_to_completion("a different second turn")
            after = await fork.snapshot()
            assert after.steps[:k] == before.steps[:k]
            assert after.steps[k].content == "a different second turn"
            assert after.turn_start_indices == [0, k] and after.last_response == response.text
            assert await original.snapshot() == before
            with pytest.raises(InvalidInput, match="at_step"):
                await original.fork(len(before.steps) + 1)
            with pytest.raises(Conflict):
                await original.fork(k, conversation_id="async-fork")

    run(scenario())

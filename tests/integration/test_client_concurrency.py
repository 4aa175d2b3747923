"""One client shared by 200 threads (or tasks): they wait for a connection, none fails.

The bursts race on one thing so that exactly one caller wins and every other one
gets a Conflict: any other outcome (a StorageError from an exhausted pool) fails.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter

import pytest

from shared.client import Client
from shared.client.aio import AsyncClient
from shared.client.tasks import TaskSender, queue_name
from shared.errors import Conflict, StorageError
from shared.models.steps import StepType
from shared.settings import Settings
from tests.stack import parked

# one Redis: bounds the pools of a one-Redis client and its broker
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

RACERS = 200
EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Hi", "body": "Hello."}'


def outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "won"
    if isinstance(exc, Conflict):
        return "conflict"
    return f"{exc.__class__.__name__}: {exc}"


def test_two_hundred_threads_resolving_one_notification_get_one_winner(client: Client) -> None:
    conversation = client.new_conversation()
    turn = conversation.send(EMAIL)
    [note] = parked(conversation)
    outcomes: list[str] = []
    barrier = threading.Barrier(RACERS)

    def resolve(i: int) -> None:
        barrier.wait()
        try:
            client.resolve_notification(note.id, {"kind": "allow"}, actor=f"op{i}")
        except Exception as exc:
            outcomes.append(outcome(exc))
        else:
            outcomes.append(outcome(None))

    threads = [threading.Thread(target=resolve, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(outcomes) == {"won": 1, "conflict": RACERS - 1}
    opened = client.redis.connection_pool._connections  # type: ignore[attr-defined]
    assert len(opened) <= client.settings.client_redis_connections
    steps = conversation.wait_for_turn(turn, timeout=30).steps
    assert [s.type for s in steps].count(StepType.TOOL_RESULT) == 1


def test_two_hundred_async_tasks_sending_to_one_busy_conversation_get_one_winner(
    client: Client,
) -> None:
    async def scenario(aclient: AsyncClient) -> Counter[str]:
        conversation = await aclient.new_conversation(double_text_policy="reject")

        async def send() -> str:
            try:
                await conversation.send(EMAIL)
            except Exception as exc:
                return outcome(exc)
            return outcome(None)

        outcomes = await asyncio.gather(*(send() for _ in range(RACERS)))
        await conversation.abort()
        return Counter(outcomes)

    async def run() -> Counter[str]:
        async with AsyncClient(client.settings) as aclient:
            return await scenario(aclient)

    assert asyncio.run(run()) == {"won": 1, "conflict": RACERS - 1}


def test_two_hundred_threads_sending_tasks_wait_for_the_broker_pool(settings: Settings) -> None:
    """No worker reads this prefix's queue: every send must land there, none fail."""
    settings = settings.model_copy(update={"key_prefix": f"tc{uuid.uuid4().hex[:8]}"})
    sender = TaskSender(settings)
    failures: list[str] = []
    barrier = threading.Barrier(RACERS)

    def send(i: int) -> None:
        barrier.wait()
        try:
            sender.advance(f"c{i}")
        except Exception as exc:
            failures.append(outcome(exc))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(RACERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sender.close()
    assert failures == []
    client = Client(settings)
    try:
        queue = f"{settings.key_prefix}:celery:{queue_name(settings)}"
        assert client.redis.llen(queue) == RACERS
        client.redis.delete(queue)
    finally:
        client.close()


def starved(settings: Settings, **overrides: object) -> Settings:
    return settings.model_copy(update={"redis_pool_wait_s": 0.2, **overrides})


def test_a_starved_client_pool_raises_storage_error_naming_the_setting(
    settings: Settings,
) -> None:
    with Client(starved(settings, client_redis_connections=1)) as client:
        pool = client.redis.connection_pool
        held = pool.get_connection()
        try:
            with pytest.raises(StorageError, match="SIGNOFF_CLIENT_REDIS_CONNECTIONS") as raised:
                client.conversation("c-nothing")
        finally:
            pool.release(held)
        assert "client" in str(raised.value) and "SIGNOFF_REDIS_POOL_WAIT_S" in str(raised.value)
        assert client.redis.ping()


def test_a_starved_async_pool_raises_storage_error_naming_the_setting(
    settings: Settings,
) -> None:
    async def run() -> str:
        async with AsyncClient(starved(settings, client_redis_connections=1)) as aclient:
            conversation = await aclient.new_conversation()
            pool = aclient.redis.connection_pool
            held = await pool.get_connection()
            try:
                with pytest.raises(StorageError) as raised:
                    await conversation.record()
            finally:
                await pool.release(held)
            await conversation.record()
            return str(raised.value)

    message = asyncio.run(run())
    assert "SIGNOFF_CLIENT_REDIS_CONNECTIONS" in message and "async" in message


def test_a_starved_broker_pool_raises_storage_error_naming_the_setting(
    settings: Settings,
) -> None:
    settings = starved(settings, key_prefix=f"tc{uuid.uuid4().hex[:8]}", broker_connections=1)
    sender = TaskSender(settings)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            sender.advance("c-starved")
        except BaseException as exc:
            errors.append(exc)

    held = sender.app.pool.acquire(block=True)
    try:
        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the send waited for a producer without a time limit"
    finally:
        held.release()
        sender.close()
    [error] = errors
    assert isinstance(error, StorageError)
    assert "SIGNOFF_BROKER_CONNECTIONS" in str(error) and "SIGNOFF_REDIS_POOL_WAIT_S" in str(error)

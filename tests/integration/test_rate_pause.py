"""A provider's 429 with Retry-After pauses its calls from every worker: two real workers, a
stand-in speaking the OpenAI wire format that answers one call 429 with `Retry-After: 2`. No
call reaches it for those 2 s, whichever worker makes it, and the turn that got the 429 calls
again after them and succeeds. No rate limit is configured: the pause alone holds the calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.stack import WorkerProcess
from tests.wire_servers import (
    RecordedRequest,
    Reply,
    WireServer,
    chat_chunk,
    openai_error,
    sse,
    usage_chunk,
)

__all__ = ["model_server"]  # a fixture of this module

RETRY_AFTER_S = 2.0
OTHERS = 8


def answer(request: RecordedRequest) -> Reply:
    del request
    return sse(chat_chunk(content="done"), chat_chunk(finish_reason="stop"), usage_chunk(5, 1))


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    return stand_in_env(redis_server, model_server)


@pytest.fixture(scope="module")
def workers(stack_env: dict[str, str]) -> Iterator[list[WorkerProcess]]:
    started = [WorkerProcess(stack_env, name=f"p{n}", concurrency=8).start() for n in range(2)]
    yield started
    for process in started:
        process.stop()


@pytest.fixture
def client(stack_env: dict[str, str], workers: list[WorkerProcess]) -> Iterator[Client]:
    with stack_client(stack_env, workers) as signoff:
        yield signoff


def _chats(client: Client, prompts: list[str]) -> dict[str, str]:
    """Each prompt in a conversation of its own, all at once: conversation id -> answer."""
    answers: dict[str, str] = {}

    def one(prompt: str) -> None:
        conversation = client.new_conversation(provider="openai", model="m")
        answers[conversation.conversation_id] = conversation.chat_to_completion(prompt).text

    threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_a_429_pauses_every_workers_calls_and_the_turn_then_succeeds(
    client: Client, model_server: WireServer, workers: list[WorkerProcess]
) -> None:
    model_server.script(*[answer] * OTHERS)
    assert set(_chats(client, [f"warm {n}" for n in range(OTHERS)]).values()) == {"done"}

    model_server.script(
        openai_error(429, "slow down", headers={"Retry-After": f"{RETRY_AFTER_S:g}"}),
        *[answer] * (OTHERS + 1),
    )
    first = len(model_server.requests)
    limited = client.new_conversation(provider="openai", model="m")
    turn = limited.send("the one that hits the limit")
    pause = client.keys.rate_pause("openai")
    deadline = time.monotonic() + 10
    while client.redis.pttl(pause) <= 0:
        assert time.monotonic() < deadline, "the 429 set no pause"
        time.sleep(0.005)
    answers = _chats(client, [f"after the 429 {n}" for n in range(OTHERS)])
    retried = limited.wait_for_turn(turn, timeout=30)

    calls = model_server.requests[first:]
    hit = calls[0].received_at
    later = [call.received_at - hit for call in calls[1:]]
    print(f"calls after the 429, seconds after it: {[round(t, 3) for t in sorted(later)]}")
    assert len(later) == OTHERS + 1
    assert min(later) >= RETRY_AFTER_S - 0.05, later  # none during the pause
    assert max(later) < RETRY_AFTER_S + 2.0, later
    assert retried.text == "done" and set(answers.values()) == {"done"}
    for worker in workers:  # both workers' calls were held
        assert any(f"advance {cid}: finished" in worker.log() for cid in answers), worker.name

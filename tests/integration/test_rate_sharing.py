"""A provider's rate limit shared fairly by real workers: two batches and a person's chat under
one tight limit (10 calls a second, one at a time) on a stand-in speaking the OpenAI wire
format. The chat waits about one call's slot, not behind the batches' line; the two batches'
completed counts stay within 10% of each other while they run (sampled every 50 ms)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.config import ConversationOptions
from shared.store.batches import parse_line
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.wire_servers import RecordedRequest, Reply, WireServer, chat_chunk, sse, usage_chunk

__all__ = ["model_server"]  # a fixture of this module

PER_SECOND = 10  # the provider's limit: a call every SLOT_S, one at a time
SLOT_S = 1 / PER_SECOND
ITEMS, CONCURRENCY = 40, 10  # per batch: 20 calls wait in line at any time


def answer(request: RecordedRequest) -> Reply:
    del request
    return sse(chat_chunk(content="done"), chat_chunk(finish_reason="stop"), usage_chunk(20, 10))


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    model_server.script(*[answer] * 1_000)
    limits = {"openai": {"requests_per_minute": PER_SECOND * 60, "burst_s": SLOT_S}}
    return stand_in_env(redis_server, model_server, SIGNOFF_RATE_LIMITS=json.dumps(limits))


@pytest.fixture(scope="module")
def workers(stack_env: dict[str, str]) -> Iterator[None]:
    """Two worker processes wait in the same line."""
    from tests.stack import WorkerProcess

    started = [WorkerProcess(stack_env, name=f"r{n}", concurrency=16).start() for n in range(2)]
    yield
    for process in started:
        process.stop()


@pytest.fixture
def client(stack_env: dict[str, str], workers: None) -> Iterator[Client]:
    with stack_client(stack_env, workers) as signoff:
        yield signoff


def _start_batch(client: Client, name: str) -> str:
    config = ConversationOptions(provider="openai", model="m").resolve(
        client.settings, policy_may_loosen=True
    )
    batches = client.stores.batches
    bid = batches.create(BatchConfig(conversation=config, max_concurrency=CONCURRENCY))
    raw = [json.dumps({"id": f"{name}{n}", "prompt": f"{name} item {n}"}) for n in range(ITEMS)]
    lines = [parse_line(n + 1, line, client.settings) for n, line in enumerate(raw)]
    batches.submit(bid, [line for line in lines if line is not None])
    batches.finish_submission(bid)
    return bid


class Sampler:
    """Both batches' completed counts every 50 ms, on a thread, until both are done."""

    def __init__(self, client: Client, bids: list[str]) -> None:
        self.client, self.bids = client, bids
        self.samples: list[tuple[int, ...]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self._stop.is_set():
            infos = [self.client.stores.batches.info(bid) for bid in self.bids]
            self.samples.append(tuple(info.counts[BatchState.DONE] for info in infos))
            if all(info.status is BatchStatus.DONE for info in infos):
                return
            time.sleep(0.05)

    def finish(self, *, stop: bool = False) -> list[tuple[int, ...]]:
        if stop:
            self._stop.set()
        self._thread.join(timeout=70)
        return self.samples


def _prompt(request: RecordedRequest) -> str:
    return str(request.json()["messages"][-1]["content"])


def _chat_delay(client: Client, model_server: WireServer, prompt: str) -> float:
    """Seconds from sending a chat's prompt to its model call reaching the stand-in."""
    sent = time.monotonic()
    assert client.new_conversation(provider="openai", model="m").chat_to_completion(prompt)
    call = next(r for r in reversed(model_server.requests) if _prompt(r) == prompt)
    return call.received_at - sent


def test_a_chat_waits_one_slot_and_batches_take_turns(
    client: Client, model_server: WireServer
) -> None:
    first = len(model_server.requests)
    # the provider is paused while both batches start, so both are in line from their first
    # call: round-robin keeps what lead a batch has, and this keeps either from having one
    pause = client.keys.rate_pause("openai")
    client.redis.set(pause, "test", px=60_000)
    bids = [_start_batch(client, "a"), _start_batch(client, "b")]
    sampler = Sampler(client, bids)
    try:
        queued = client.keys.rate_queue("openai", "*", "batch")
        deadline = time.monotonic() + 30  # a worker's first call imports the SDK: seconds
        while client.redis.zcard(queued) < 2 * CONCURRENCY:
            assert time.monotonic() < deadline, "the batches never waited in line"
            time.sleep(0.05)
        client.redis.delete(pause)
        time.sleep(1.0)  # the batches take turns at the limit
        sent = time.monotonic()
        chat = client.new_conversation(provider="openai", model="m")
        assert chat.chat_to_completion("a person asks").text == "done"
        answered = time.monotonic() - sent
    except BaseException:
        sampler.finish(stop=True)
        raise
    samples = sampler.finish()

    calls = model_server.requests[first:]
    at_chat = next(n for n, r in enumerate(calls) if _prompt(r) == "a person asks")
    chat_call = calls[at_chat]
    before = [r for r in calls[:at_chat] if r.received_at > sent]
    # FIFO would put the chat behind the ~20 batch calls in line: 2 s and 20 calls
    assert len(before) <= 2, [_prompt(r) for r in before]
    waited = chat_call.received_at - sent
    idle = min(_chat_delay(client, model_server, f"then alone {n}") for n in range(3))
    print(f"chat: {waited:.3f}s to its call behind the batches, {idle:.3f}s alone")
    assert waited < idle + SLOT_S + 0.3  # FIFO: + 2 s
    assert samples[-1] == (ITEMS, ITEMS)
    uneven = [(a, b) for a, b in samples if max(a, b) >= 10 and abs(a - b) > 0.1 * max(a, b)]
    assert not uneven, uneven
    print(f"chat answered in {answered:.3f}s; samples {sorted(set(samples))}")

"""The delta ticker against a real Redis: many conversations per round trip, fenced one by one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from shared.models.events import EVENT, StepEvent
from shared.settings import Settings
from shared.store.keys import KeySpace
from worker.deltas import DeltaFlusher
from worker.providers.base import FinishEvent, ProviderEvent, TextDelta
from worker.streaming import StepStreamer
from worker.writer import LeaseLost, Writer

TID = "t1"


def streamer_for(
    client: redis.Redis, keys: KeySpace, settings: Settings, flusher: DeltaFlusher, cid: str
) -> StepStreamer:
    client.set(keys.lease(cid), f"token-{cid}")
    client.hset(keys.conversation(cid), mapping={"active_turn": TID})
    writer = Writer(
        client,
        keys,
        settings,
        cid,
        token=f"token-{cid}",
        turn_id=TID,
        max_history_size=0,
        model="m",
    )
    return StepStreamer(writer, flusher, step_index=3, should_stop=lambda: False)


def deltas_in_stream(client: redis.Redis, keys: KeySpace, cid: str) -> list[str]:
    texts = []
    for _, fields in client.xrange(keys.events(cid)):
        event = EVENT.validate_json(fields["e"])
        assert isinstance(event, StepEvent)
        texts.append(event.step.content_delta)
    return texts


def test_one_round_trip_writes_every_conversation_and_refuses_only_the_fenced_one(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    flusher = DeltaFlusher(real_redis, keys, settings)
    streamers = [streamer_for(real_redis, keys, settings, flusher, f"c{n}") for n in range(50)]
    for n, streamer in enumerate(streamers):
        streamer._buffer(TextDelta(text=f"hello {n}"))
    real_redis.set(keys.lease("c7"), "a newer worker's token")
    real_redis.hset(keys.conversation("c9"), "cancel_turn", TID)
    flusher.tick(streamers)
    assert flusher.round_trips == 1
    for n, streamer in enumerate(streamers):
        expected = [] if n == 7 else [f"hello {n}"]
        assert deltas_in_stream(real_redis, keys, f"c{n}") == expected
        assert streamer.cancel_requested is (n == 9)
    with pytest.raises(LeaseLost):
        streamers[7].run(iter([]))
    assert streamers[8].run(iter([])).content == "hello 8"


def slow_tokens(tokens: list[str], gap_s: float) -> Iterator[ProviderEvent]:
    for token in tokens:
        time.sleep(gap_s)
        yield TextDelta(text=token)
    yield FinishEvent(reason="stop")


def test_concurrent_streams_are_written_in_order_once_each_within_ticks(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    window = settings.model_copy(update={"flush_interval_ms": 20})
    flusher = DeltaFlusher(real_redis, keys, window)
    tokens = [f"t{i} " for i in range(40)]
    streamers = [streamer_for(real_redis, keys, window, flusher, f"s{n}") for n in range(20)]
    leftovers: dict[str, str] = {}

    def stream(streamer: StepStreamer) -> None:
        output = streamer.run(slow_tokens(tokens, 0.005))
        assert output.content == "".join(tokens)
        pending = streamer.take_pending()  # what the leg's own flush would carry
        leftovers[streamer.cid] = pending.step.content_delta if pending else ""

    started = time.monotonic()
    threads = [threading.Thread(target=stream, args=(s,)) for s in streamers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    for streamer in streamers:
        written = "".join(deltas_in_stream(real_redis, keys, streamer.cid))
        assert written + leftovers[streamer.cid] == "".join(tokens)
    # 20 streams of 40 deltas: one round trip per window for all of them, not one per delta
    assert flusher.round_trips <= elapsed / 0.020 + 2
    assert flusher.round_trips < 20 * 40 / 4

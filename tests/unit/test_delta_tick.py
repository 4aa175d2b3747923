"""The delta ticker against a real Redis: many conversations per round trip, fenced one by one."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from shared.errors import StorageError
from shared.models.events import EVENT, StepEvent
from shared.models.steps import ToolCall
from shared.settings import Settings
from shared.store.emit import encode_event
from shared.store.keys import KeySpace, shard_tag
from worker.deltas import DeltaFlusher
from worker.providers.base import (
    FinishEvent,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
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


class _OneShardDown(redis.Redis):
    """A Redis whose shard `down` does not answer, as a cluster's node that failed: a pipeline
    touching it fails whole (as redis-py's cluster pipeline does), a call touching it fails."""

    down_tag = ""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: str) -> Any:  # type: ignore[override]
        if any(self.down_tag in str(key) for key in keys_and_args[:numkeys]):
            raise redis.ConnectionError("Connection refused (node of the failed shard)")
        return super().evalsha(sha, numkeys, *keys_and_args)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)

        def execute(raise_on_error: bool = True) -> list[Any]:
            raise redis.ConnectionError("Connection refused (one node of the pipeline)")

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe


def test_a_shard_that_fails_fails_only_its_own_conversations(
    redis_server: Any, settings: Settings
) -> None:
    keys = KeySpace(prefix=f"t{uuid.uuid4().hex[:8]}", shards=3)
    client = _OneShardDown.from_url(redis_server.url, decode_responses=True)
    cids = [f"c{n}" for n in range(12)]
    down = keys.shard_of(cids[0])
    client.down_tag = "{" + shard_tag(down, 3) + "}"
    assert {keys.shard_of(cid) for cid in cids} == {0, 1, 2}
    flusher = DeltaFlusher(client, keys, settings)
    streamers = [streamer_for(client, keys, settings, flusher, cid) for cid in cids]
    for streamer in streamers:
        streamer._buffer(TextDelta(text=f"hello {streamer.cid}"))
    flusher.tick(streamers)
    for streamer in streamers:
        failed = keys.shard_of(streamer.cid) == down
        assert deltas_in_stream(client, keys, streamer.cid) == (
            [] if failed else [f"hello {streamer.cid}"]
        )
        if failed:
            with pytest.raises(StorageError, match=r"streamed deltas.*ConnectionError"):
                streamer.run(iter([]))
        else:
            assert streamer.run(iter([])).content == f"hello {streamer.cid}"
    client.close()


@pytest.mark.parametrize(
    ("text", "thinking"),
    [
        ("hello", ""),
        ("", "let me think"),
        ('a "quoted" \\ back\\slash', "tab\there\nnewline\r\x00\x01\x1f\x7f"),
        ("héllo wörld ✓ 😀 \u2028\u2029 \ue000", "日本語"),
        ("</script><b>x</b>", "{}[]:,"),
    ],
)
def test_a_ticks_delta_is_the_event_pydantic_writes(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings, text: str, thinking: str
) -> None:
    flusher = DeltaFlusher(real_redis, keys, settings)
    streamer = streamer_for(real_redis, keys, settings, flusher, "c1")
    for _ in range(2):  # the second take fills the template the first made
        streamer._buffer(TextDelta(text=text))
        streamer._buffer(ThinkingDelta(text=thinking))
        expected = encode_event(streamer._partial_event(thinking, text))
        entry = streamer.take_for_tick()
        assert entry is not None
        assert entry.events == [expected]
        streamer.tick_done(None, None)


def test_a_lone_surrogate_from_the_model_is_replaced_and_fails_no_other_stream(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    flusher = DeltaFlusher(real_redis, keys, settings)
    hostile = streamer_for(real_redis, keys, settings, flusher, "c1")
    other = streamer_for(real_redis, keys, settings, flusher, "c2")
    hostile._buffer(TextDelta(text="bad \ud800 text"))  # as json.loads reads "\ud800"
    other._buffer(TextDelta(text="fine"))
    flusher.tick([hostile, other])
    assert deltas_in_stream(real_redis, keys, "c1") == ["bad \ufffd text"]
    assert deltas_in_stream(real_redis, keys, "c2") == ["fine"]
    assert hostile.run(iter([])).content == "bad \ufffd text"
    assert other.run(iter([])).content == "fine"


def test_a_tool_call_with_lone_surrogates_is_kept_writable(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    flusher = DeltaFlusher(real_redis, keys, settings)
    streamer = streamer_for(real_redis, keys, settings, flusher, "c1")
    hostile = ToolCall(id="call_1", name="calc", args={"note\ud800": ["x\udc00", 2, {"k": "ok"}]})
    fine = ToolCall(id="call_2", name="calc", args={"expression": "6*7"})
    output = streamer.run(iter([ToolCallEvent(hostile), ToolCallEvent(fine)]))
    assert output.tool_calls[0].args == {"note\ufffd": ["x\ufffd", 2, {"k": "ok"}]}
    assert output.tool_calls[0].id == "call_1" and output.tool_calls[0].name == "calc"
    assert output.tool_calls[1] is fine
    assert all(call.model_dump_json() for call in output.tool_calls)  # the flush can write them

"""The batch store on a real redis-server, without a worker: items, counts, dispatch, results."""

from __future__ import annotations

import redis

from shared.models.batches import BatchConfig, BatchState
from shared.models.content import Content
from shared.settings import Settings
from shared.store.batches import BatchLine, BatchStore
from shared.store.keys import KeySpace


def lines(count: int) -> list[BatchLine]:
    return [BatchLine(i, f"item-{i}", Content.from_text(f"prompt {i}")) for i in range(count)]


def test_results_page_from_an_offset_in_input_order(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = BatchStore(real_redis, keys, Settings())
    bid = store.create(BatchConfig(max_concurrency=2))
    store.submit(bid, [*lines(4), BatchLine(4, "bad", error="line 4: missing 'prompt'")])
    assert [r["id"] for r in store.results(bid, offset=3)] == ["item-3", "bad"]
    assert [r["status"] for r in store.results(bid)] == [
        "running",
        "running",
        "queued",
        "queued",
        "invalid",
    ]


def test_transitions_are_idempotent_and_dispatch_within_the_cap(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = BatchStore(real_redis, keys, Settings())
    bid = store.create(BatchConfig(max_concurrency=2))
    store.submit(bid, lines(5))
    first = store.conversation_id(bid, "item-0")
    assert len(store.transition(bid, first, BatchState.DONE)) == 1  # a slot freed: one more starts
    assert (
        store.transition(bid, first, BatchState.DONE) == []
    )  # the same move again changes nothing
    assert store.transition(bid, first, BatchState.FAILED) == []  # a finished item stays finished
    info = store.info(bid)
    assert info.counts[BatchState.DONE] == 1 and info.counts[BatchState.RUNNING] == 2
    assert info.counts[BatchState.QUEUED] == 2 and info.counts[BatchState.FAILED] == 0

"""The sweep releases batch items a dying dispatcher left held, when nobody follows the batch."""

from __future__ import annotations

import time

import redis

from shared.models.batches import BatchConfig, BatchState
from shared.models.steps import UsageMetadata
from shared.settings import Settings
from shared.store.batch_scripts import TRANSITION
from shared.store.batches import BatchStore
from shared.store.keys import KeySpace
from tests.unit.test_batch_hold import Sent, held, lines
from worker.sweep.sweeper import Sweeper


def test_the_sweep_finishes_a_cut_dispatch_and_keeps_the_cap(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    sent = Sent()
    settings = Settings()
    store = BatchStore(real_redis, keys, settings, sent)
    bid = store.create(BatchConfig(max_concurrency=1))
    store.submit(bid, lines(3))
    store.finish_submission(bid)
    first, second, third = (store.conversation_id(bid, f"item-{i}") for i in range(3))
    assert sent.advanced == [first]
    # The item ends, then the process dies before releasing the next one.
    TRANSITION(real_redis, store.dispatch_keys(bid), [first, BatchState.DONE.value, "", ""])
    assert held(real_redis, keys, second)
    swept = Sweeper(real_redis, keys, settings, batches=store, send_advance=sent.advance).sweep()
    assert swept.dispatched == [second]
    assert not held(real_redis, keys, second) and second in sent.advanced
    assert held(real_redis, keys, third)  # the cap still holds
    again = Sweeper(real_redis, keys, settings, batches=store, send_advance=sent.advance).sweep()
    assert again.dispatched == []


def test_the_sweep_ends_an_item_whose_turn_ended_without_its_transition(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    """A worker that lost Redis after a turn's end flush left its item counted running."""
    sent = Sent()
    settings = Settings(lease_ttl_ms=1000)
    store = BatchStore(real_redis, keys, settings, sent)
    bid = store.create(BatchConfig(max_concurrency=1))
    store.submit(bid, lines(2))
    store.finish_submission(bid)
    first, second = (store.conversation_id(bid, f"item-{i}") for i in range(2))
    real_redis.delete(keys.inbox(first))  # its one turn ran, and completed
    ended = {"active_turn": "", "last_turn_status": "completed", "status": "idle"}
    sweeper = Sweeper(real_redis, keys, settings, batches=store, send_advance=sent.advance)

    real_redis.hset(keys.conversation(first), mapping={**ended, "updated_at": time.time()})
    assert sweeper.sweep().dispatched == []  # just ended: its worker may transition it yet
    assert store.info(bid).counts[BatchState.RUNNING] == 1

    real_redis.hset(keys.conversation(first), "updated_at", time.time() - 5)
    assert sweeper.sweep().dispatched == [second]  # ended long ago: done, and the cap frees
    assert store.info(bid).counts[BatchState.DONE] == 1
    assert second in sent.advanced


def test_the_repair_counts_the_items_usage_once_whoever_transitions_first(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    """The worker's transition (with the turn's usage) may be lost or may come after it."""
    sent = Sent()
    settings = Settings(lease_ttl_ms=1000)
    store = BatchStore(real_redis, keys, settings, sent)
    bid = store.create(BatchConfig(max_concurrency=2))
    store.submit(bid, lines(2))
    store.finish_submission(bid)
    first, second = (store.conversation_id(bid, f"item-{i}") for i in range(2))
    turn = {"turn:prompt_token_count": "7", "turn:candidates_token_count": "5"}
    turn |= {"turn:total_token_count": "12", "prompt_token_count": "70"}
    for cid in (first, second):
        real_redis.delete(keys.inbox(cid))
        real_redis.hset(keys.usage(cid), mapping=turn)
        real_redis.hset(
            keys.conversation(cid),
            mapping={"active_turn": "", "last_turn_status": "completed", "updated_at": 1.0},
        )
    Sweeper(real_redis, keys, settings, batches=store, send_advance=sent.advance).sweep()
    late = UsageMetadata(prompt_token_count=7, candidates_token_count=5, total_token_count=12)
    store.transition(bid, first, BatchState.DONE, late)  # the worker's, after the repair
    info = store.info(bid)
    assert info.counts[BatchState.DONE] == 2
    assert (info.usage.prompt_token_count, info.usage.total_token_count) == (14, 24)
    assert info.usage.candidates_token_count == 10

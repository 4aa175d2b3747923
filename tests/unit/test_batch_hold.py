"""Held batch items on a real redis-server, without a worker: released only when dispatched.

The dispatch decision (the batch's slot) and the release (the conversation's slot) are two
writes; these tests cut between them, and between the writes of a submitted chunk, the
way a dying process or a Redis failure would, and show that nothing is stranded or doubled.
"""

from __future__ import annotations

import redis

from shared.client.task_message import QueuedTask
from shared.models.batches import BatchConfig, BatchState
from shared.models.content import Content
from shared.settings import Settings
from shared.store.batch_scripts import TRANSITION
from shared.store.batches import BatchLine, BatchStore
from shared.store.keys import KeySpace


class Sent:
    """A task sender that records the `advance`s it was asked for."""

    def __init__(self) -> None:
        self.advanced: list[str] = []

    def advance(self, conversation_id: str) -> None:
        self.advanced.append(conversation_id)


def lines(count: int) -> list[BatchLine]:
    return [BatchLine(i, f"item-{i}", Content.from_text(f"prompt {i}")) for i in range(count)]


def held(client: redis.Redis, keys: KeySpace, cid: str) -> bool:
    return client.hget(keys.conversation(cid), "held") == "1"


def test_items_are_held_and_unindexed_until_dispatched(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    sent = Sent()
    store = BatchStore(real_redis, keys, Settings(), sent)
    bid = store.create(BatchConfig(max_concurrency=2))
    store.submit(bid, lines(4))
    cids = [store.conversation_id(bid, f"item-{i}") for i in range(4)]
    assert [held(real_redis, keys, cid) for cid in cids] == [False, False, True, True]
    assert set(real_redis.zrange(keys.active(0), 0, -1)) == set(cids[:2])
    assert sorted(sent.advanced) == sorted(cids[:2])
    assert store.transition(bid, cids[0], BatchState.DONE) == [cids[2]]
    assert not held(real_redis, keys, cids[2]) and sent.advanced[2:] == [cids[2]]
    assert real_redis.scard(keys.batch_releasing(bid)) == 0


def test_a_dispatch_cut_before_the_release_is_released_by_the_next_one(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    sent = Sent()
    store = BatchStore(real_redis, keys, Settings(), sent)
    bid = store.create(BatchConfig(max_concurrency=1))
    store.submit(bid, lines(3))
    first, second, third = (store.conversation_id(bid, f"item-{i}") for i in range(3))
    # A dispatcher dies right after the batch's script: `second` runs, by the count only.
    TRANSITION(real_redis, store.dispatch_keys(bid), [first, BatchState.DONE.value, "", ""])
    assert held(real_redis, keys, second) and second not in sent.advanced
    assert store.info(bid).counts[BatchState.RUNNING] == 1

    assert store.dispatch(bid) == [second]  # anyone who touches the batch next
    assert not held(real_redis, keys, second) and sent.advanced[-1] == second
    assert real_redis.zscore(keys.active(0), second) is not None
    assert held(real_redis, keys, third)  # the cap still holds
    assert store.dispatch(bid) == []  # released once confirmed: not again


def test_a_cancelled_batch_releases_nothing_and_unholds_its_items(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    sent = Sent()
    store = BatchStore(real_redis, keys, Settings(), sent)
    bid = store.create(BatchConfig(max_concurrency=1))
    store.submit(bid, lines(2))
    second = store.conversation_id(bid, "item-1")
    assert store.cancel(bid) == 2
    assert store.dispatch(bid) == []
    assert not held(real_redis, keys, second) and second not in sent.advanced
    assert store.info(bid).counts[BatchState.CANCELLED] == 2
    assert real_redis.scard(keys.batch_releasing(bid)) == 0


def test_a_chunk_cut_after_an_items_turn_reuses_that_turn(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    """Resubmitting after a Redis failure mid-chunk queues no second turn for an item."""
    store = BatchStore(real_redis, keys, Settings())
    bid = store.create(BatchConfig(max_concurrency=1))
    [line] = lines(1)
    config = store.config(bid).conversation
    with real_redis.pipeline(transaction=False) as pipe:  # the chunk's first writes only
        turn_id = store._queue_turn(pipe, bid, config, line, line.prompt or Content())
        pipe.execute()
    cid = store.conversation_id(bid, line.id)
    assert store.info(bid).total == 0 and real_redis.llen(keys.inbox(cid)) == 1

    report = store.submit(bid, [line])
    assert report.submitted == 1 and report.skipped == 0
    assert real_redis.lrange(keys.inbox(cid), 0, -1) == [turn_id]
    [result] = store.results(bid)
    assert result["status"] == "running"
    items = real_redis.lrange(keys.batch_items(bid), 0, -1)
    assert len(items) == 1 and turn_id in items[0]
    assert store.submit(bid, [line]).skipped == 1
    assert real_redis.llen(keys.inbox(cid)) == 1


class Queues(Sent):
    """A sender that also builds task messages: the release pushes them itself."""

    def __init__(self, queue: str) -> None:
        super().__init__()
        self.queue = queue

    def queued_advance(self, conversation_id: str) -> QueuedTask:
        return QueuedTask(self.queue, f"advance {conversation_id}")


def test_a_release_pushes_the_advance_messages_in_its_own_round_trip(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    queue = f"{keys.prefix}:test-queue"
    sent = Queues(queue)
    store = BatchStore(real_redis, keys, Settings(), sent)
    bid = store.create(BatchConfig(max_concurrency=2))
    store.submit(bid, lines(3))
    cids = [store.conversation_id(bid, f"item-{i}") for i in range(3)]
    assert sorted(real_redis.lrange(queue, 0, -1)) == sorted(f"advance {c}" for c in cids[:2])
    assert store.transition(bid, cids[0], BatchState.DONE) == [cids[2]]
    assert real_redis.lrange(queue, 0, 0) == [f"advance {cids[2]}"]
    assert real_redis.llen(queue) == 3
    assert sent.advanced == []  # nothing sent apart from the release
    assert not held(real_redis, keys, cids[2])

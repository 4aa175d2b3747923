"""History store behaviour beyond the reference model: concurrency, corruption, pipelines."""

from __future__ import annotations

import threading

import pytest
import redis

from shared.errors import CorruptRecord, StorageError
from shared.models.steps import Step, StepSource, StepType, UsageMetadata
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace


def step(n: int) -> Step:
    return Step(id=f"s{n}", type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, content=str(n))


def test_concurrent_appends_lose_nothing(real_redis: redis.Redis, keys: KeySpace) -> None:
    threads, per_thread = 8, 50

    def writer(t: int) -> None:
        store = HistoryStore(real_redis, keys, "busy", max_history_size=0)
        for i in range(per_thread):
            store.append(step(t * 1000 + i), usage=UsageMetadata.from_counts(1, 1), start_turn=True)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    snapshot = HistoryStore(real_redis, keys, "busy").snapshot()
    assert len(snapshot.steps) == threads * per_thread
    assert {s.id for s in snapshot.steps} == {
        f"s{t * 1000 + i}" for t in range(threads) for i in range(per_thread)
    }
    assert snapshot.turn_count == threads * per_thread
    # each turn start was written with its step in one script, so it points exactly at it
    assert snapshot.turn_start_indices == list(range(threads * per_thread))
    assert snapshot.cumulative_usage.total_token_count == 2 * threads * per_thread


def test_concurrent_appends_with_trimming_keep_indices_consistent(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    def writer(t: int) -> None:
        store = HistoryStore(real_redis, keys, "trim", max_history_size=7)
        for i in range(40):
            store.append(step(t * 100 + i), start_turn=True)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    snapshot = HistoryStore(real_redis, keys, "trim", max_history_size=7).snapshot()
    assert len(snapshot.steps) == 7
    assert snapshot.trimmed == 160 - 7
    assert snapshot.turn_start_indices == list(range(7))


def test_unparseable_step_names_the_key(real_redis: redis.Redis, keys: KeySpace) -> None:
    store = HistoryStore(real_redis, keys, "corrupt")
    store.append(step(1))
    real_redis.rpush(keys.steps("corrupt"), "{not json")
    with pytest.raises(CorruptRecord, match=r"position 1 of t\w+:\{corrupt\}:steps"):
        store.snapshot()


def test_append_joins_a_pipeline_as_one_round_trip(real_redis: redis.Redis, keys: KeySpace) -> None:
    store = HistoryStore(real_redis, keys, "piped")
    with real_redis.pipeline(transaction=False) as pipe:
        store.append(step(1), pipeline=pipe)
        pipe.xadd(keys.events("piped"), {"e": "1"})
        first, _ = pipe.execute()
    assert first == 0
    assert store.snapshot().steps == [step(1)]


def test_steps_page_reads_a_slice(real_redis: redis.Redis, keys: KeySpace) -> None:
    store = HistoryStore(real_redis, keys, "paged", max_history_size=0)
    store.append(*(step(i) for i in range(10)))
    assert [s.content for s in store.steps(3, 4)] == ["3", "4", "5", "6"]
    assert store.length() == 10


def test_unreachable_redis_is_a_storage_error(keys: KeySpace) -> None:
    dead = redis.Redis(port=1, socket_connect_timeout=0.2, decode_responses=True, retry=None)
    with pytest.raises(StorageError, match="writing history of conversation c"):
        HistoryStore(dead, keys, "c").append(step(1))


def test_trimming_keeps_the_latest_turns_steps_for_its_response(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = HistoryStore(real_redis, keys, "overflow", max_history_size=2)
    store.append(step(0), start_turn=True)
    store.append(step(1))
    store.append(step(2), start_turn=True)  # turn 2 starts at position 2
    for n in range(3, 7):
        store.append(step(n))
    assert [s.id for s in store.snapshot().steps] == ["s5", "s6"]  # the bound holds
    since = store.steps_since(2)
    assert [s.id for s in since] == [f"s{n}" for n in range(2, 7)]
    assert [s.id for s in store.steps_since(4)] == ["s4", "s5", "s6"]
    assert [s.id for s in store.steps_since(6)] == ["s6"]
    assert [s.id for s in store.context_window(2)] == [f"s{n}" for n in range(2, 7)]
    store.append(step(7), start_turn=True)  # a new turn drops the old one's overflow
    assert [s.id for s in store.steps_since(7)] == ["s7"]
    assert [s.id for s in store.steps_since(0)] == ["s6", "s7"]
    store.clear()
    assert not real_redis.exists(keys.turn_overflow("overflow"))


def test_context_window_starts_at_the_last_compaction_or_the_turn(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = HistoryStore(real_redis, keys, "window", max_history_size=0)
    store.append(step(0), start_turn=True)
    store.append(step(1), start_turn=True)
    assert [s.id for s in store.context_window(1)] == ["s0", "s1"]  # no compaction: all of it
    summary = Step(id="c", type=StepType.COMPACTION, source=StepSource.SYSTEM, content="sum")
    store.append(summary)
    store.append(step(3), start_turn=True)
    assert [s.id for s in store.context_window(3)] == ["c", "s3"]

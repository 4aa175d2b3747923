"""State shards in the key space: one Redis keeps every name; several put a conversation's keys
and its shard's copies of the global structures on one slot, spread evenly."""

from __future__ import annotations

from collections import Counter

import pytest
import redis
from redis.crc import key_slot

from shared.client.outbox import OutboxMessages, OutboxTask
from shared.store.copies import copy_hash
from shared.store.keys import KeySpace, shard_tag
from shared.store.sharded import zset_count, zset_page, zset_total
from shared.usage_report import _across_shards


def slot(key: str) -> int:
    return key_slot(key.encode())


def test_one_shard_keeps_every_name() -> None:
    keys = KeySpace("p")
    assert keys.conversation("c1") == "p:{c1}:conv"
    assert keys.failures(0) == "p:failures"
    assert keys.task_outbox(0) == keys.task_outbox(keys.shard_of("c1")) == "p:{tasks}:outbox"
    assert keys.webhook_endpoints_copy(0) == keys.webhook_endpoints() == "p:{webhooks}:endpoints"
    assert keys.policy_rules_copy(0) == keys.policy_rules() == "p:policy:rules"
    assert keys.prices_copy(0) == keys.prices() == "p:prices"
    assert keys.rate_pause_copy("openai", 0) == keys.rate_pause("openai")
    assert keys.every_shard(keys.conversations) == ["p:conversations"]


def test_a_conversations_keys_and_its_shards_copies_share_one_slot() -> None:
    keys = KeySpace("p", shards=6)
    for cid in ("a", "b", "conv-17", "x.y_z"):
        shard = keys.shard_of(cid)
        named = [
            keys.conversation(cid),
            keys.events(cid),
            keys.turn(cid, "t1"),
            keys.notification(f"{cid}.n1"),
            *keys.history(cid),
            keys.failures(shard),
            keys.conversations(shard),
            keys.active(shard),
            keys.notification_stream(shard),
            keys.webhook_outbox(shard),
            keys.webhook_endpoints_copy(shard),
            keys.task_outbox(shard),
            keys.policy_rules_copy(shard),
            keys.prices_copy(shard),
            keys.rate_pause_copy("openai", shard),
            keys.usage_by_day("2026-12-04", shard),
        ]
        assert len({slot(key) for key in named}) == 1, named
        assert keys.conversation(cid).endswith(f":{cid}:conv")
    # the authorities are apart from every shard, with their logs where they have one
    assert slot(keys.policy_rules()) == slot(keys.policy_log())
    assert slot(keys.policy_rules()) != slot(keys.policy_rules_copy(0))


def test_shards_spread_evenly_over_an_even_slot_split() -> None:
    for shards in (3, 6, 12):
        slots = [key_slot(shard_tag(k, shards).encode()) for k in range(shards)]
        owners = Counter(n * 3 // 16384 for n in slots)
        assert owners == {0: shards // 3, 1: shards // 3, 2: shards // 3}
    conversations = Counter(KeySpace("p", shards=3).shard_of(f"c{n}") for n in range(3000))
    assert all(850 < count < 1150 for count in conversations.values())


def test_a_shard_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="shard 3 is not one of 3"):
        KeySpace("p", shards=3).failures(3)


def test_readers_merge_the_shards_sorted_sets(fake_redis: redis.Redis) -> None:
    keys = KeySpace("m", shards=3)
    for n in range(30):
        cid = f"c{n}"
        fake_redis.zadd(keys.conversations(keys.shard_of(cid)), {cid: float(n)})
    indexes = keys.every_shard(keys.conversations)
    assert zset_total(fake_redis, indexes) == 30
    assert [cid for cid, _ in zset_page(fake_redis, indexes, 0, 4)] == ["c29", "c28", "c27", "c26"]
    assert [cid for cid, _ in zset_page(fake_redis, indexes, 5, 3)] == ["c24", "c23", "c22"]
    oldest = zset_page(fake_redis, indexes, 10, 2, newest=False)
    assert oldest == [("c10", 10.0), ("c11", 11.0)]
    assert zset_count(fake_redis, indexes, 5, 9) == 5
    assert zset_page(fake_redis, indexes, 0, 0) == []


def test_copies_follow_their_authority(fake_redis: redis.Redis) -> None:
    keys = KeySpace("cp", shards=3)
    fake_redis.hset(keys.prices(), mapping={"a/b": "1", "c/d": "2"})
    copies = keys.every_shard(keys.prices_copy)
    fake_redis.hset(copies[1], "stale/model", "9")
    copy_hash(fake_redis, keys.prices(), copies)
    assert all(fake_redis.hgetall(key) == {"a/b": "1", "c/d": "2"} for key in copies)
    fake_redis.delete(keys.prices())
    copy_hash(fake_redis, keys.prices(), copies)
    assert not any(fake_redis.exists(key) for key in copies)


def test_usage_adds_up_across_shards() -> None:
    day = _across_shards([{"m:input_tokens": "3", "@agent:a:cost": "5"}, {"m:input_tokens": "4"}])
    assert day == {"m:input_tokens": "7", "@agent:a:cost": "5"}


def test_an_outbox_task_goes_to_its_conversations_shard() -> None:
    keys = KeySpace("o", shards=4)
    queued = OutboxMessages(keys=keys, queue="o.turns").task("advance", "conv-9")
    assert queued.key == keys.task_outbox(keys.shard_of("conv-9"))
    assert OutboxTask.model_validate_json(queued.message).args == ["conv-9"]

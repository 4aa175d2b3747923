"""Inbox filters on a real redis-server: every filter applies, to the page and to the count."""

from __future__ import annotations

import pytest
import redis

from bench.common import counting_client, round_trips
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.notifications import Allow
from shared.models.pending import PendingFilter
from shared.settings import Settings
from shared.store import bulk
from shared.store.bulk import BulkScope, CountChanged, TooMany, counted, resolve_matching
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore
from tests.pending_records import put


def test_tool_and_batch_together_narrow_both_page_and_count(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = NotificationStore(real_redis, keys, Settings())
    wanted = [put(real_redis, keys, n, tool="send_email", batch="b1") for n in range(0, 12, 3)]
    put(real_redis, keys, 1, tool="send_email", batch="b2")
    put(real_redis, keys, 2, tool="write_file", batch="b1")
    put(real_redis, keys, 4, tool="send_email", batch=None)
    assert store.count_pending(tool="send_email", batch_id="b1") == 4
    assert [n.id for n in store.pending(tool="send_email", batch_id="b1")] == [n.id for n in wanted]
    assert [n.id for n in store.pending(tool="send_email", batch_id="b1", offset=1, limit=2)] == [
        n.id for n in wanted[1:3]
    ]
    assert store.count_pending(tool="send_email") == 6 and store.count_pending(batch_id="b1") == 5
    assert store.count_pending() == 7
    assert store.count_pending(tool="write_file", batch_id="b2") == 0


def test_counts_of_many_groups_are_the_single_counts_in_one_round_trip(
    real_redis: redis.Redis, redis_server: EmbeddedRedis, keys: KeySpace
) -> None:
    for n in range(6):
        put(real_redis, keys, n, tool="send_email" if n % 2 else "write_file", batch=f"b{n % 3}")
    put(real_redis, keys, 6, tool="send_email", batch=None)
    counted = counting_client(redis_server.url)
    counted.ping()  # the connection's handshake is sent before the count starts
    store = NotificationStore(counted, keys, Settings())
    groups: list[tuple[str | None, str | None]] = [
        ("b0", None),
        ("b1", "send_email"),
        ("b2", "write_file"),
        ("b9", None),
        (None, "send_email"),
        (None, None),
    ]
    counts: list[int] = []
    assert round_trips(lambda: counts.extend(store.count_pending_each(groups))) == 1
    assert counts == [store.count_pending(batch_id=b, tool=t) for b, t in groups]
    assert counts == [2, 1, 1, 0, 4, 7]
    assert store.count_pending_each([]) == []


def test_one_filter_passes_whole_and_the_bulk_checks_are_the_stores(
    real_redis: redis.Redis, keys: KeySpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = NotificationStore(real_redis, keys, Settings())
    for n in (-3, -2, -1):  # created before now, so a scope pinned now holds them
        put(real_redis, keys, n, tool="send_email", batch="b1")
    put(real_redis, keys, -4, tool="write_file", batch="b1")
    where = PendingFilter(tool="send_email", batch_id="b1")
    assert store.count_pending(where) == store.count_pending(tool="send_email", batch_id="b1") == 3
    assert len(store.pending_ids(where, limit=2)) == 2
    with pytest.raises(TypeError, match="not both"):
        store.count_pending(where, tool="send_email")
    with pytest.raises(TypeError, match="batch"):
        store.count_pending(batch="b1")

    scope = BulkScope.pin(where)
    assert counted(store, scope) == 3
    with pytest.raises(CountChanged) as changed:
        resolve_matching(store, scope, Allow(), expected=2, actor="t")
    assert (changed.value.expected, changed.value.current) == (2, 3)
    assert changed.value.message.startswith("3 pending notifications match now, not the 2")
    monkeypatch.setattr(bulk, "BULK_LIMIT", 2)
    with pytest.raises(TooMany) as too_many:
        counted(store, scope)
    assert too_many.value.count == 3 and "at most 2" in too_many.value.message
    with pytest.raises(TooMany):
        resolve_matching(store, scope, Allow(), expected=3, actor="t")
    assert store.count_pending(where) == 3  # nothing was resolved

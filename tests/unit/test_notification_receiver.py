"""When advancing a notification stream acknowledges an interaction, and when it must not."""

from __future__ import annotations

import pytest
import redis

from shared.client.receiver import NotificationReceiver
from shared.errors import StorageError
from shared.models.notifications import DeliveryEntry, NotificationKind
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore

STREAM = "deliveries"


def receiver(client: redis.Redis, keys: KeySpace, settings: Settings) -> NotificationReceiver:
    store = NotificationStore(client, keys, settings)
    return NotificationReceiver(client, store, keys.prefix + STREAM, consumer="a")


def deliver(client: redis.Redis, keys: KeySpace, nid: str) -> None:
    entry = DeliveryEntry(
        notification_id=nid, kind=NotificationKind.INTERACTION, conversation_id="c1"
    )
    client.xadd(keys.prefix + STREAM, entry.fields())  # type: ignore[arg-type]


def pending(client: redis.Redis, keys: KeySpace) -> int:
    return int(client.xpending(keys.prefix + STREAM, "default")["pending"])


@pytest.mark.parametrize("nid", ["c1.gone", "not-a-notification-id"])
def test_an_interaction_without_a_record_is_acknowledged_on_advance(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings, nid: str
) -> None:
    stream = receiver(real_redis, keys, settings)
    deliver(real_redis, keys, nid)
    assert stream.recv(timeout_s=1) is not None
    assert stream.recv(timeout_s=0.01) is None
    assert pending(real_redis, keys) == 0


def test_a_redis_failure_is_a_storage_error_and_acknowledges_nothing(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    stream = receiver(real_redis, keys, settings)
    deliver(real_redis, keys, "c1.pending")
    assert stream.recv(timeout_s=1) is not None
    stream.store.client = redis.Redis(port=1, socket_connect_timeout=0.2)  # nothing listens
    with pytest.raises(StorageError, match=r"reading notification c1\.pending"):
        stream.recv(timeout_s=0.01)
    assert pending(real_redis, keys) == 1

"""The delivery path of notifications: exclusive, durable, at least once.

A receiver reads a stream (one conversation's, or the global one) through a
consumer group: each entry goes to one consumer of the group. Moving on to the
next entry acknowledges a passive one, and an interaction once it is no longer
pending; dropping the receiver acknowledges nothing, and entries a dead consumer
left unacknowledged are reclaimed by another after `min_idle_ms`.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

import redis

from shared.errors import CorruptRecord, InvalidInput, NotFound
from shared.models.notifications import (
    Delivery,
    Notification,
    NotificationKind,
    NotificationStatus,
    Resolution,
)
from shared.store.connection import storage_errors
from shared.store.notifications import NotificationStore
from shared.store.stream_groups import ensure_group

__all__ = ["NotificationReceiver"]


class NotificationReceiver:
    """One consumer of a notification stream's group."""

    def __init__(
        self,
        client: redis.Redis,
        store: NotificationStore,
        stream: str,
        *,
        group: str = "default",
        consumer: str | None = None,
        min_idle_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.store = store
        self.stream = stream
        self.group = group
        self.consumer = consumer or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.min_idle_ms = min_idle_ms
        self._current: Delivery | None = None
        self._ensure_group()

    def _ensure_group(self) -> None:
        with storage_errors(f"creating consumer group {self.group} on {self.stream}"):
            ensure_group(self.client, self.stream, self.group)

    def recv(self, timeout_s: float | None = None) -> Delivery | None:
        """The next delivery (reclaimed ones first), or None at the timeout."""
        self._settle_current()
        delivery = self._reclaim() or self._read(timeout_s)
        self._current = delivery
        return delivery

    def notification(self, delivery: Delivery) -> Notification:
        """The full notification behind an interaction delivery."""
        return self.store.get(delivery.notification_id)

    def resolve(
        self, delivery: Delivery, resolution: Resolution | dict[str, Any], *, actor: str
    ) -> Notification:
        """Resolves the delivered interaction by its exact id, then acknowledges the delivery."""
        note = self.store.resolve(delivery.notification_id, resolution, actor=actor)
        self.ack(delivery)
        return note

    def ack(self, delivery: Delivery) -> None:
        with storage_errors(f"acknowledging {delivery.entry_id} on {self.stream}"):
            self.client.xack(self.stream, self.group, delivery.entry_id)
        if self._current is not None and self._current.entry_id == delivery.entry_id:
            self._current = None

    def _settle_current(self) -> None:
        """Advancing acknowledges: a passive delivery always, an interaction once it is settled."""
        current = self._current
        if current is None:
            return
        if current.kind is NotificationKind.PASSIVE or self._settled(current):
            self.ack(current)
        self._current = None

    def _settled(self, delivery: Delivery) -> bool:
        """Whether nothing waits on the delivered interaction any more.

        One without a readable record (gone, corrupt, or an id that names none) waits for
        nothing either; a Redis failure is a StorageError, and acknowledges nothing.
        """
        try:
            note = self.store.get(delivery.notification_id)
        except (NotFound, CorruptRecord, InvalidInput):
            return True
        return note.status is not NotificationStatus.PENDING

    def _reclaim(self) -> Delivery | None:
        with storage_errors(f"reclaiming deliveries on {self.stream}"):
            reply: Any = self.client.xautoclaim(
                self.stream, self.group, self.consumer, self.min_idle_ms, start_id="0-0", count=1
            )
        entries = [e for e in reply[1] if e and e[1]]
        return self._delivery(*entries[0]) if entries else None

    def _read(self, timeout_s: float | None) -> Delivery | None:
        block = None if timeout_s is None else max(int(timeout_s * 1000), 1)
        with storage_errors(f"reading deliveries on {self.stream}"):
            reply: Any = self.client.xreadgroup(
                self.group, self.consumer, {self.stream: ">"}, count=1, block=block
            )
        if not reply:
            return None
        entry_id, fields = reply[0][1][0]
        return self._delivery(entry_id, fields)

    def _delivery(self, entry_id: str, fields: dict[str, str]) -> Delivery:
        with storage_errors(f"reading delivery count on {self.stream}"):
            pending: Any = self.client.xpending_range(
                self.stream, self.group, min=entry_id, max=entry_id, count=1
            )
        count = int(pending[0]["times_delivered"]) if pending else 1
        return Delivery(entry_id=entry_id, delivery_count=count, **fields)

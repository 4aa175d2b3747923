"""Every conversation's notifications when they are delivered through several shards' streams.

On a cluster each state shard has its own delivery stream (a conversation's flush writes its
shard's); the global receiver reads each through the same consumer group, in turn, and
routes an acknowledgement to the stream of the delivery's conversation.
"""

from __future__ import annotations

import time
from typing import Any

from shared.client.receiver import NotificationReceiver
from shared.models.notifications import Delivery, Notification, Resolution
from shared.store.keys import KeySpace

__all__ = ["ShardReceiver"]

POLL_S = 0.05  # the pause between two rounds over the streams that found nothing


class ShardReceiver:
    """`NotificationReceiver`'s interface over one receiver per shard."""

    def __init__(self, keys: KeySpace, receivers: list[NotificationReceiver]) -> None:
        self.keys = keys
        self.receivers = receivers
        self._next = 0

    def recv(self, timeout_s: float | None = None) -> Delivery | None:
        """The next delivery of any shard (reclaimed ones first in each), or None at the
        timeout (None: wait for one)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            for _ in self.receivers:
                receiver = self.receivers[self._next]
                self._next = (self._next + 1) % len(self.receivers)
                delivery = receiver.recv(0.001)
                if delivery is not None:
                    return delivery
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(POLL_S)

    def _of(self, delivery: Delivery) -> NotificationReceiver:
        return self.receivers[self.keys.shard_of(delivery.conversation_id)]

    def notification(self, delivery: Delivery) -> Notification:
        return self._of(delivery).notification(delivery)

    def resolve(
        self, delivery: Delivery, resolution: Resolution | dict[str, Any], *, actor: str
    ) -> Notification:
        return self._of(delivery).resolve(delivery, resolution, actor=actor)

    def ack(self, delivery: Delivery) -> None:
        self._of(delivery).ack(delivery)

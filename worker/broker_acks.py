"""A broker channel's acknowledgements, sent together instead of one round trip each.

An ack of kombu's Redis transport removes the delivery's record (its unacknowledged index
and hash) with a round trip of its own: as much of the worker's CPU per turn, on the
latency benchmark, as the leg's claim or its last flush. Here an ack frees its prefetch
place at once and leaves the record's removal to the next fetch (`fetch.lua` takes the
pending tags along) or, when no fetch comes, to a ticker of the process that removes every
channel's pending records within `EVERY_S`. A channel closing removes its own first, so a
warm shutdown leaves no acknowledged message to be restored.

What a worker killed in that window leaves is what a worker killed just before an ack left:
the record, and the message delivered again after the visibility timeout (at least once,
as with late acks; a leg delivered again finds its work done). A removal that fails (the
broker away) is tried again at the next tick.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from worker.process_thread import ProcessThread

log = logging.getLogger(__name__)

__all__ = ["EVERY_S", "PendingAcks"]

EVERY_S = 0.02  # the longest an acknowledged delivery's record waits for its removal


class PendingAcks:
    """The delivery tags a channel acknowledged whose records are not removed yet."""

    _all: weakref.WeakSet[PendingAcks] = weakref.WeakSet()
    _wake = threading.Condition()
    _ticker: ProcessThread | None = None

    def __init__(self, channel: Any) -> None:
        self._channel = weakref.ref(channel)
        self._tags: list[str] = []
        self._lock = threading.Lock()
        with PendingAcks._wake:
            PendingAcks._all.add(self)
            if PendingAcks._ticker is None:
                PendingAcks._ticker = ProcessThread(
                    "ack-flusher", _flush_forever, PendingAcks._wake
                )
            PendingAcks._ticker.ensure_running()

    def __len__(self) -> int:
        return len(self._tags)

    def add(self, tag: str) -> None:
        with self._lock:
            self._tags.append(tag)

    def take(self) -> list[str]:
        """Every pending tag, now the caller's to remove (or to `give_back`)."""
        with self._lock:
            tags, self._tags = self._tags, []
        return tags

    def give_back(self, tags: list[str]) -> None:
        """Tags whose removal did not happen, for the next fetch or tick."""
        if tags:
            with self._lock:
                self._tags[:0] = tags

    def flush(self) -> None:
        """Removes the pending records now, in one round trip (kept for later if it fails)."""
        channel = self._channel()
        tags = self.take()
        if not tags or channel is None:
            return
        try:
            with channel.conn_or_acquire() as client:
                pipe = client.pipeline()
                pipe.zrem(channel.unacked_index_key, *tags)
                pipe.hdel(channel.unacked_key, *tags)
                pipe.execute()
        except Exception:
            self.give_back(tags)
            raise


def _flush_forever() -> None:
    failing = False
    while True:
        time.sleep(EVERY_S)
        failed = False
        for pending in list(PendingAcks._all):
            try:
                pending.flush()
            except Exception:  # the broker away: kept, tried at the next tick
                failed = True
                if not failing:  # once per outage, not fifty times a second
                    log.warning("could not remove acknowledged deliveries' records", exc_info=True)
        if failing and not failed:
            log.info("acknowledged deliveries' records removed again")
        failing = failed

"""One SSE client's bounded queue of live events, and an event as the feed delivers it.

A client whose queue overflows is ended rather than allowed to skip events: it
reconnects with Last-Event-ID and catches up from the stream.
"""

from __future__ import annotations

import contextlib
import queue
import time
from dataclasses import dataclass

__all__ = ["LiveEvent", "Subscription"]


@dataclass(frozen=True)
class LiveEvent:
    """An event as the feed delivers it: already framed for SSE."""

    stream_id: str
    conversation_id: str
    frame: str


class Subscription:
    """One SSE client's bounded queue; `conversation_id` None follows every conversation."""

    def __init__(
        self, conversation_id: str | None, queue_size: int, *, max_lifetime_s: float | None = None
    ) -> None:
        self.conversation_id = conversation_id
        self.ended_reason: str | None = None
        self._queue: queue.Queue[LiveEvent | None] = queue.Queue(maxsize=queue_size)
        self._ends_at = None if max_lifetime_s is None else time.monotonic() + max_lifetime_s

    def time_left(self) -> float | None:
        """Seconds until the stream's lifetime is up (ended then); None: no limit."""
        if self._ends_at is None:
            return None
        left = self._ends_at - time.monotonic()
        if left <= 0:
            self.end("stream lifetime reached")
        return max(left, 0.0)

    @property
    def ended(self) -> bool:
        return self.ended_reason is not None

    def offer(self, event: LiveEvent) -> bool:
        """Queues an event; False when the queue is full."""
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            return False
        return True

    def end(self, reason: str) -> None:
        """Ends the subscription and wakes its reader."""
        self.ended_reason = reason
        with contextlib.suppress(queue.Full):  # a reader that far behind sees `ended` first
            self._queue.put_nowait(None)

    def get(self, timeout_s: float) -> LiveEvent | None:
        """The next event, or None after `timeout_s` or once ended (check `ended`)."""
        if self.ended:
            return None
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def get_batch(self, timeout_s: float, *, most: int = 64) -> list[LiveEvent]:
        """The next event and whatever else is already queued (at most `most`), in order.

        Empty after `timeout_s` or once ended. A reader that fell behind catches up with
        one write for many events instead of one each.
        """
        first = self.get(timeout_s)
        if first is None:
            return []
        batch = [first]
        while len(batch) < most:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if event is None:  # ended meanwhile
                break
            batch.append(event)
        return batch

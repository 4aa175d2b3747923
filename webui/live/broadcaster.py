"""One pub/sub connection per web process, fanned out to every SSE client it serves.

A background thread, started on first use, subscribes to the global live channel
(``KeySpace.live_all()``: every conversation's events, published as
``"<stream id> <event json>"``) and hands each event to the bounded queue of every
client following that conversation, and of every client of the global feed. The
event is parsed and framed once, whatever the number of clients.

A client whose queue overflows is ended rather than allowed to skip events: it
reconnects with Last-Event-ID and catches up from the stream. For the same reason,
when the pub/sub connection drops (or redis-py silently re-subscribes after one),
every client is ended, since events published meanwhile never reached them.

A client is also ended when its stream has lived `max_lifetime_s` (it reconnects with
Last-Event-ID), and every client is ended when the process stops (`close`), so that
a stopping web worker is not held open by its streams.

Under the web process's gevent worker the "thread" is a greenlet and the queues are
cooperative: the same code serves thousands of clients from one OS thread.
"""

from __future__ import annotations

import logging
import threading

import redis

from shared.errors import CorruptRecord, StorageError
from shared.store.emit import split_message
from shared.store.event_log import parse_event
from webui.live.frames import event_frame
from webui.live.subscription import LiveEvent, Subscription

__all__ = ["Broadcaster"]

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000
_POLL_S = 0.5
_RETRY_S = 1.0


class Broadcaster:
    """Fans the global live channel out to subscriptions, from one background thread."""

    def __init__(
        self,
        client: redis.Redis,
        channel: str,
        *,
        queue_size: int = QUEUE_SIZE,
        ready_timeout_s: float = 5.0,
        max_lifetime_s: float | None = None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.queue_size = queue_size
        self.ready_timeout_s = ready_timeout_s
        self.max_lifetime_s = max_lifetime_s
        self._closed = False
        self._subscriptions: dict[str | None, set[Subscription]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # Clients

    def subscribe(self, conversation_id: str | None) -> Subscription:
        """Registers a client; returns once the channel subscription is live in Redis."""
        subscription = Subscription(
            conversation_id, self.queue_size, max_lifetime_s=self.max_lifetime_s
        )
        with self._lock:
            if self._closed:
                raise StorageError("the server is shutting down; reconnect")
            self._start()
            self._subscriptions.setdefault(conversation_id, set()).add(subscription)
        if not self._ready.wait(self.ready_timeout_s):
            self.unsubscribe(subscription)
            raise StorageError("the live event feed is not connected to Redis; try again")
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Forgets a client (idempotent)."""
        with self._lock:
            group = self._subscriptions.get(subscription.conversation_id)
            if group is not None:
                group.discard(subscription)
                if not group:
                    del self._subscriptions[subscription.conversation_id]

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return sum(len(group) for group in self._subscriptions.values())

    def close(self) -> None:
        """Ends every client (each stream sends its closing comment) and stops the thread.

        Later subscriptions are refused: the process is stopping.
        """
        with self._lock:
            self._closed = True
        self._stop.set()
        self._end_all("server shutting down")
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    # The thread

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():  # also after a fork
            self._stop.clear()
            self._ready.clear()
            self._thread = threading.Thread(
                target=self._run, name="signoff-broadcaster", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except redis.RedisError as exc:
                log.warning("live event feed lost its Redis connection: %s", exc)
            self._ready.clear()
            self._end_all("live feed reconnecting")
            self._stop.wait(_RETRY_S)

    def _listen(self) -> None:
        pubsub = self.client.pubsub()
        try:
            pubsub.subscribe(self.channel)
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=_POLL_S)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    self._on_subscribed()
                elif message["type"] == "message":
                    self._dispatch(str(message["data"]))
        finally:
            pubsub.close()

    def _on_subscribed(self) -> None:
        if self._ready.is_set():
            # redis-py reconnected and re-subscribed by itself: events may be missing.
            self._end_all("live feed reconnected")
        self._ready.set()

    def _dispatch(self, message: str) -> None:
        stream_id, payload = split_message(message)
        try:
            event = parse_event(self.channel, stream_id, payload)
        except CorruptRecord as exc:
            log.warning("skipping a live event: %s", exc)
            return
        live = LiveEvent(stream_id, event.conversation_id, event_frame(event))
        with self._lock:
            targets = [
                *self._subscriptions.get(event.conversation_id, ()),
                *self._subscriptions.get(None, ()),
            ]
        for subscription in targets:
            if not subscription.offer(live):
                subscription.end("too slow: queue overflowed")
                self.unsubscribe(subscription)

    def _end_all(self, reason: str) -> None:
        with self._lock:
            groups, self._subscriptions = self._subscriptions, {}
        for group in groups.values():
            for subscription in group:
                subscription.end(reason)

"""The worker's broker channel: one Redis client per channel instead of one per message.

kombu's Redis transport builds a new client object (redis-py copies its table of
response callbacks for each) every time it records a delivered message as unacked
and every time it acks one: two constructions per task, a tenth of a one-turn
leg's CPU in the worker. The client holds no connection of its own (they are the
channel's pool's) and is safe to share between threads, so the worker's channels
keep theirs, built again if the channel's pool is replaced. The per-task INFO lines of
Celery ("received", "succeeded") are dropped too: the worker logs one line per leg
with the conversation and the outcome, and failures are still logged by Celery.

An acknowledgement frees its place in the channel's prefetch window at once, and its
record in the broker goes with the next fetch or within 20 ms (`worker/broker_acks.py`).
kombu forgot a delivery only once the broker had confirmed its ack, so each ack that found
the broker away (a task that ended while Redis restarted) kept one place taken for the
channel's life: a gevent worker's consumer, which keeps its channel across a reconnect,
stopped fetching for good once `concurrency` acks had failed (the batch's items then waited
for ever, `tests/integration/test_broker_acks.py`). A record whose removal fails is tried
again; a message whose record outlives the visibility timeout is delivered again, and an
`advance` delivered twice finds its work done. A reject that fails frees its place too.

The channel's pool is a blocking one: with a thousand legs in flight, acks and
unacked-records that find every connection busy wait for one (up to the pool wait)
instead of failing with "Too many connections", which lost acks (kombu's own pool
does not wait).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from celery import Celery
from kombu.transport import redis as redis_transport
from kombu.transport import virtual

from shared.store.fair_queue import FairLifoQueue
from shared.store.lend_check import parser_options
from worker.broker_fetch import RecordingFetch

log = logging.getLogger(__name__)

__all__ = ["install", "keep_restoring"]

PAUSED_POLL_S = 0.01  # how soon a saturated gevent consumer looks again for a free slot
IDLE_POLL_S = 0.25  # the longest a consumer drains before it looks for a stop request
# How often a worker puts back what dead workers left unacknowledged (a range query on the
# unacked index when there is none): 10 s, so that a restore that found kombu's mutex taken
# (by a process killed while it held it: the mutex then lives UNACKED_MUTEX_EXPIRE_S) is
# tried again soon, not in 100 s.
RESTORE_EVERY_S = 10.0


class _QoS(redis_transport.QoS):
    """kombu's Redis QoS: deliveries the fetch recorded are not recorded again, acks free
    their place at once and leave the record's removal to `broker_acks`, and a reject that
    fails still frees its place."""

    def append(self, message: Any, delivery_tag: Any) -> None:
        if self.channel.recorded(delivery_tag):  # by the fetch itself (broker_fetch.py)
            virtual.QoS.append(self, message, delivery_tag)
        else:
            super().append(message, delivery_tag)

    def ack(self, delivery_tag: Any) -> None:
        """Frees the place now; the record goes with the next fetch or tick (broker_acks.py)."""
        virtual.QoS.ack(self, delivery_tag)
        self.channel.acks.add(delivery_tag)

    def restore_unacked_once(self, stderr: Any = None) -> Any:
        try:
            self.channel.flush_acks()  # acknowledged ones are not put back
        except Exception:
            log.warning("could not remove acknowledged deliveries' records", exc_info=True)
        return super().restore_unacked_once(stderr)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue=requeue)
        except Exception:
            self._forget(delivery_tag)
            raise

    def _forget(self, delivery_tag: Any) -> None:
        """Frees the place, leaving the broker's record to the visibility timeout."""
        if delivery_tag in self._delivered:
            virtual.QoS.ack(self, delivery_tag)


class _OneClient:
    """A channel's synchronous client, built once per pool instead of once per message."""

    _sync_client: Any = None
    pool: Any

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()  # type: ignore[misc]
        return client


class _Channel(_OneClient, RecordingFetch, redis_transport.Channel):
    QoS = _QoS
    pool_wait_s: float = 5.0

    def _get_pool(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._get_pool(asynchronous=True)
        params = self._connparams(asynchronous=False)
        self.keyprefix_fanout = self.keyprefix_fanout.format(db=params["db"])
        # the check before lending a connection, without gevent's poll (lend_check.py); the
        # queue that does not notify a condition nobody waits on (under gevent, a hub switch)
        params = {**parser_options(), **params}
        return redis.BlockingConnectionPool(
            timeout=self.pool_wait_s, queue_class=FairLifoQueue, **params
        )


class _SentinelChannel(_OneClient, RecordingFetch, redis_transport.SentinelChannel):
    """`_Channel`'s acknowledgements and client for a state Redis behind Sentinels; its pool
    is kombu's Sentinel-managed one (it finds the primary again after a failover)."""

    QoS = _QoS


class _Poller(redis_transport.MultiChannelPoller):
    """Without an event loop (the gevent pool), a consumer with every slot busy stops
    fetching and polls only the remote-control socket, for 2 s at a time: a slot freed
    meanwhile stayed empty that long (4 tasks every 2 s at concurrency 4). While the
    channel cannot consume, it looks again every `PAUSED_POLL_S`."""

    def get(self, callback: Any, timeout: float | None = None) -> Any:
        if timeout is None or timeout > PAUSED_POLL_S:
            channels = self._channels
            if any(c.active_queues and not c.qos.can_consume() for c in channels):
                timeout = PAUSED_POLL_S
        return super().get(callback, timeout=timeout)


class _Transport(redis_transport.Transport):
    """Without an event loop, Celery's consumer (and the remote control) drain for 2 s (1 s)
    before they look at a stop request: a warm shutdown of a gevent worker took 5 s against
    1.8 s on the thread pool. Draining returns after `IDLE_POLL_S` at most (a timeout they
    expect and loop on)."""

    def drain_events(self, connection: Any, timeout: Any = None) -> Any:  # type: ignore[override]
        if timeout is not None and timeout > IDLE_POLL_S:
            timeout = IDLE_POLL_S
        return super().drain_events(connection, timeout=timeout)


class _SentinelTransport(redis_transport.SentinelTransport):
    """`_Transport` for `sentinel://` (what a state Redis behind Sentinels resolves to)."""

    Channel = _SentinelChannel

    def drain_events(self, connection: Any, timeout: Any = None) -> Any:  # type: ignore[override]
        if timeout is not None and timeout > IDLE_POLL_S:
            timeout = IDLE_POLL_S
        return super().drain_events(connection, timeout=timeout)


def install(*, pool_wait_s: float) -> None:
    """Makes the Redis transports of this process use `_Channel` and `_SentinelChannel`
    (idempotent)."""
    _Channel.pool_wait_s = pool_wait_s
    redis_transport.Transport.Channel = _Channel
    if not issubclass(redis_transport.Transport, _Transport):  # what "redis://" resolves to
        redis_transport.Transport = _Transport  # type: ignore[misc]
    redis_transport.SentinelTransport = _SentinelTransport  # type: ignore[misc]  # "sentinel://"
    redis_transport.MultiChannelPoller = _Poller  # type: ignore[misc]  # a new Transport builds its cycle from it
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)


def keep_restoring(app: Celery) -> None:
    """Puts messages a dead worker left unacknowledged back on their queue, now and every 10 s.

    kombu does so from its event loop (the thread pool's); a gevent pool's consumer drains
    without one and was seen never to restore them (`tests/integration/test_redelivery.py`).
    The scan is kombu's own (`restore_visible`), under its mutex, so workers never restore
    one message twice.
    """

    def loop() -> None:
        while True:
            try:
                with app.connection_for_read() as connection:
                    channel = connection.default_channel
                    channel.qos.restore_visible(num=channel.unacked_restore_limit, interval=1)
            except Exception:  # the broker away: the next round tries again
                log.warning("could not restore unacknowledged messages", exc_info=True)
            time.sleep(RESTORE_EVERY_S)

    threading.Thread(target=loop, name="unacked-restorer", daemon=True).start()

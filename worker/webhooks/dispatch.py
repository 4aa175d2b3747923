"""The dispatcher: turns outbox events into deliveries and sends each to the delivery queue.

Each worker process runs one in a thread (`DispatcherStep`, a Celery bootstep) reading
the outbox stream through one consumer group, so every event is dispatched by one of
them. An event is acknowledged once its deliveries are logged and sent; the entries of a
dispatcher that died are claimed by another after `RECLAIM_IDLE_MS`. Dispatching twice
is harmless: delivery ids come from the event and the endpoint, and only a delivery
never tried and older than a reclaim is sent again.

The dispatcher also sweeps for lost retries: a retry waits out its backoff as a Celery
countdown inside one worker, so a worker killed meanwhile takes it along until Celery
redelivers it (the visibility timeout, 15 minutes by default). A pending delivery overdue
by more than `webhook_retry_grace_s` is taken (once among dispatchers) and sent again.
Every task names how many attempts were made before the one it is for, and an attempt
holds a lock, so a late copy of the lost task (or of a first attempt) does nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import NotFound, SignoffError
from shared.models.webhooks import DeliveryStatus, WebhookEndpoint, WebhookEvent
from shared.store.keys import KeySpace
from shared.store.stream_groups import ensure_group
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from worker.loop_step import LoopStep

__all__ = ["GROUP", "Dispatcher", "DispatcherStep"]

log = logging.getLogger(__name__)

GROUP = "dispatch"
BLOCK_MS = 1_000
SHARDS_PAUSE_MS = 100  # the longest wait between two rounds over several shards' outboxes
BATCH = 100
RECLAIM_IDLE_MS = 30_000
STOP_WAIT_S = 0.2
SWEEP_EVERY_S = 5.0  # the longest time between two sweeps for lost retries
_ERROR_PAUSE_S = 1.0


class Dispatcher:
    """Reads the outbox and makes deliveries; `send(delivery_id)` queues one for sending."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        deliveries: DeliveryLog,
        send: Callable[[str], None],
        *,
        send_retry: Callable[[str, int], None] | None = None,
        consumer: str | None = None,
        reclaim_idle_ms: int = RECLAIM_IDLE_MS,
        retry_grace_s: float = 60.0,
    ) -> None:
        self.client = client
        self.keys = keys
        self.endpoints = EndpointStore(client, keys)
        self.deliveries = deliveries
        self.send = send
        # a swept retry names the attempt it is for, so a late copy of the lost one is void
        self.send_retry = send_retry or (lambda did, _seen: send(did))
        self.consumer = consumer or f"{socket.gethostname()}:{os.getpid()}"
        self.reclaim_idle_ms = reclaim_idle_ms
        self.retry_grace_s = retry_grace_s
        self._group_ready = False
        self._next_sweep = 0.0

    def run(self, stop: threading.Event) -> None:
        """Dispatches until `stop` is set; a Redis failure pauses it, never ends it."""
        rounds = 0
        while not stop.is_set():
            try:
                self.step(reclaim=rounds % 30 == 0)
                rounds += 1
                if time.monotonic() >= self._next_sweep:
                    self.sweep()
                    self._next_sweep = time.monotonic() + min(SWEEP_EVERY_S, self.retry_grace_s)
            except (redis.RedisError, SignoffError) as exc:
                log.warning("webhook dispatcher: %s", exc)
                self._group_ready = False
                stop.wait(_ERROR_PAUSE_S)

    def step(self, *, reclaim: bool = False, block_ms: int = BLOCK_MS) -> int:
        """Dispatches what is waiting (and, with `reclaim`, what a dead dispatcher left).

        Each state shard has its outbox. One is read blocking; several are read in turn
        without blocking (a cluster has no read across slots), and a round that finds
        nothing waits `SHARDS_PAUSE_MS` at most.
        """
        outboxes = self.keys.every_shard(self.keys.webhook_outbox)
        self._ensure_group(outboxes)
        entries: list[tuple[str, str, dict[str, str]]] = []
        for outbox in outboxes:
            if reclaim:
                entries += [(outbox, eid, fields) for eid, fields in self._reclaimed(outbox)]
            block = block_ms if len(outboxes) == 1 else None
            reply: Any = self.client.xreadgroup(
                GROUP, self.consumer, {outbox: ">"}, count=BATCH, block=block
            )
            for _stream, found in reply or []:
                entries += [(outbox, eid, fields) for eid, fields in found]
        if not entries and len(outboxes) > 1 and block_ms:
            time.sleep(min(block_ms, SHARDS_PAUSE_MS) / 1000)
        endpoints = self.endpoints.all() if entries else []
        for outbox, entry_id, fields in entries:
            self._dispatch(fields.get("event", ""), endpoints)
            self.client.xack(outbox, GROUP, entry_id)
        return len(entries)

    def sweep(self, now: float | None = None) -> list[str]:
        """Sends again the pending deliveries whose next attempt is overdue by more than the
        grace (their task was lost); returns the ids this dispatcher took."""
        now = time.time() if now is None else now
        taken = []
        for did, due in self.deliveries.overdue(now, self.retry_grace_s):
            if not self.deliveries.take(did, due, until=now + self.retry_grace_s):
                continue  # another dispatcher took it, or an attempt moved it on
            try:
                seen = self.deliveries.get(did).attempts_this_round
            except NotFound:  # dropped from the log meanwhile
                self.deliveries.settled(did)
                continue
            log.warning(
                "webhook %s: attempt %d, due %.0f s ago, was lost", did, seen + 1, now - due
            )
            self.send_retry(did, seen)
            taken.append(did)
        return taken

    def _ensure_group(self, outboxes: list[str]) -> None:
        if self._group_ready:
            return
        for outbox in outboxes:  # from the start: events emitted while no worker ran too
            ensure_group(self.client, outbox, GROUP)
        self._group_ready = True

    def _reclaimed(self, outbox: str) -> list[tuple[str, dict[str, str]]]:
        reply: Any = self.client.xautoclaim(
            outbox, GROUP, self.consumer, self.reclaim_idle_ms, count=BATCH
        )
        return [(eid, fields) for eid, fields in reply[1] if fields]

    def _dispatch(self, raw: str, endpoints: list[WebhookEndpoint]) -> list[str]:
        """The deliveries of one event, made and sent; an unreadable event is dropped."""
        try:
            event = WebhookEvent.model_validate_json(raw)
        except ValidationError as exc:
            log.warning("webhook outbox: unreadable event dropped: %s", exc)
            return []
        sent = []
        for endpoint in endpoints:
            if not endpoint.wants(event.kind):
                continue
            did, created = self.deliveries.create(event, endpoint)
            if created or self._unsent(did):
                self.send(did)
                sent.append(did)
        return sent

    def _unsent(self, did: str) -> bool:
        """A delivery made by a dispatcher that died before sending it: pending, never tried,
        and older than a reclaim (a fresh one is an event emitted twice, already sent)."""
        delivery = self.deliveries.get(did)
        stale = time.time() - delivery.created_at >= self.reclaim_idle_ms / 1000
        return stale and delivery.status is DeliveryStatus.PENDING and not delivery.attempts


class DispatcherStep(LoopStep):
    """Runs a `Dispatcher` in a thread for as long as the Celery worker runs."""

    thread_name = "webhook-dispatcher"
    stop_wait_s = STOP_WAIT_S

    def make_loop(self, app: Any) -> Dispatcher:
        dispatcher: Dispatcher = app.signoff_dispatcher()
        return dispatcher

"""The task relay: publishes the outbox's tasks to a broker apart from the state Redis.

Every turn worker and `signoff beat` runs one in a thread while the broker is apart
(`shared.client.broker.uses_outbox`); one of them at a time holds the relay lease and
publishes, the others stand by and take over within a lease when it stops or dies
(`shared.store.task_outbox`). Publishing comes before the acknowledgement, so a relay
that dies between the two has its tasks published again by the next: at least once,
and an `advance` delivered twice finds its work done (the lease and fencing token).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from celery import Celery
from opentelemetry import context as otel_context
from opentelemetry import propagate
from pydantic import ValidationError

from shared.client.outbox import OutboxTask
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.task_outbox import TaskOutbox
from worker.loop_step import LoopStep

__all__ = ["Relay", "RelayStep", "RelayThread", "app_publisher", "relay_for"]

log = logging.getLogger(__name__)

LEASE_MS = 5_000  # a relay that died is replaced within this
WAIT_S = 1.0  # the longest blocking wait for an entry (the lease is renewed in between)
STANDBY_S = 1.0  # how often a relay without the lease asks for it
BATCH = 100
STOP_WAIT_S = 0.2
_ERROR_PAUSE_S = 1.0

Publish = Callable[[OutboxTask], None]


class Relay:
    """Moves outbox entries to the broker through `publish`, under the relay lease."""

    def __init__(
        self, outbox: TaskOutbox, publish: Publish, *, token: str = "", batch: int = BATCH
    ) -> None:
        self.outbox = outbox
        self.publish = publish
        self.token = token or uuid.uuid4().hex
        self.batch = batch

    def step(self) -> int | None:
        """Publishes one batch; returns how many, or None when another relay holds the lease.

        What was published is acknowledged even when a later entry fails to publish: the
        failure propagates, and the rest is taken again (by this relay or the next holder).
        """
        entries = self.outbox.take(self.token, self.batch)
        if entries is None:
            return None
        published = 0
        try:
            for raw in entries:
                self._publish(raw)
                published += 1
        finally:
            if published:
                self.outbox.done(self.token, published)
        return published

    def _publish(self, raw: str) -> None:
        try:
            task = OutboxTask.model_validate_json(raw)
        except ValidationError as exc:  # kept, it would block every entry after it
            log.error("dropping an outbox entry that does not parse (%s): %.200s", exc, raw)
            return
        self.publish(task)

    def run(self, stop: threading.Event) -> None:
        """Relays until `stop` is set, then gives the lease up; failures pause it, never end it."""
        try:
            while not stop.is_set():
                self._round(stop)
        finally:
            try:
                self.outbox.done(self.token, 0, release=True)
            except Exception:  # the lease lapses by itself
                log.warning("task relay: could not give the lease up", exc_info=True)

    def _round(self, stop: threading.Event) -> None:
        try:
            published = self.step()
            if published is None:
                stop.wait(STANDBY_S)
            elif published == 0:
                self.outbox.wait(WAIT_S)
        except Exception as exc:  # Redis or the broker away: the next round tries again
            log.warning("task relay: %s: %s", type(exc).__name__, exc)
            stop.wait(_ERROR_PAUSE_S)


def app_publisher(app: Celery) -> Publish:
    """Publishes through `app`'s producer pool (confirmed by RabbitMQ before it returns).

    Each task is sent within the trace context its entry carries (the web request's, say):
    Celery's instrumentation makes the sending span there and puts it in the message, where
    the relay thread's own empty context would start a trace of its own.
    """

    def publish(task: OutboxTask) -> None:
        token = otel_context.attach(propagate.extract(dict(task.headers)))
        try:
            app.send_task(task.task, args=task.args, queue=task.queue, headers=dict(task.headers))
        finally:
            otel_context.detach(token)

    return publish


class ShardRelays:
    """The relays of a deployment of several state shards, one outbox each: each runs in a
    thread of its own, blocking on its own outbox (a cluster has no wait across slots)."""

    def __init__(self, relays: list[Relay]) -> None:
        self.relays = relays

    def run(self, stop: threading.Event) -> None:
        threads = [
            threading.Thread(target=r.run, args=(stop,), name=f"task-relay-{n}", daemon=True)
            for n, r in enumerate(self.relays[1:], start=1)
        ]
        for thread in threads:
            thread.start()
        try:
            self.relays[0].run(stop)
        finally:
            for thread in threads:
                thread.join(timeout=WAIT_S + STOP_WAIT_S)


def relay_for(app: Celery, settings: Settings) -> Relay | ShardRelays:
    """A relay per state shard, each on a Redis connection of its own (it blocks on its
    outbox a second at a time)."""
    keys = KeySpace.of(settings)
    relays = [
        Relay(TaskOutbox(connect(settings), keys, shard, lease_ms=LEASE_MS), app_publisher(app))
        for shard in keys.all_shards()
    ]
    return relays[0] if len(relays) == 1 else ShardRelays(relays)


class RelayThread:
    """Runs a `Relay` in a daemon thread (a greenlet in a gevent worker)."""

    def __init__(self, relay: Relay | ShardRelays) -> None:
        self.relay = relay
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=relay.run, args=(self._stop,), name="task-relay", daemon=True
        )

    def start(self) -> RelayThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Asks the relay to stop and waits out its blocking read, so that it gives the lease
        up and a relay that starts next need not wait for the lease to lapse."""
        self._stop.set()
        self._thread.join(timeout=WAIT_S + STOP_WAIT_S)


class RelayStep(LoopStep):
    """Runs the app's relay (`app.signoff_relay()`) for as long as the Celery worker runs; a
    stop waits out its blocking read, so the lease is given up for the next relay."""

    thread_name = "task-relay"
    stop_wait_s = WAIT_S + STOP_WAIT_S

    def make_loop(self, app: Any) -> Relay | ShardRelays:
        relay: Relay | ShardRelays = app.signoff_relay()
        return relay

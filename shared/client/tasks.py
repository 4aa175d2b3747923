"""Sending Signoff's tasks by name, so the web process never imports the worker.

Also the one place that fixes Celery's non-optional settings, shared by the
producer here and the worker app: JSON only, late acks, prefetch of one, no
results, and a visibility timeout set everywhere Celery reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import redis
from celery import Celery
from kombu import Connection
from kombu.exceptions import KombuError, LimitExceeded

from shared.client.broker import broker_config, uses_outbox
from shared.client.outbox import OutboxMessages
from shared.client.task_message import QueuedTask, TaskMessages
from shared.errors import StorageError
from shared.settings import Settings
from shared.store.connection import PoolBound
from shared.store.keys import KeySpace

__all__ = [
    "ADVANCE",
    "BROKER_POOL",
    "DELIVER_WEBHOOK",
    "MCP_REFRESH",
    "SWEEP",
    "Advancer",
    "QueuesAdvance",
    "TaskSender",
    "advance_messages",
    "broker_errors",
    "celery_config",
    "queue_name",
    "webhook_queue_name",
]

ADVANCE = "signoff.advance"
SWEEP = "signoff.sweep"
DELIVER_WEBHOOK = "signoff.webhook.deliver"
MCP_REFRESH = "signoff.mcp.refresh"
BROKER_POOL = PoolBound("task-sending broker", "broker_connections")


def queue_name(settings: Settings) -> str:
    return f"{settings.key_prefix}.turns"


def webhook_queue_name(settings: Settings) -> str:
    """Webhook deliveries have their own queue, so a worker can be given to them alone."""
    return f"{settings.key_prefix}.webhooks"


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings that are not optional (see docs/architecture.md)."""
    queues = [queue_name(settings), webhook_queue_name(settings)]
    return {
        **broker_config(settings, queues),
        "broker_connection_retry_on_startup": True,
        "broker_pool_limit": settings.broker_connections,
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_ignore_result": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": queue_name(settings),
        "task_default_exchange": queue_name(settings),
        "task_default_routing_key": queue_name(settings),
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "task_send_sent_event": False,
    }


def advance_messages(settings: Settings, app: Celery) -> TaskMessages | OutboxMessages:
    """Task messages for the conversation queue, addressed as `app` sends them: into the
    broker's list on the state Redis, else into the outbox (`shared.client.outbox`)."""
    if uses_outbox(settings):
        return OutboxMessages(keys=KeySpace.of(settings), queue=queue_name(settings))
    return TaskMessages(
        key_prefix=f"{settings.key_prefix}:celery:",
        queue=queue_name(settings),
        reply_to=app.thread_oid,
    )


class Advancer(Protocol):
    """Anything that can ask for a conversation's next leg."""

    def advance(self, conversation_id: str) -> None: ...


@runtime_checkable
class QueuesAdvance(Protocol):
    """An advancer whose `advance` a script can queue itself, in the write that needs it."""

    def queued_advance(self, conversation_id: str) -> QueuedTask: ...


class TaskSender:
    """A producer-only Celery app: sends `advance` by name.

    Threads may share one: each send borrows a connection of the broker pool
    (`broker_connections`), waiting up to `redis_pool_wait_s` for a free one.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = Celery("signoff-producer", set_as_current=False)
        self.app.conf.update(celery_config(settings))
        self.messages = advance_messages(settings, self.app)

    def advance(self, conversation_id: str) -> None:
        self._send(ADVANCE, f"sending advance for conversation {conversation_id}", conversation_id)

    def queued_advance(self, conversation_id: str) -> QueuedTask:
        """`advance` as a message for a script to push (see `shared.client.task_message`)."""
        return self.messages.task(ADVANCE, conversation_id)

    def sweep(self) -> None:
        self._send(SWEEP, "sending a sweep")

    def deliver_webhook(self, delivery_id: str) -> None:
        """Queues an attempt of a webhook delivery (a re-send asked for by an operator)."""
        queue = webhook_queue_name(self.settings)
        self._send(DELIVER_WEBHOOK, f"re-sending webhook {delivery_id}", delivery_id, queue=queue)

    def refresh_mcp(self, server: str) -> None:
        """Asks a worker to list an MCP server's tools again (through a new session)."""
        self._send(MCP_REFRESH, f"asking for MCP server {server}'s tools", server)

    def _send(self, name: str, action: str, *args: str, queue: str | None = None) -> None:
        with broker_errors(action), self._connection(action) as connection:
            self.app.send_task(name, args=list(args), connection=connection, queue=queue)

    @contextmanager
    def _connection(self, action: str) -> Iterator[Connection]:
        """A pooled broker connection, waited for with a limit.

        Celery's own producer pool cannot bound the wait: it grows by the pool limit each
        time an app looks it up, and its producers then wait for a connection forever.
        """
        try:
            connection = self.app.pool.acquire(block=True, timeout=self.settings.redis_pool_wait_s)
        except LimitExceeded as exc:
            raise StorageError(f"{action}: {BROKER_POOL.exhausted(self.settings)}") from exc
        with connection:
            yield connection

    def close(self) -> None:
        self.app.close()


@contextmanager
def broker_errors(action: str) -> Iterator[None]:
    """The broker (Redis) failing to take a task becomes StorageError, as any Redis failure."""
    try:
        yield
    except (KombuError, redis.RedisError, OSError) as exc:
        raise StorageError(f"{action}: {exc.__class__.__name__}: {exc}") from exc

"""Which broker Celery uses, and the Celery settings that follow from it.

By default the broker is the state Redis: a script that writes state pushes the task its
write asks for into the broker's own queue list in the same atomic step
(`shared.client.task_message`). A broker apart (RabbitMQ, or a Redis of its own) is out of
a script's reach: such a write puts the task in the outbox, a list in the state Redis
(`shared.client.outbox`), and a relay in the workers and `signoff beat` publishes it
(`worker/relay.py`).

With RabbitMQ every queue is a quorum queue (replicated, durable), messages are persistent
and confirmed by the broker before a send returns, and a countdown (a webhook's or an
approval route's retry) waits in RabbitMQ's delay queues (Celery's native delayed delivery),
not in a worker's memory: a topic exchange per queue is what that delivery routes through.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu import Exchange, Queue

from shared.settings import Settings, sentinel_addresses
from shared.store.connection import redacted_url

__all__ = [
    "BrokerKind",
    "broker_config",
    "broker_kind",
    "broker_url",
    "countdown_for",
    "declare_queues",
    "described",
    "redacted_url",
    "uses_outbox",
]

QUORUM = "quorum"
UNACKED_MUTEX_EXPIRE_S = 30


class BrokerKind(str, Enum):
    """Where Celery's queues live."""

    STATE_REDIS = "state-redis"  # the default: state and queues in one Redis
    REDIS = "redis"  # a Redis of their own
    RABBITMQ = "rabbitmq"


def broker_url(settings: Settings) -> str:
    """The broker's URL; the state Redis behind Sentinels is kombu's `sentinel://` URL."""
    if settings.broker_url or not settings.redis_sentinels:
        return settings.broker_url or settings.redis_url
    parsed = urlsplit(settings.redis_url)
    auth = parsed.netloc.rpartition("@")[0]
    where = f"{auth}@" if auth else ""
    database = parsed.path if parsed.path not in ("", "/") else "/0"
    return ";".join(
        f"sentinel://{where}{host}:{port}{database}"
        for host, port in sentinel_addresses(settings.redis_sentinels)
    )


def broker_kind(settings: Settings) -> BrokerKind:
    url = settings.broker_url
    if not url or url == settings.redis_url:
        return BrokerKind.STATE_REDIS
    if url.partition("://")[0].lower() in ("amqp", "amqps"):
        return BrokerKind.RABBITMQ
    return BrokerKind.REDIS


def uses_outbox(settings: Settings) -> bool:
    """Whether tasks asked for by state writes go through the outbox (a broker apart)."""
    return broker_kind(settings) is not BrokerKind.STATE_REDIS


def broker_config(settings: Settings, queues: list[str]) -> dict[str, Any]:
    """Celery settings of the broker: the URL, transport options and, for RabbitMQ, `queues`
    as quorum queues on topic exchanges."""
    url = broker_url(settings)
    if broker_kind(settings) is not BrokerKind.RABBITMQ:
        transport: dict[str, Any] = {
            "visibility_timeout": settings.visibility_timeout_s,
            "global_keyprefix": f"{settings.key_prefix}:celery:",
            # kombu's lock over restoring unacknowledged messages: a process killed holding it
            # stops every restore for its life (kombu's default: 5 minutes); a restore takes
            # milliseconds, and a message restored twice runs a harmless second `advance`
            "unacked_mutex_expire": UNACKED_MUTEX_EXPIRE_S,
        }
        if url.startswith("sentinel://"):
            transport["master_name"] = settings.redis_sentinel_master
            password = settings.redis_sentinel_password.get_secret_value()
            transport["sentinel_kwargs"] = {"password": password} if password else {}
        return {
            "broker_url": url,
            "broker_transport_options": transport,
            "result_backend_transport_options": transport,
        }
    return {
        "broker_url": url,
        "broker_transport_options": {"confirm_publish": True},
        "task_default_queue_type": QUORUM,
        "task_default_exchange_type": "topic",
        "task_default_delivery_mode": "persistent",
        "task_queues": [_quorum_queue(name) for name in queues],
        "worker_detect_quorum_queues": True,
        "broker_native_delayed_delivery_queue_type": QUORUM,
    }


def countdown_for(settings: Settings, wait_s: float) -> float | None:
    """A task's countdown as its broker takes it (None: at once). RabbitMQ's delayed delivery
    counts whole seconds: Celery truncates a countdown to them and refuses one that truncates
    to 0, so there a wait is rounded up (a retry after 0.5 s failed to be sent at all)."""
    if wait_s <= 0:
        return None
    return float(math.ceil(wait_s)) if broker_kind(settings) is BrokerKind.RABBITMQ else wait_s


def declare_queues(app: Celery) -> None:
    """Declares every queue of the app with its exchange and binding. Celery's delayed delivery
    binds each queue's exchange when a worker starts, and fails for one not declared yet (the
    other worker's queue, on a fresh vhost): declared first, each worker binds them all."""
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in app.amqp.queues.values():
            queue.bind(channel).declare()


def _quorum_queue(name: str) -> Queue:
    return Queue(
        name,
        Exchange(name, type="topic", durable=True),
        routing_key=name,
        durable=True,
        queue_arguments={"x-queue-type": QUORUM},
    )


def described(settings: Settings) -> str:
    """One line on the broker in use, for `signoff doctor` and `signoff up`."""
    kind = broker_kind(settings)
    if kind is BrokerKind.STATE_REDIS:
        return "the state Redis (a state write pushes its task in the same script)"
    where = redacted_url(broker_url(settings))
    what = "RabbitMQ, quorum queues" if kind is BrokerKind.RABBITMQ else "a Redis of its own"
    return f"{what} at {where} (tasks of state writes relayed from the outbox)"

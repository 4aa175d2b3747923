"""Sending Signoff's tasks by name, so the web process never imports the worker.

Also the one place that fixes Celery's non-optional settings, shared by the
producer here and the worker app: JSON only, late acks, prefetch of one, no
results, and a visibility timeout set everywhere Celery reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import redis
from celery import Celery
from kombu.exceptions import KombuError

from shared.errors import StorageError
from shared.settings import Settings

__all__ = ["ADVANCE", "SWEEP", "Advancer", "TaskSender", "celery_config", "queue_name"]

ADVANCE = "signoff.advance"
SWEEP = "signoff.sweep"


def queue_name(settings: Settings) -> str:
    return f"{settings.key_prefix}.turns"


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings that are not optional (see docs/architecture.md)."""
    transport = {
        "visibility_timeout": settings.visibility_timeout_s,
        "global_keyprefix": f"{settings.key_prefix}:celery:",
    }
    return {
        "broker_url": settings.redis_url,
        "broker_transport_options": transport,
        "result_backend_transport_options": transport,
        "broker_connection_retry_on_startup": True,
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


class Advancer(Protocol):
    """Anything that can ask for a conversation's next leg."""

    def advance(self, conversation_id: str) -> None: ...


class TaskSender:
    """A producer-only Celery app: sends `advance` by name."""

    def __init__(self, settings: Settings) -> None:
        self.app = Celery("signoff-producer", set_as_current=False)
        self.app.conf.update(celery_config(settings))

    def advance(self, conversation_id: str) -> None:
        with _broker_errors(f"sending advance for conversation {conversation_id}"):
            self.app.send_task(ADVANCE, args=[conversation_id])

    def sweep(self) -> None:
        with _broker_errors("sending a sweep"):
            self.app.send_task(SWEEP)

    def close(self) -> None:
        self.app.close()


@contextmanager
def _broker_errors(action: str) -> Iterator[None]:
    """The broker (Redis) failing to take a task becomes StorageError, as any Redis failure."""
    try:
        yield
    except (KombuError, redis.RedisError, OSError) as exc:
        raise StorageError(f"{action}: {exc.__class__.__name__}: {exc}") from exc

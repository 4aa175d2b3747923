"""The worker's broker channel: one Redis client per channel instead of one per message.

kombu's Redis transport builds a new client object (redis-py copies its table of
response callbacks for each) every time it records a delivered message as unacked
and every time it acks one: two constructions per task, a tenth of a one-turn
leg's CPU in the worker. The client holds no connection of its own (they are the
channel's pool's) and is safe to share between threads, so the worker's channels
keep theirs, built again if the channel's pool is replaced. The per-task INFO lines of
Celery ("received", "succeeded") are dropped too: the worker logs one line per leg
with the conversation and the outcome, and failures are still logged by Celery.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as redis_transport

__all__ = ["install"]


class _Channel(redis_transport.Channel):
    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client


def install() -> None:
    """Makes the Redis transport of this process use `_Channel` (idempotent)."""
    redis_transport.Transport.Channel = _Channel
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)

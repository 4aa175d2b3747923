"""Webhook endpoints, and the outbox that events go through on their way to them.

Emitting an event is one call inside the script of the write that caused it (a flush), or
one command queued on its pipeline (a resolution, a schedule's fire): a Lua function that
appends the event to the outbox stream only when an endpoint is registered. A dispatcher in
each worker turns outbox entries into deliveries (`shared/store/webhook_log.py`); nothing on
a turn's path waits for an endpoint. `emit_webhook_event` is the entry point for code without
such a pipeline (schedules, batches).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import CorruptRecord, NotFound
from shared.models.webhooks import EndpointRequest, WebhookEndpoint, WebhookEvent, WebhookEventKind
from shared.outbound import OutboundPolicy
from shared.store.connection import storage_errors
from shared.store.copies import copy_hash
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript, lua_source
from shared.webhooks.signing import new_secret

__all__ = [
    "OUTBOX_LUA",
    "OUTBOX_MAXLEN",
    "EndpointStore",
    "emit_webhook_event",
    "queue_event",
]

OUTBOX_MAXLEN = 100_000  # events not yet dispatched; the dispatcher keeps up in milliseconds
# `outbox_add(endpoints, outbox, event, maxlen)`, for scripts that emit webhook events.
OUTBOX_LUA = lua_source("shared.store", "webhook_outbox.lua")
_OUTBOX = LuaScript(
    "shared.store",
    "webhook_outbox_add.lua",
    keys=["endpoints", "outbox"],
    args=["event", "maxlen"],
    uses=[OUTBOX_LUA],
)


def queue_event(pipe: Any, keys: KeySpace, event: WebhookEvent, shard: int) -> None:
    """Queues `event` for a shard's outbox on a pipeline (kept only if an endpoint is
    registered)."""
    _OUTBOX.queue(pipe, outbox_keys(keys, shard), [event.model_dump_json(), OUTBOX_MAXLEN])


def outbox_keys(keys: KeySpace, shard: int) -> list[str]:
    """webhook_outbox_add.lua's keys in one shard: its copy of the endpoints, its outbox."""
    return [keys.webhook_endpoints_copy(shard), keys.webhook_outbox(shard)]


def emit_webhook_event(
    client: redis.Redis,
    keys: KeySpace,
    kind: WebhookEventKind,
    data: dict[str, Any],
    *,
    event_id: str,
) -> bool:
    """Sends an event to every endpoint that wants `kind`; one round trip, no waiting.

    `event_id` names what happened (`schedule.fired:<schedule>:<due time>`): the same id
    emitted twice makes no second delivery. `data` is the payload's `data` (JSON values);
    a `text` entry is also put at the top of the payload, for chat tools. Returns whether
    the event was kept (False: no endpoint is registered).
    """
    event = WebhookEvent(event_id=event_id, kind=kind, data=data)
    with storage_errors(f"emitting webhook event {event_id}"):
        kept = _OUTBOX(
            client,
            outbox_keys(keys, keys.shard_for(event_id)),
            [event.model_dump_json(), OUTBOX_MAXLEN],
        )
    return bool(kept)


class EndpointStore:
    """The endpoints operators registered."""

    def __init__(
        self, client: redis.Redis, keys: KeySpace, *, outbound: OutboundPolicy | None = None
    ) -> None:
        self.client = client
        self.keys = keys
        self.outbound = outbound  # given, a URL on a refused address is not registered

    def add(self, request: EndpointRequest, *, actor: str) -> WebhookEndpoint:
        """Registers an endpoint; the returned one carries its secret (shown once)."""
        if self.outbound is not None:
            self.outbound.check_url(request.url)
        endpoint = WebhookEndpoint(
            id=f"wh_{secrets.token_hex(6)}",
            url=request.url,
            events=sorted(set(request.events), key=list(WebhookEventKind).index),
            description=request.description,
            secret=request.secret or new_secret(),
            created_at=time.time(),
            created_by=actor,
        )
        doc = json.dumps(endpoint.model_dump(mode="json") | {"secret": endpoint.secret})
        with storage_errors("registering a webhook endpoint"):
            self.client.hset(self.keys.webhook_endpoints(), endpoint.id, doc)
            self._copy()
        return endpoint

    def remove(self, endpoint_id: str) -> WebhookEndpoint:
        endpoint = self.get(endpoint_id)
        with storage_errors(f"removing webhook endpoint {endpoint_id}"):
            self.client.hdel(self.keys.webhook_endpoints(), endpoint_id)
            self._copy()
        return endpoint

    def _copy(self) -> None:
        keys = self.keys
        copy_hash(
            self.client, keys.webhook_endpoints(), keys.every_shard(keys.webhook_endpoints_copy)
        )

    def get(self, endpoint_id: str) -> WebhookEndpoint:
        with storage_errors(f"reading webhook endpoint {endpoint_id}"):
            raw = self.client.hget(self.keys.webhook_endpoints(), endpoint_id)
        if raw is None:
            raise NotFound(f"no webhook endpoint {endpoint_id!r}")
        return _parse(endpoint_id, str(raw))

    def all(self) -> list[WebhookEndpoint]:
        """Every endpoint, oldest first."""
        with storage_errors("reading webhook endpoints"):
            raw: dict[str, str] = self.client.hgetall(self.keys.webhook_endpoints())  # type: ignore[assignment]
        found = [_parse(eid, doc) for eid, doc in raw.items()]
        return sorted(found, key=lambda e: (e.created_at, e.id))


def _parse(endpoint_id: str, doc: str) -> WebhookEndpoint:
    try:
        return WebhookEndpoint.model_validate_json(doc)
    except ValidationError as exc:
        raise CorruptRecord(f"webhook endpoint {endpoint_id} is unreadable: {exc}") from exc

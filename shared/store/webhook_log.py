"""The delivery log: one record per event and endpoint, with every attempt, bounded.

A delivery's id is derived from its event and endpoint, so dispatching an event twice
(a dispatcher died before acknowledging it, a retried leg emitted it again) finds the
delivery already there. The log keeps the newest `webhook_log_size` deliveries; older
ones are dropped with their attempts. Attempts record the status code or the error and
the time taken, never the secret.

Every pending delivery is also indexed by when its next attempt is due, so a delivery
whose retry task was lost with a killed worker is found by the sweep (`overdue`, `take`)
and sent again; an attempt holds a short lock, so two copies of one attempt send once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import CorruptRecord, NotFound
from shared.models.webhooks import (
    DeliveryAttempt,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["MAX_ATTEMPTS_KEPT", "DeliveryLog", "delivery_id"]

MAX_ATTEMPTS_KEPT = 50  # per delivery, re-sends included

_TAKE_OVERDUE = LuaScript(
    "shared.store",
    "webhook_take_overdue.lua",
    keys=["pending"],
    args=["request"],
    decode=["request"],
)


def delivery_id(event_id: str, endpoint_id: str) -> str:
    """The id of `event_id`'s delivery to `endpoint_id` (sent as `webhook-id`)."""
    digest = hashlib.sha256(f"{event_id}\n{endpoint_id}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


class DeliveryLog:
    """Deliveries and their attempts."""

    def __init__(self, client: redis.Redis, keys: KeySpace, *, size: int) -> None:
        self.client = client
        self.keys = keys
        self.size = size

    def create(self, event: WebhookEvent, endpoint: WebhookEndpoint) -> tuple[str, bool]:
        """The id of `event`'s delivery to `endpoint`, and whether it was made just now (one
        round trip; a delivery already there keeps its status and attempts)."""
        did = delivery_id(event.event_id, endpoint.id)
        doc = {
            "id": did,
            "endpoint_id": endpoint.id,
            "event_id": event.event_id,
            "event_type": event.kind.value,
            "created_at": event.at,
            "body": event.body(),
        }
        key = self.keys.webhook_delivery(did)
        with storage_errors(f"logging webhook delivery {did}"):
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hsetnx(key, "doc", json.dumps(doc))
                pipe.hsetnx(key, "status", DeliveryStatus.PENDING.value)
                pipe.hsetnx(key, "round", 0)
                pipe.zadd(self.keys.webhook_deliveries(), {did: event.at}, nx=True)
                pipe.zcard(self.keys.webhook_deliveries())
                created, *_, size = pipe.execute()
            if created:
                self.client.zadd(self.keys.webhook_pending(), {did: event.at}, nx=True)
            if int(size) > self.size:
                self._drop_oldest(int(size) - self.size)
        return did, bool(created)

    def _drop_oldest(self, count: int) -> None:
        index = self.keys.webhook_deliveries()
        popped: Any = self.client.zpopmin(index, count)
        dropped = [str(member) for member, _score in popped]
        if dropped:
            keys = [k for d in dropped for k in self._keys_of(d)]
            self.client.delete(*keys)
            self.client.zrem(self.keys.webhook_pending(), *dropped)

    def _keys_of(self, did: str) -> list[str]:
        return [self.keys.webhook_delivery(did), self.keys.webhook_attempts(did)]

    def get(self, did: str) -> WebhookDelivery:
        found = self._read([did])
        if not found:
            raise NotFound(f"no webhook delivery {did!r}")
        return found[0]

    def recent(
        self,
        *,
        limit: int = 50,
        endpoint_id: str | None = None,
        status: DeliveryStatus | None = None,
    ) -> list[WebhookDelivery]:
        """The newest deliveries first, optionally of one endpoint or in one status."""
        with storage_errors("reading the webhook delivery log"):
            ids = [str(i) for i in self.client.zrevrange(self.keys.webhook_deliveries(), 0, -1)]
        found: list[WebhookDelivery] = []
        for start in range(0, len(ids), 200):
            for delivery in self._read(ids[start : start + 200]):
                if (endpoint_id is None or delivery.endpoint_id == endpoint_id) and (
                    status is None or delivery.status is status
                ):
                    found.append(delivery)
            if len(found) >= limit:
                break
        return found[:limit]

    def _read(self, ids: list[str]) -> list[WebhookDelivery]:
        with storage_errors("reading webhook deliveries"), self.client.pipeline(False) as pipe:
            for did in ids:
                pipe.hgetall(self.keys.webhook_delivery(did))
                pipe.lrange(self.keys.webhook_attempts(did), 0, -1)
            replies = pipe.execute()
        found = []
        for did, raw, attempts in zip(ids, replies[::2], replies[1::2], strict=True):
            if raw and "doc" in raw:
                found.append(_parse(did, raw, attempts))
        return found

    def record_attempt(
        self,
        did: str,
        attempt: DeliveryAttempt,
        *,
        status: DeliveryStatus,
        next_attempt_at: float | None,
    ) -> None:
        """Appends an attempt and moves the delivery to `status`, in one round trip."""
        key, attempts = self.keys.webhook_delivery(did), self.keys.webhook_attempts(did)
        next_at = "" if next_attempt_at is None else repr(next_attempt_at)
        with (
            storage_errors(f"logging webhook delivery {did}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hset(key, mapping={"status": status.value, "next_at": next_at})
            pipe.hincrby(key, "round", 1)
            pipe.rpush(attempts, attempt.model_dump_json())
            pipe.ltrim(attempts, -MAX_ATTEMPTS_KEPT, -1)
            if status is DeliveryStatus.PENDING and next_attempt_at is not None:
                pipe.zadd(self.keys.webhook_pending(), {did: next_attempt_at})
            else:
                pipe.zrem(self.keys.webhook_pending(), did)
            pipe.execute()

    def resend(self, did: str, send: Callable[[str], None]) -> WebhookDelivery:
        """Makes a delivery pending again with a full set of attempts, and `send`s it."""
        self.get(did)
        key = self.keys.webhook_delivery(did)
        with (
            storage_errors(f"re-sending webhook delivery {did}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hset(
                key, mapping={"status": DeliveryStatus.PENDING.value, "round": 0, "next_at": ""}
            )
            pipe.zadd(self.keys.webhook_pending(), {did: time.time()})
            pipe.execute()
        send(did)
        return self.get(did)

    def settled(self, did: str) -> None:
        """Takes a delivery that is no longer pending out of the sweep's index."""
        with storage_errors(f"logging webhook delivery {did}"):
            self.client.zrem(self.keys.webhook_pending(), did)

    # The sweep of lost retries, and one attempt at a time

    def overdue(self, now: float, grace_s: float, *, limit: int = 100) -> list[tuple[str, float]]:
        """Pending deliveries whose next attempt was due more than `grace_s` ago: (id, due)."""
        with storage_errors("reading overdue webhook deliveries"):
            found: Any = self.client.zrangebyscore(
                self.keys.webhook_pending(),
                "-inf",
                now - grace_s,
                start=0,
                num=limit,
                withscores=True,
            )
        return [(str(did), float(due)) for did, due in found]

    def take(self, did: str, seen_due: float, until: float) -> bool:
        """Takes an overdue delivery for re-sending, once among sweepers: its due time moves
        from `seen_due` (as read) to `until`, so it is not overdue again before then."""
        request = {"id": did, "seen": repr(seen_due), "until": repr(until)}
        with storage_errors(f"re-sending webhook delivery {did}"):
            taken = _TAKE_OVERDUE(self.client, [self.keys.webhook_pending()], [json.dumps(request)])
        return bool(taken)

    def lock_attempt(self, did: str, ttl_s: float) -> bool:
        """Whether this caller may make the delivery's next attempt: one at a time, for at
        most `ttl_s` (the lock of an attempter that died runs out)."""
        key = self.keys.webhook_sending(did)
        with storage_errors(f"locking webhook delivery {did}"):
            return bool(self.client.set(key, "1", nx=True, px=max(1, int(ttl_s * 1000))))

    def unlock_attempt(self, did: str) -> None:
        with storage_errors(f"unlocking webhook delivery {did}"):
            self.client.delete(self.keys.webhook_sending(did))

    def fail(self, did: str, reason: str) -> None:
        """Ends a delivery that cannot be made (its endpoint was removed)."""
        attempt = DeliveryAttempt(at=time.time(), duration_ms=0.0, error=reason)
        self.record_attempt(did, attempt, status=DeliveryStatus.FAILED, next_attempt_at=None)


def _parse(did: str, raw: dict[str, str], attempts: list[str]) -> WebhookDelivery:
    try:
        doc = json.loads(raw["doc"])
        next_at = raw.get("next_at") or None
        return WebhookDelivery(
            **doc,
            status=DeliveryStatus(raw.get("status") or DeliveryStatus.PENDING.value),
            next_attempt_at=float(next_at) if next_at else None,
            attempts_this_round=int(raw.get("round") or 0),
            attempts=[DeliveryAttempt.model_validate_json(a) for a in attempts],
        )
    except (ValueError, ValidationError) as exc:
        raise CorruptRecord(f"webhook delivery {did} is unreadable: {exc}") from exc

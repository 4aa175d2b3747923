"""The dispatcher on a real Redis: an event becomes one delivery per endpoint that wants it,
dispatching it again sends nothing new, and a dead dispatcher's events are claimed."""

from __future__ import annotations

import redis

from shared.models.webhooks import EndpointRequest, WebhookEventKind
from shared.store.keys import KeySpace
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore, emit_webhook_event
from worker.webhook_dispatch import Dispatcher


def _dispatcher(
    client: redis.Redis, keys: KeySpace, sent: list[str], name: str, *, idle_ms: int = 30_000
) -> Dispatcher:
    log = DeliveryLog(client, keys, size=100)
    return Dispatcher(client, keys, log, sent.append, consumer=name, reclaim_idle_ms=idle_ms)


def test_events_become_deliveries_once_even_when_a_dispatcher_dies(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = EndpointStore(real_redis, keys)
    wanted = store.add(EndpointRequest(url="https://a.test/", events=["turn.failed"]), actor="t")  # type: ignore[list-item]
    store.add(EndpointRequest(url="https://b.test/", events=["turn.completed"]), actor="t")  # type: ignore[list-item]
    kind = WebhookEventKind.TURN_FAILED
    emit_webhook_event(real_redis, keys, kind, {"n": 1}, event_id="turn.failed:c:t")
    sent: list[str] = []
    first = _dispatcher(real_redis, keys, sent, "a")
    assert first.step(block_ms=10) == 1
    [did] = sent
    assert DeliveryLog(real_redis, keys, size=100).get(did).endpoint_id == wanted.id
    emit_webhook_event(real_redis, keys, kind, {"n": 1}, event_id="turn.failed:c:t")  # again
    assert first.step(block_ms=10) == 1 and sent == [did]  # the same delivery, not re-sent
    emit_webhook_event(real_redis, keys, kind, {"n": 2}, event_id="turn.failed:c:u")
    dying = real_redis.xreadgroup(  # a dispatcher that read it and died before its ack
        "dispatch", "dead", {keys.webhook_outbox(): ">"}, count=10
    )
    assert len(dying[0][1]) == 1
    second = _dispatcher(real_redis, keys, sent, "b", idle_ms=0)
    assert second.step(reclaim=True, block_ms=10) == 1
    assert len(sent) == 2 and sent[1] != did
    assert real_redis.xpending(keys.webhook_outbox(), "dispatch")["pending"] == 0

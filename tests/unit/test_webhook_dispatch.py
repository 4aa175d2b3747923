"""The dispatcher on a real Redis: an event becomes one delivery per endpoint that wants it,
dispatching it again sends nothing new, a dead dispatcher's events are claimed, and a
retry lost with a worker is swept up."""

from __future__ import annotations

import time

import redis

from shared.models.webhooks import (
    DeliveryAttempt,
    DeliveryStatus,
    EndpointRequest,
    WebhookEventKind,
)
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore, emit_webhook_event
from worker.webhooks.delivery import Deliverer
from worker.webhooks.dispatch import Dispatcher


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
        "dispatch", "dead", {keys.webhook_outbox(0): ">"}, count=10
    )
    assert len(dying[0][1]) == 1
    second = _dispatcher(real_redis, keys, sent, "b", idle_ms=0)
    assert second.step(reclaim=True, block_ms=10) == 1
    assert len(sent) == 2 and sent[1] != did
    assert real_redis.xpending(keys.webhook_outbox(0), "dispatch")["pending"] == 0


def _one_unreachable_endpoint(client: redis.Redis, keys: KeySpace) -> EndpointStore:
    """An endpoint on a port that refuses, and one event it wants, in the outbox."""
    store = EndpointStore(client, keys)
    store.add(EndpointRequest(url="http://127.0.0.1:9/", events=["turn.failed"]), actor="t")  # type: ignore[list-item]
    kind = WebhookEventKind.TURN_FAILED
    emit_webhook_event(client, keys, kind, {"n": 1}, event_id="turn.failed:c:t")
    return store


def test_a_retry_overdue_past_the_grace_is_swept_once_and_its_late_copy_is_void(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    _one_unreachable_endpoint(real_redis, keys)
    sent: list[str] = []
    retried: list[tuple[str, int]] = []
    log = DeliveryLog(real_redis, keys, size=100)
    one, two = (
        Dispatcher(
            real_redis,
            keys,
            log,
            sent.append,
            send_retry=lambda d, s: retried.append((d, s)),
            consumer=name,
            retry_grace_s=10,
        )
        for name in ("a", "b")
    )
    assert one.step(block_ms=10) == 1
    [did] = sent
    failed = DeliveryAttempt(at=time.time(), duration_ms=1.0, status_code=500)
    due = time.time() + 5  # the first attempt failed; its retry (a countdown) is then lost
    log.record_attempt(did, failed, status=DeliveryStatus.PENDING, next_attempt_at=due)
    assert one.sweep(now=due + 9) == []  # overdue, but within the grace
    assert one.sweep(now=due + 11) + two.sweep(now=due + 11) == [did]
    assert retried == [(did, 1)]  # for the second attempt: one made
    assert one.sweep(now=due + 12) + two.sweep(now=due + 12) == []
    succeeded = DeliveryAttempt(at=time.time(), duration_ms=1.0, status_code=200)
    log.record_attempt(did, succeeded, status=DeliveryStatus.SUCCEEDED, next_attempt_at=None)
    assert one.sweep(now=due + 3600) == []  # delivered: out of the sweep's index


def test_a_stale_or_concurrent_copy_of_an_attempt_sends_nothing(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = _one_unreachable_endpoint(real_redis, keys)
    sent: list[str] = []
    log = DeliveryLog(real_redis, keys, size=100)
    Dispatcher(real_redis, keys, log, sent.append, consumer="a").step(block_ms=10)
    [did] = sent
    settings = Settings(
        webhook_timeout_s=1.0, webhook_max_attempts=5, outbound_allow=("127.0.0.1",)
    )
    deliverer = Deliverer(settings, store, log)
    first = deliverer.attempt(did, 0)  # port 9 refuses: a failed attempt, a retry after it
    assert first is not None and first.made == 1
    assert deliverer.attempt(did, 0) is None  # a late copy of the first attempt's task
    assert log.lock_attempt(did, 30)  # an attempt in flight elsewhere
    assert deliverer.attempt(did, 1) is None
    log.unlock_attempt(did)
    second = deliverer.attempt(did, 1)
    assert second is not None and second.made == 2
    assert len(log.get(did).attempts) == 2
    deliverer.close()

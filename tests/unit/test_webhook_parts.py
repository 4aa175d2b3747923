"""The sans-I/O parts of webhooks and triggers, and the stores' logic on fakeredis."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
import redis

from shared.errors import InvalidInput
from shared.models.webhooks import (
    DeliveryAttempt,
    DeliveryStatus,
    EndpointRequest,
    WebhookEvent,
    WebhookEventKind,
)
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore, emit_webhook_event
from shared.webhooks.prompt_template import PromptTemplate
from shared.webhooks.signing import SignatureRefused, new_secret, sign, signed_headers, verify
from worker.webhooks.delivery import backoff_s

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def test_the_signature_is_the_standard_webhooks_hmac() -> None:
    expected = hmac.new(KEY, b"msg_1.1700000000.{}", hashlib.sha256).digest()
    assert sign(SECRET, "msg_1", 1_700_000_000, "{}") == "v1," + base64.b64encode(expected).decode()


def test_verify_accepts_a_good_signature_among_several_and_refuses_the_rest() -> None:
    headers = signed_headers(SECRET, "msg_1", 1000, "{}")
    rotated = {**headers, "webhook-signature": "v1,bm9wZQ== " + headers["webhook-signature"]}
    assert verify(SECRET, rotated, "{}", now=1000, tolerance_s=300).msg_id == "msg_1"
    for bad_headers, body, now, words in [
        (headers, '{"x":1}', 1000, "does not match"),
        (signed_headers(new_secret(), "msg_1", 1000, "{}"), "{}", 1000, "does not match"),
        (headers, "{}", 1301, "replay"),
        (headers, "{}", 699, "replay"),
        ({k: v for k, v in headers.items() if k != "webhook-id"}, "{}", 1000, "missing"),
        ({**headers, "webhook-timestamp": "1e3"}, "{}", 1000, "Unix seconds"),
    ]:
        with pytest.raises(SignatureRefused, match=words):
            verify(SECRET, bad_headers, body, now=now, tolerance_s=300)


def test_signatures_agree_with_the_standard_webhooks_reference_library() -> None:
    """Ours is kept (see docs/architecture.md), so it is checked against the reference code."""
    import time

    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    reference = Webhook(SECRET)
    now = int(time.time())
    body = '{"type":"turn.failed","data":{"text":"h\u00e9"}}'
    ours = signed_headers(SECRET, "msg_2", now, body)
    assert reference.verify(body, ours, json_parse=False) is None  # raises when they differ
    with pytest.raises(WebhookVerificationError):
        reference.verify(body, signed_headers(new_secret(), "msg_2", now, body), json_parse=False)
    theirs = reference.sign("msg_3", datetime.fromtimestamp(now, UTC), body)
    headers = {"webhook-id": "msg_3", "webhook-timestamp": str(now), "webhook-signature": theirs}
    assert verify(SECRET, headers, body, now=now, tolerance_s=300).msg_id == "msg_3"


def test_templates_copy_fields_and_refuse_everything_else() -> None:
    template = PromptTemplate.parse("{payload.a.b} / {payload.list.1} / {payload.n} {{x}}")
    payload = {"a": {"b": "text"}, "list": ["x", {"y": 1}], "n": 3}
    assert template.render(payload) == 'text / {"y": 1} / 3 {x}'
    with pytest.raises(InvalidInput, match=r"no payload\.a\.c"):
        PromptTemplate.parse("{payload.a.c}").render(payload)
    dunder = PromptTemplate.parse("{payload.a.__class__}")  # a key, never an attribute
    assert dunder.render({"a": {"__class__": "k"}}) == "k"
    with pytest.raises(InvalidInput, match=r"no payload\.a\.__class__"):
        dunder.render({"a": "text"})
    for text in ("{payload.__class__.__mro__}", "{payload[0]}", "{0}", "{}", "{x.y}", "  "):
        with pytest.raises(InvalidInput):
            PromptTemplate.parse(text).render(payload)
    for text in ("{payload.a:>10}", "{payload.a!r}", "{payload.a"):
        with pytest.raises(InvalidInput, match="template"):
            PromptTemplate.parse(text)


def test_backoff_doubles_up_to_its_cap() -> None:
    settings = Settings(webhook_backoff_s=5, webhook_backoff_max_s=30)
    assert [backoff_s(settings, n) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 30, 30]


def test_the_payload_is_standard_webhooks_shaped_with_a_chat_line() -> None:
    event = WebhookEvent(
        event_id="x", kind=WebhookEventKind.TURN_FAILED, at=0, data={"text": "hi", "n": 1}
    )
    assert event.body() == (
        '{"type":"turn.failed","timestamp":"1970-01-01T00:00:00Z",'
        '"data":{"text":"hi","n":1},"text":"hi"}'
    )


def test_events_enter_the_outbox_only_when_an_endpoint_is_registered(
    fake_redis: redis.Redis, keys: KeySpace
) -> None:
    kind = WebhookEventKind.SCHEDULE_FIRED
    assert not emit_webhook_event(fake_redis, keys, kind, {"s": 1}, event_id="a")
    assert fake_redis.xlen(keys.webhook_outbox(0)) == 0
    request = EndpointRequest(url="https://example.test/h", events=[kind])
    EndpointStore(fake_redis, keys).add(request, actor="t")
    assert emit_webhook_event(fake_redis, keys, kind, {"s": 1}, event_id="a")
    assert fake_redis.xlen(keys.webhook_outbox(0)) == 1


def test_the_delivery_log_is_bounded_and_dispatching_twice_makes_one_delivery(
    fake_redis: redis.Redis, keys: KeySpace
) -> None:
    request = EndpointRequest(url="https://example.test/h", events=["turn.completed"])  # type: ignore[list-item]
    endpoint = EndpointStore(fake_redis, keys).add(request, actor="t")
    log = DeliveryLog(fake_redis, keys, size=10)
    events = [
        WebhookEvent(event_id=f"e{i}", kind=WebhookEventKind.TURN_COMPLETED, at=i, data={})
        for i in range(12)
    ]
    ids = [log.create(event, endpoint)[0] for event in events]
    assert log.create(events[-1], endpoint) == (ids[-1], False)
    kept = log.recent(limit=100)
    assert [d.id for d in kept] == ids[:1:-1]  # newest first, the two oldest dropped
    assert not fake_redis.exists(keys.webhook_delivery(ids[0]))
    attempt = DeliveryAttempt(at=1.0, duration_ms=2.0, status_code=500)
    log.record_attempt(ids[-1], attempt, status=DeliveryStatus.FAILED, next_attempt_at=None)
    assert log.recent(status=DeliveryStatus.FAILED)[0].attempts == [attempt]
    assert log.get(ids[-1]).attempts_this_round == 1
    sent: list[str] = []
    assert log.resend(ids[-1], sent.append).status is DeliveryStatus.PENDING
    assert sent == [ids[-1]] and log.get(ids[-1]).attempts_this_round == 0

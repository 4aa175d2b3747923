"""Webhooks never reach the private network unless an operator allows it: refused at every
connection a worker makes, on the address the host resolves to then (so a name that changes
its answer cannot slip past), and when an endpoint is registered from the CLI (the API's
refusal: tests/web/test_outbound_registration.py)."""

from __future__ import annotations

import ipaddress
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from cli.main import cli
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.webhooks import DeliveryStatus, EndpointRequest, WebhookEventKind
from shared.outbound import OutboundPolicy
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore, emit_webhook_event
from tests.webhook_receiver import Receiver
from worker.webhooks.delivery import Deliverer
from worker.webhooks.dispatch import Dispatcher

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUA=="


def test_the_cli_refuses_an_internal_address(redis_server: EmbeddedRedis) -> None:
    env = {"SIGNOFF_REDIS_URL": redis_server.url, "SIGNOFF_KEY_PREFIX": f"ob{uuid.uuid4().hex[:6]}"}
    result = CliRunner().invoke(
        cli, ["webhook", "add", "http://169.254.169.254/", "--all-events"], env=env
    )
    assert result.exit_code != 0
    assert "169.254.169.254" in result.output and "SIGNOFF_OUTBOUND_ALLOW" in result.output


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET).running() as running:
        yield running


def _deliver(real_redis: redis.Redis, url: str, allowed: tuple[str, ...]) -> list[Any]:
    """Registers `url` unchecked (as if it had resolved elsewhere then), makes one attempt."""
    keys = KeySpace.of(Settings(key_prefix=f"ob{uuid.uuid4().hex[:8]}"))
    store = EndpointStore(real_redis, keys)  # no guard here: the worker's must hold alone
    store.add(EndpointRequest(url=url, events=["turn.completed"], secret=SECRET), actor="t")  # type: ignore[list-item]
    kind = WebhookEventKind.TURN_COMPLETED
    emit_webhook_event(real_redis, keys, kind, {"n": 1}, event_id="turn.completed:c:t")
    sent: list[str] = []
    log = DeliveryLog(real_redis, keys, size=100)
    Dispatcher(real_redis, keys, log, sent.append, consumer="a").step(block_ms=10)
    settings = Settings(webhook_timeout_s=2.0, webhook_max_attempts=1, outbound_allow=allowed)
    deliverer = Deliverer(settings, store, log)
    try:
        deliverer.attempt(sent[0], 0)
    finally:
        deliverer.close()
    delivery = log.get(sent[0])
    return [delivery.status, *delivery.attempts]


def test_a_worker_refuses_to_connect_to_a_loopback_endpoint(
    real_redis: redis.Redis, receiver: Receiver
) -> None:
    for url in (receiver.url, receiver.url.replace("127.0.0.1", "localhost")):
        status, attempt = _deliver(real_redis, url, ())
        assert status is DeliveryStatus.FAILED and attempt.status_code is None
        assert "127.0.0.1" in (attempt.error or "") and "SIGNOFF_OUTBOUND_ALLOW" in attempt.error
    assert receiver.arrivals == []
    status, attempt = _deliver(real_redis, receiver.url, ("127.0.0.1",))
    assert status is DeliveryStatus.SUCCEEDED and attempt.status_code == 200
    assert len(receiver.arrivals) == 1


def test_the_connection_goes_to_the_address_that_was_checked(
    real_redis: redis.Redis, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that resolves to loopback at connect time (DNS rebinding) is refused; allowed,
    the socket is opened to the address the check resolved, not resolved again."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:  # a resolver the test controls
        if host == "rebind.test":
            lookups.append(host)
            host = "127.0.0.1" if len(lookups) % 2 else "93.184.216.34"  # a public address
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    url = receiver.url.replace("127.0.0.1", "rebind.test")
    status, attempt = _deliver(real_redis, url, ())
    assert status is DeliveryStatus.FAILED and "rebind.test resolves to 127.0.0.1" in attempt.error
    lookups.clear()
    status, attempt = _deliver(real_redis, url, ("127.0.0.1/32",))
    assert status is DeliveryStatus.SUCCEEDED, attempt  # a second lookup would go elsewhere
    assert len(receiver.arrivals) == 1 and lookups == ["rebind.test"]


def test_the_policy_refuses_every_address_that_is_not_global() -> None:
    policy = OutboundPolicy(("192.168.1.0/24",))
    refused = ["127.0.0.1", "10.0.0.1", "172.16.0.1", "169.254.169.254", "100.64.0.1", "::1"]
    refused += ["fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1"]
    for raw in refused:
        assert policy.refusal("h", ipaddress.ip_address(raw)) is not None, raw
    for raw in ["192.168.1.7", "93.184.216.34", "2606:4700::1111"]:
        assert policy.refusal("h", ipaddress.ip_address(raw)) is None, raw

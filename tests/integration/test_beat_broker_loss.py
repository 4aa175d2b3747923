"""The sweep's `advance` meeting a broker that is away: beat logs it and sweeps on.

A kombu error escaping the sweep once ended `signoff beat` (Celery's beat loop lets any
exception through), and with it every later sweep: work whose worker had died then
waited for ever. The broker here is a Redis of its own, killed and started again, while
the state stays readable, which is the moment between a sweep's reads and its sends.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
import redis

from shared.errors import StorageError
from shared.local.embedded_redis import EmbeddedRedis
from shared.settings import Settings
from shared.store.keys import KeySpace
from worker.app import create_celery
from worker.beat import SweepingScheduler

# one Redis: the broker is the state Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]


@pytest.fixture
def broker() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis().start()
    yield server
    server.stop()


def queued_advances(server: EmbeddedRedis, cid: str) -> int:
    """Task messages for `cid` waiting in any list of the broker's Redis."""
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        lists = [key for key in client.keys("*") if client.type(key) == "list"]
        return sum(cid in message for key in lists for message in client.lrange(key, 0, -1))
    finally:
        client.close()


def test_a_sweep_whose_advance_finds_no_broker_is_logged_and_beat_sweeps_on(
    redis_server: EmbeddedRedis,
    real_redis: redis.Redis,
    broker: EmbeddedRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(redis_url=redis_server.url, key_prefix=f"bb{uuid.uuid4().hex[:6]}")
    keys = KeySpace.of(settings)
    app = create_celery(settings)
    app.conf.broker_url = broker.url  # state on one Redis, tasks on another
    cid = f"c-{uuid.uuid4().hex[:8]}"
    # work with no worker: active, a turn queued, no lease; every sweep sends it `advance`
    real_redis.zadd(keys.active(0), {cid: 1})
    real_redis.rpush(keys.inbox(cid), "a queued turn")
    scheduler = SweepingScheduler(app=app)
    try:
        broker.stop(kill=True)
        with pytest.raises(StorageError, match=f"sending advance for conversation {cid}"):
            app.signoff_runtime.send_advance(cid)

        with caplog.at_level(logging.WARNING, logger="worker.beat"):
            scheduler.apply_entry(scheduler.schedule["sweep"])
        failures = [r.getMessage() for r in caplog.records if r.name == "worker.beat"]
        assert len(failures) == 1, failures
        assert "sweep failed, retried in one interval" in failures[0]
        assert f"sending advance for conversation {cid}" in failures[0]

        broker.start()
        scheduler.apply_entry(scheduler.schedule["sweep"])
        assert queued_advances(broker, cid) == 1
    finally:
        scheduler.close()
        app.close()

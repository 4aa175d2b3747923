"""Shared fixtures: a real redis-server started for the session, and fakeredis for pure store logic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import fakeredis
import pytest
import redis

from shared.embedded_redis import EmbeddedRedis
from shared.keys import KeySpace
from shared.settings import Settings


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A private redis-server on a free port; a test failing to start it fails loudly."""
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture
def real_redis(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def fake_redis() -> Iterator[redis.Redis]:
    client = fakeredis.FakeRedis(decode_responses=True)
    yield client
    client.flushall()


@pytest.fixture
def keys() -> KeySpace:
    return KeySpace(prefix=f"t{uuid.uuid4().hex[:8]}")


@pytest.fixture
def settings(redis_server: EmbeddedRedis) -> Settings:
    return Settings(redis_url=redis_server.url)

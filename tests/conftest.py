"""Fixtures: a real redis-server for the session, workers, and fakeredis for pure store logic."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.settings import Settings
from shared.store.keys import KeySpace
from tests.stack import WorkerProcess


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


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace root with one file, and a secret beside it that must stay out of reach."""
    base = tmp_path_factory.mktemp("ws")
    root = base / "root"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the workspace\n")
    (base / "secret.txt").write_text("do not read\n")
    (root / "escape").symlink_to(base / "secret.txt")
    return root


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, workspace: Path) -> dict[str, str]:
    """Environment for a module's worker and client: its own key prefix on the test Redis."""
    return {
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"it{uuid.uuid4().hex[:8]}",
        "SIGNOFF_FLUSH_INTERVAL_MS": "10",
        "SIGNOFF_WORKSPACE_ROOTS": json.dumps([str(workspace)]),
    }


@pytest.fixture(scope="module")
def worker(stack_env: dict[str, str]) -> Iterator[WorkerProcess]:
    process = WorkerProcess(stack_env).start()
    yield process
    process.stop()


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as signoff:
        yield signoff

"""Fixtures: a real redis-server for the session, workers, and fakeredis for pure store logic."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from shared.client import Client
from shared.local.embedded_cluster import RedisClusterNodes
from shared.local.embedded_redis import EmbeddedRedis
from shared.settings import Settings
from shared.store.keys import KeySpace
from tests.rabbitmq import VHost
from tests.stack import WorkerProcess

# Behaviour, not timings: a loaded machine must not fail an example, or its generation, for
# being slow.
hypothesis_settings.register_profile(
    "signoff", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("signoff")


# `SIGNOFF_TEST_CLUSTER=1`: state on a three-primary Redis Cluster and Celery's broker on the
# machine's RabbitMQ (a vhost of the session's own; `SIGNOFF_TEST_CLUSTER_BROKER=redis`: a Redis
# of its own), for every test that takes the session's Redis (`make test-cluster`)
CLUSTER = os.environ.get("SIGNOFF_TEST_CLUSTER") == "1"


@contextmanager
def _cluster_broker() -> Iterator[str]:
    if os.environ.get("SIGNOFF_TEST_CLUSTER_BROKER") == "redis":
        with EmbeddedRedis() as broker:
            yield broker.url
        return
    host = VHost().create()
    try:
        yield host.url
    finally:
        host.delete()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis | RedisClusterNodes]:
    """A private redis-server on a free port; a test failing to start it fails loudly."""
    if CLUSTER:
        with RedisClusterNodes(3) as nodes, _cluster_broker() as broker_url:
            # read by every Settings() the tests build and every process they start
            os.environ.update(SIGNOFF_REDIS_CLUSTER="true", SIGNOFF_BROKER_URL=broker_url)
            yield nodes
        return
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture
def real_redis(redis_server: EmbeddedRedis | RedisClusterNodes) -> Iterator[redis.Redis]:
    if isinstance(redis_server, RedisClusterNodes):
        client: redis.Redis = redis_server.client()  # type: ignore[assignment]
    else:
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
def stack_env(
    request: pytest.FixtureRequest,
    redis_server: EmbeddedRedis,
    workspace: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, str]:
    """Environment for a module's worker and client: its own key prefix on the test Redis.

    A module sets `STACK_ENV` to its own variables (without it: a 10 ms flush window and the
    test workspace), and `EFFECT_TOOLS = True` to load `tests.effect_tools`, which logs each
    call it runs to a file of the module's own (`effects`).
    """
    env = {"SIGNOFF_REDIS_URL": redis_server.url, "SIGNOFF_KEY_PREFIX": f"it{uuid.uuid4().hex[:8]}"}
    default = {
        "SIGNOFF_FLUSH_INTERVAL_MS": "10",
        "SIGNOFF_WORKSPACE_ROOTS": json.dumps([str(workspace)]),
    }
    env |= getattr(request.module, "STACK_ENV", default)
    if getattr(request.module, "EFFECT_TOOLS", False):
        effects = tmp_path_factory.mktemp("effects") / "effects.log"
        env |= {"SIGNOFF_TOOLS_MODULE": "tests.effect_tools", "SIGNOFF_TEST_EFFECTS": str(effects)}
    return env


@pytest.fixture
def effects(stack_env: dict[str, str]) -> Path:
    """The file `tests.effect_tools` logs each call to (a module with `EFFECT_TOOLS`)."""
    return Path(stack_env["SIGNOFF_TEST_EFFECTS"])


@pytest.fixture(scope="module")
def worker(request: pytest.FixtureRequest, stack_env: dict[str, str]) -> Iterator[WorkerProcess]:
    """The module's worker; a module's `WORKER_START_S` gives it longer to start than 30 s."""
    process = WorkerProcess(stack_env).start(getattr(request.module, "WORKER_START_S", 30.0))
    yield process
    process.stop()


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as signoff:
        yield signoff


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[VHost]:
    """A vhost of the module's own on the machine's RabbitMQ (`make test` starts it), deleted
    with everything in it afterwards; no RabbitMQ fails the test, it never skips."""
    host = VHost().create()
    yield host
    host.delete()

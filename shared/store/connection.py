"""Redis connections built from settings, and the conversion of Redis errors into ours.

A pool named by a `PoolBound` holds at most the connections its setting allows and
is shared by threads (or tasks): a caller beyond the bound waits for a free
connection, in line with the others (`fair_queue.py`), up to `redis_pool_wait_s`, then
gets `PoolExhausted`, which names the setting to raise. redis-py's default pool fails at
once at 100 ("Too many connections").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.exceptions import ClusterDownError, SlotNotCoveredError, TryAgainError

from shared.errors import StorageError
from shared.settings import ENV_PREFIX, Settings, sentinel_addresses
from shared.store.fair_queue import FairLifoQueue
from shared.store.lend_check import parser_options

__all__ = [
    "ASYNC_CLIENT_POOL",
    "CLIENT_POOL",
    "WORKER_POOL",
    "PoolBound",
    "PoolExhausted",
    "ReplicaWait",
    "connect",
    "connect_async",
    "redacted_url",
    "storage_errors",
]


_NO_CONNECTION = "No connection available."  # redis-py's BlockingConnectionPool, at its timeout


@dataclass(frozen=True)
class PoolBound:
    """A bounded pool: its name in messages and the setting that sizes it."""

    name: str
    setting: Literal[
        "client_redis_connections",
        "web_redis_connections",
        "broker_connections",
        "worker_redis_connections",
    ]

    def size(self, settings: Settings) -> int:
        return int(getattr(settings, self.setting))

    def exhausted(self, settings: Settings) -> str:
        """What a caller that waited too long is told: the pool, and the setting to raise."""
        return (
            f"every connection of the {self.name} pool ({self.size(settings)}) stayed busy for "
            f"{settings.redis_pool_wait_s} s; raise {ENV_PREFIX}{self.setting.upper()} (or "
            f"{ENV_PREFIX}REDIS_POOL_WAIT_S), or use it from fewer threads or tasks at once"
        )


CLIENT_POOL = PoolBound("client", "client_redis_connections")
ASYNC_CLIENT_POOL = PoolBound("async client", "client_redis_connections")
WORKER_POOL = PoolBound("worker", "worker_redis_connections")


class PoolExhausted(redis.ConnectionError):
    """Raised when no pooled connection came free within the wait; names the setting."""


class _WaitingPool(redis.BlockingConnectionPool):
    """A blocking pool whose timeout says which pool and which setting."""

    def __init__(self, *, exhausted: str, **options: Any) -> None:
        super().__init__(**options)
        self.exhausted = exhausted

    def get_connection(self, *args: Any, **options: Any) -> Any:
        try:
            if args or options:  # redis-py's deprecated form: its own method warns
                return super().get_connection(*args, **options)
            return _LEND(self)
        except redis.ConnectionError as exc:
            if str(exc) != _NO_CONNECTION:
                raise
            raise PoolExhausted(self.exhausted) from exc


# The pool's method without redis-py's wrapper, which inspects every call's signature to warn
# of deprecated arguments: a few per cent of a worker's CPU, for calls that pass none.
_LEND = getattr(
    redis.BlockingConnectionPool.get_connection,
    "__wrapped__",
    redis.BlockingConnectionPool.get_connection,
)


class _AsyncWaitingPool(redis.asyncio.BlockingConnectionPool):
    """`_WaitingPool` for redis.asyncio: tasks of one event loop wait their turn."""

    def __init__(self, *, exhausted: str, **options: Any) -> None:
        super().__init__(**options)
        self.exhausted = exhausted

    async def get_connection(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().get_connection(*args, **options)
        except redis.ConnectionError as exc:
            if str(exc) != _NO_CONNECTION:
                raise
            raise PoolExhausted(self.exhausted) from exc


class _SentinelPool(redis.sentinel.SentinelConnectionPool, _WaitingPool):
    """`_WaitingPool` whose connections go to the primary the Sentinels name, found again
    after a failover (a connection to the old primary is dropped when it comes back)."""


class _AsyncSentinelPool(redis.asyncio.sentinel.SentinelConnectionPool, _AsyncWaitingPool):
    """`_SentinelPool` for redis.asyncio."""


def connect(settings: Settings, *, pool: PoolBound | None = None, **options: Any) -> redis.Redis:
    """A client with decoded responses and the configured timeouts; `pool` bounds its pool.
    With `SIGNOFF_REDIS_SENTINELS`, its connections follow the Sentinels' primary."""
    options = {
        "decode_responses": True,
        "socket_timeout": options.pop("socket_timeout", settings.redis_timeout_s),
        "socket_connect_timeout": settings.redis_timeout_s,
        "health_check_interval": 30,
        **parser_options(),
        **options,
    }
    if settings.redis_sentinels:
        manager = redis.sentinel.Sentinel(
            sentinel_addresses(settings.redis_sentinels), sentinel_kwargs=_sentinel_kwargs(settings)
        )
        # no bound: redis-py's own Sentinel pool, as `from_url` gives its own plain one
        waiting: dict[str, Any] = {
            "connection_pool_class": _SentinelPool,
            "queue_class": FairLifoQueue,
        }
        client: redis.Redis = manager.master_for(
            settings.redis_sentinel_master,
            **({**waiting, **_bounds(settings, pool)} if pool else {}),
            **_url_options(settings),
            **options,
        )
        return client
    if settings.redis_cluster:
        return _cluster(settings, pool, options)
    if pool is None:
        return redis.Redis.from_url(settings.redis_url, **options)
    bounded = _WaitingPool.from_url(
        settings.redis_url, queue_class=FairLifoQueue, **_bounds(settings, pool), **options
    )
    return redis.Redis.from_pool(bounded)


def _cluster(settings: Settings, pool: PoolBound | None, options: dict[str, Any]) -> redis.Redis:
    """A cluster client: it learns the nodes from the one named and follows their slots.

    A bounded pool bounds each node's connections (redis-py keeps one pool per node), and a
    call finding it empty waits for one (`BlockingConnectionPool`).
    """
    options.pop("health_check_interval", None)  # the cluster client checks its nodes itself
    bounds: dict[str, Any] = {}
    if pool is not None:
        bounds = {
            "max_connections": pool.size(settings),
            "connection_pool_class": redis.BlockingConnectionPool,
            "timeout": settings.redis_pool_wait_s,
        }
    try:  # it asks a node for the cluster's map at once
        client: Any = redis.cluster.RedisCluster.from_url(settings.redis_url, **bounds, **options)
    except redis.exceptions.RedisClusterException as exc:
        where = redacted_url(settings.redis_url)
        raise StorageError(f"cannot reach {where} (a Redis Cluster): {exc}") from None
    return cast(redis.Redis, client)  # the commands Signoff sends are the same


def redacted_url(url: str) -> str:
    """`url` with its password hidden."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


def _sentinel_kwargs(settings: Settings) -> dict[str, Any]:
    password = settings.redis_sentinel_password.get_secret_value()
    return {
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
        **({"password": password} if password else {}),
    }


def _url_options(settings: Settings) -> dict[str, Any]:
    """What SIGNOFF_REDIS_URL says besides where: the password, user and database."""
    parsed = redis.connection.parse_url(settings.redis_url)
    return {k: v for k, v in parsed.items() if k in ("username", "password", "db") and v}


def connect_async(
    settings: Settings, *, pool: PoolBound | None = None, **options: Any
) -> redis.asyncio.Redis:
    options = {
        "decode_responses": True,
        "socket_timeout": options.pop("socket_timeout", settings.redis_timeout_s),
        "socket_connect_timeout": settings.redis_timeout_s,
        **options,
    }
    if settings.redis_sentinels:
        manager = redis.asyncio.sentinel.Sentinel(
            sentinel_addresses(settings.redis_sentinels), sentinel_kwargs=_sentinel_kwargs(settings)
        )
        sentinel_pool: dict[str, Any] = {"connection_pool_class": _AsyncSentinelPool}
        client: redis.asyncio.Redis = manager.master_for(
            settings.redis_sentinel_master,
            **({**sentinel_pool, **_bounds(settings, pool)} if pool else {}),
            **_url_options(settings),
            **options,
        )
        return client
    if settings.redis_cluster:
        bound = {"max_connections": pool.size(settings)} if pool is not None else {}
        cluster: Any = redis.asyncio.cluster.RedisCluster.from_url(
            settings.redis_url, **bound, **options
        )
        return cast(redis.asyncio.Redis, cluster)
    if pool is None:
        return redis.asyncio.Redis.from_url(settings.redis_url, **options)
    bounded = _AsyncWaitingPool.from_url(settings.redis_url, **_bounds(settings, pool), **options)
    return redis.asyncio.Redis.from_pool(bounded)


def _bounds(settings: Settings, pool: PoolBound) -> dict[str, Any]:
    return {
        "max_connections": pool.size(settings),
        "timeout": settings.redis_pool_wait_s,
        "exhausted": pool.exhausted(settings),
    }


PATIENCE_WAITS = 10  # WAITs a tool call's claim makes before its leg gives up


@dataclass(frozen=True)
class ReplicaWait:
    """Redis WAIT after a write that must outlive a failover (`SIGNOFF_REDIS_WAIT_REPLICAS`):
    queued on the write's own pipeline, since WAIT counts the writes of its connection."""

    replicas: int
    timeout_ms: int

    @classmethod
    def of(cls, settings: Settings) -> ReplicaWait | None:
        if settings.redis_wait_replicas <= 0:
            return None
        return cls(settings.redis_wait_replicas, settings.redis_wait_timeout_ms)

    def queue(self, pipe: Any) -> None:
        pipe.execute_command("WAIT", self.replicas, self.timeout_ms)

    def patiently(self, client: redis.Redis) -> int:
        """WAIT again on `client`'s one connection until the replicas have its writes or
        `PATIENCE_WAITS` timeouts passed (a replica re-attaching after a failover takes
        seconds): the replicas that confirmed them."""
        acknowledged = 0
        for _ in range(PATIENCE_WAITS):
            acknowledged = int(client.execute_command("WAIT", self.replicas, self.timeout_ms))
            if acknowledged >= self.replicas:
                break
        return acknowledged

    def check(self, acknowledged: Any, what: str) -> None:
        """Raises StorageError when fewer replicas than asked confirmed the write."""
        if int(acknowledged) < self.replicas:
            raise StorageError(
                f"{what}: written on the primary, but {int(acknowledged)} of "
                f"{self.replicas} replicas confirmed it within {self.timeout_ms} ms "
                f"({ENV_PREFIX}REDIS_WAIT_REPLICAS); a failover now could lose it"
            )


@contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Turns a Redis failure into StorageError naming what we were doing."""
    try:
        yield
    except (redis.RedisError, SlotNotCoveredError) as exc:
        raise StorageError(f"{action}: {exc.__class__.__name__}: {exc}") from exc


def connection_lost(exc: StorageError) -> bool:
    """Whether a Redis failure was the connection's (a cut, a failover: worth trying again
    once Redis answers), not a refusal the same write would meet again (a script error, a
    full memory)."""
    return isinstance(exc.__cause__, _LOST)


# A cut or a timeout; on a cluster also a node failing over or out: the cluster down
# (CLUSTERDOWN, MASTERDOWN), a slot in migration (TRYAGAIN) or not served by a known node
_LOST = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)

"""Redis connections built from settings, and the conversion of Redis errors into ours."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import redis
import redis.asyncio

from shared.errors import StorageError
from shared.settings import Settings

__all__ = ["connect", "connect_async", "storage_errors", "translate_errors"]

P = ParamSpec("P")
R = TypeVar("R")


def connect(settings: Settings, **options: Any) -> redis.Redis:
    """A client with decoded responses and the configured timeouts."""
    return redis.Redis.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_timeout=options.pop("socket_timeout", settings.redis_timeout_s),
        socket_connect_timeout=settings.redis_timeout_s,
        health_check_interval=30,
        **options,
    )


def connect_async(settings: Settings, **options: Any) -> redis.asyncio.Redis:
    return redis.asyncio.Redis.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_timeout=options.pop("socket_timeout", settings.redis_timeout_s),
        socket_connect_timeout=settings.redis_timeout_s,
        **options,
    )


@contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Turns a Redis failure into StorageError naming what we were doing."""
    try:
        yield
    except redis.RedisError as exc:
        raise StorageError(f"{action}: {exc.__class__.__name__}: {exc}") from exc


def translate_errors(action: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form of `storage_errors`."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with storage_errors(action):
                return func(*args, **kwargs)

        return wrapper

    return decorate

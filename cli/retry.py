"""Riding out a Redis restart in a long-running CLI command, as the worker and beat do.

A step that fails because Redis cannot be reached (refused, timed out, still loading its
data) is tried again, after a line on stderr saying so, until `SIGNOFF_REDIS_RETRY_S`
has passed since the outage began; then the command stops with a message that says how
long it waited. Any other failure is raised at once. The steps retried must be safe to
run again (every one in `signoff batch` is).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import redis
from kombu.exceptions import OperationalError

from shared.errors import StorageError

__all__ = ["RedisRetry", "unreachable"]

T = TypeVar("T")

# redis-py's and the broker's, and the socket's own (a refused or timed-out connection)
_UNREACHABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    OperationalError,
    ConnectionError,
    TimeoutError,
)
MAX_CHAIN = 10  # causes looked through; a chain has no cycle, but nothing forbids one
FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 2.0


def unreachable(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, says Redis could not be reached (not what it said)."""
    seen: BaseException | None = exc
    for _ in range(MAX_CHAIN):
        if seen is None:
            break
        # BusyLoadingError (a Redis restarting with its AOF) is a ConnectionError too.
        if isinstance(seen, _UNREACHABLE):
            return True
        if isinstance(seen, redis.RedisError):
            return False  # Redis answered: an error in what we asked
        seen = seen.__cause__ or seen.__context__
    return False


class RedisRetry:
    """Runs steps, retrying those that fail because Redis is away, for up to `limit_s`."""

    def __init__(self, limit_s: float, say: Callable[[str], None]) -> None:
        self.limit_s = limit_s
        self.say = say

    def __call__(self, action: Callable[[], T], what: str) -> T:
        """`action()`; while Redis cannot be reached, again, until the limit has passed."""
        began: float | None = None
        pause_s = FIRST_PAUSE_S
        while True:
            try:
                result = action()
            except StorageError as exc:
                if not unreachable(exc):
                    raise
                began = self._waiting(began, exc, what)
                left_s = began + self.limit_s - time.monotonic()
                time.sleep(max(min(pause_s, left_s), 0.0))  # the last try comes at the limit
                pause_s = min(pause_s * 2, MAX_PAUSE_S)
                continue
            if began is not None:
                self.say(f"Redis is back after {time.monotonic() - began:.1f}s; {what} goes on")
            return result

    def _waiting(self, began: float | None, exc: StorageError, what: str) -> float:
        """When the outage began; raises once it has lasted longer than the limit."""
        now = time.monotonic()
        first = began is None
        began = now if began is None else began
        if now - began >= self.limit_s:
            raise StorageError(
                f"Redis still unavailable after {now - began:.0f}s of retrying "
                f"(SIGNOFF_REDIS_RETRY_S={self.limit_s:g}) while {what}: {exc}"
            ) from exc
        if first:
            self.say(
                f"Redis unavailable, retrying for up to {self.limit_s:g}s "
                f"(SIGNOFF_REDIS_RETRY_S) while {what}: {exc}"
            )
        return began

"""Provider rate limits: token buckets in Redis that every worker shares, served fairly.

One bucket counts requests, one counts tokens, per provider (or per provider and model, when
a limit names the model). Calls that find a bucket empty wait in line in Redis, by priority
class (`shared/models/priority.py`): interactive, then scheduled and triggered, then batch
items, batches taking turns; one script (`lua/rate_grant.lua`) puts a caller in line, says
whether its turn has come and takes from the buckets, with Redis's clock, so workers on
different machines agree. A bucket may go below zero when a call used more tokens than
estimated, which makes the next callers wait longer rather than overshoot. A provider that
answers 429 pauses every worker's calls to it for its Retry-After (`pause`).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable

import redis

from shared.errors import StorageError
from shared.models.priority import INTERACTIVE, Priority, PriorityClass
from shared.settings import RateLimit
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["DEFAULT_PAUSE_S", "MAX_PAUSE_S", "RateLimit", "RateLimiter"]

DEFAULT_PAUSE_S = 1.0  # a 429 without Retry-After pauses the provider this long
MAX_PAUSE_S = 300.0  # a longer Retry-After is cut to this (a turn's timeout ends it anyway)
_MAX_SLEEP_S = 1.0  # a waiter asks again at least this often (and so stays in line)
_MIN_SLEEP_S = 0.002
_STALE_MS = 5_000  # a waiter silent this long left without saying so (its process died)
_QUEUE_TTL_MS = 3_600_000
_CLASSES = tuple(cls.value for cls in PriorityClass)
_QUEUES = tuple(f"queue.{cls}" for cls in _CLASSES)  # the grant script's names of the lines

_TAKE = LuaScript(
    "shared.store",
    "rate_take.lua",
    keys=["bucket"],
    args=["capacity", "refill", "amount", "force"],
)
_GRANT = LuaScript(
    "shared.store",
    "rate_grant.lua",
    keys=["requests", "tokens", *_QUEUES, "rounds", "amounts", "seen", "pause"],
    args=["waiter", "class", "batch", "amount", "limits", "stale_ms", "ttl_ms"],
    decode=["limits"],
)


class RateLimiter:
    """Waits, in the calling thread, until the buckets allow a model call and its turn has come."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        limits: dict[str, RateLimit],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.keys = keys
        self.limits = limits
        self.sleep = sleep

    def limit_for(self, provider: str, model: str) -> RateLimit | None:
        found = self._scope(provider, model)
        return None if found is None else found[1]

    def _scope(self, provider: str, model: str) -> tuple[str, RateLimit] | None:
        """The limit over a call and the scope its buckets and line are kept under."""
        if f"{provider}:{model}" in self.limits:
            return model, self.limits[f"{provider}:{model}"]
        return None if provider not in self.limits else ("*", self.limits[provider])

    def acquire(
        self,
        provider: str,
        model: str,
        estimated_tokens: int,
        should_stop: Callable[[], bool] = lambda: False,
        *,
        priority: Priority = INTERACTIVE,
        paused_ms: int | None = None,
    ) -> float:
        """Blocks until the call may go; returns seconds waited.

        `paused_ms` is the provider's pause if the caller has just read it (the budget's
        reservation does); None reads it here.
        """
        found = self._scope(provider, model)
        if found is None:
            return self._sit_out_pause(provider, paused_ms, should_stop)
        scope, limit = found
        keys = self._grant_keys(provider, scope)
        waiter = uuid.uuid4().hex
        args = _GRANT.args_from(
            {
                "waiter": waiter,
                "class": priority.cls.value,
                "batch": priority.batch_id,
                "amount": estimated_tokens,
                "limits": json.dumps(_shapes(limit)),
                "stale_ms": _STALE_MS,
                "ttl_ms": _QUEUE_TTL_MS,
            }
        )
        granted, waited = False, 0.0
        try:
            while True:
                with storage_errors(f"waiting for the rate limit of {provider}:{scope}"):
                    wait_ms = int(_GRANT(self.client, keys, args))
                granted = wait_ms <= 0
                if granted or should_stop():
                    return waited
                waited += self._nap(wait_ms)
        finally:
            if not granted:
                self._leave(keys, waiter)

    def settle(self, provider: str, model: str, extra_tokens: int) -> None:
        """Charges (or refunds) the difference between the estimate and the real token count."""
        found = self._scope(provider, model)
        if found is None or found[1].tokens_per_minute is None or extra_tokens == 0:
            return
        scope, limit = found
        assert limit.tokens_per_minute is not None
        capacity, refill = _shape(limit.tokens_per_minute, limit.burst_s)
        key = self.keys.rate_bucket(provider, scope, "tokens")
        with storage_errors(f"settling the token bucket of {provider}:{scope}"):
            _TAKE(self.client, [key], [capacity, refill, extra_tokens, 1])

    def pause(self, provider: str, seconds: float | None) -> float:
        """Holds every worker's calls to `provider` for `seconds` (a 429's Retry-After), never
        shortening a longer pause already set; returns the pause applied."""
        pause_s = min(max(DEFAULT_PAUSE_S if seconds is None else seconds, 0.0), MAX_PAUSE_S)
        millis = int(pause_s * 1000)
        if millis <= 0:
            return 0.0
        keys = self.keys
        copies = keys.every_shard(lambda shard: keys.rate_pause_copy(provider, shard))
        with storage_errors(f"pausing calls to {provider}"):
            pipe = self.client.pipeline(transaction=False)
            for key in dict.fromkeys([keys.rate_pause(provider), *copies]):
                pipe.set(key, "429", nx=True, px=millis)
                pipe.pexpire(key, millis, gt=True)
            pipe.execute()
        return pause_s

    def paused_ms(self, provider: str) -> int:
        """How long calls to `provider` stay paused (0: not paused)."""
        with storage_errors(f"reading the pause of {provider}"):
            return max(int(self.client.pttl(self.keys.rate_pause(provider))), 0)

    def _sit_out_pause(
        self, provider: str, paused_ms: int | None, should_stop: Callable[[], bool]
    ) -> float:
        """A provider without a limit still honours a 429's pause."""
        waited = 0.0
        left = self.paused_ms(provider) if paused_ms is None else paused_ms
        while left > 0 and not should_stop():
            waited += self._nap(left)
            left = self.paused_ms(provider)
        return waited

    def _nap(self, wait_ms: int) -> float:
        pause = min(max(wait_ms / 1000, _MIN_SLEEP_S), _MAX_SLEEP_S)
        self.sleep(pause)
        return pause

    def _grant_keys(self, provider: str, scope: str) -> list[str]:
        keys = self.keys
        named = {
            "requests": keys.rate_bucket(provider, scope, "requests"),
            "tokens": keys.rate_bucket(provider, scope, "tokens"),
            "rounds": keys.rate_rounds(provider, scope),
            "amounts": keys.rate_amounts(provider, scope),
            "seen": keys.rate_seen(provider, scope),
            "pause": keys.rate_pause(provider),
        }
        for cls in _CLASSES:
            named[f"queue.{cls}"] = keys.rate_queue(provider, scope, cls)
        return _GRANT.keys_from(named)

    def _leave(self, keys: list[str], waiter: str) -> None:
        """Takes a waiter that gives up out of line (else it would hold its place until stale)."""
        named = dict(zip(_GRANT.keys, keys, strict=True))
        try:
            with storage_errors("leaving the rate limit's line"):
                pipe = self.client.pipeline(transaction=True)
                for cls in _CLASSES:
                    pipe.zrem(named[f"queue.{cls}"], waiter)
                pipe.hdel(named["amounts"], waiter)
                pipe.zrem(named["seen"], waiter)
                pipe.execute()
        except StorageError:  # the line drops a silent waiter after _STALE_MS
            return


def _shapes(limit: RateLimit) -> dict[str, tuple[float, float]]:
    """The grant script's `limits`: each bucket's capacity and refill per ms."""
    shapes = {}
    if limit.requests_per_minute is not None:
        shapes["requests"] = _shape(limit.requests_per_minute, limit.burst_s)
    if limit.tokens_per_minute is not None:
        shapes["tokens"] = _shape(limit.tokens_per_minute, limit.burst_s)
    return shapes


def _shape(per_minute: float, burst_s: float) -> tuple[float, float]:
    """Capacity (at least one) and refill per millisecond of a bucket."""
    per_ms = per_minute / 60_000
    return max(1.0, math.floor(per_ms * 1000 * burst_s)), per_ms

"""Provider rate limits: token buckets in Redis that every worker shares.

One bucket counts requests, one counts tokens, per provider and model. Taking
from a bucket is one script using Redis's clock, so workers on different
machines agree; a bucket may go below zero when a call used more tokens than
estimated, which makes the next callers wait longer rather than overshoot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import redis

from shared.settings import RateLimit
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["RateLimit", "RateLimiter"]

# KEYS: bucket   ARGV: capacity, refill per ms, amount, force ('1': take even into debt)
# -> ms to wait (0: taken)
_TAKE = LuaScript(
    """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local capacity, refill, amount = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or capacity)
local stamp = tonumber(redis.call('HGET', KEYS[1], 'stamp') or now)
tokens = math.min(capacity, tokens + (now - stamp) * refill)
local wait = 0
if ARGV[4] ~= '1' and amount > 0 and tokens < math.min(amount, capacity) then
  wait = math.ceil((math.min(amount, capacity) - tokens) / refill)
else
  tokens = tokens - amount
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', now)
redis.call('PEXPIRE', KEYS[1], 3600000)
return wait
"""
)


class RateLimiter:
    """Waits, in the calling thread, until the buckets allow a model call."""

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
        return self.limits.get(f"{provider}:{model}") or self.limits.get(provider)

    def acquire(
        self,
        provider: str,
        model: str,
        estimated_tokens: int,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> float:
        """Blocks until a request and the estimated tokens are free; returns seconds waited."""
        limit = self.limit_for(provider, model)
        if limit is None:
            return 0.0
        waited = 0.0
        for unit, per_minute, amount in (
            ("requests", limit.requests_per_minute, 1),
            ("tokens", limit.tokens_per_minute, estimated_tokens),
        ):
            if per_minute is not None:
                waited += self._take(
                    provider, model, unit, per_minute, limit.burst_s, amount, should_stop
                )
        return waited

    def settle(self, provider: str, model: str, extra_tokens: int) -> None:
        """Charges (or refunds) the difference between the estimate and the real token count."""
        limit = self.limit_for(provider, model)
        if limit is None or limit.tokens_per_minute is None or extra_tokens == 0:
            return
        capacity, refill = _shape(limit.tokens_per_minute, limit.burst_s)
        key = self.keys.rate_bucket(provider, model, "tokens")
        with storage_errors(f"settling the token bucket of {provider}:{model}"):
            _TAKE(self.client, [key], [capacity, refill, extra_tokens, 1])

    def _take(
        self,
        provider: str,
        model: str,
        unit: str,
        per_minute: float,
        burst_s: float,
        amount: int,
        should_stop: Callable[[], bool],
    ) -> float:
        capacity, refill = _shape(per_minute, burst_s)
        key = self.keys.rate_bucket(provider, model, unit)
        waited = 0.0
        while True:
            with storage_errors(f"taking from the {unit} bucket of {provider}:{model}"):
                wait_ms = int(_TAKE(self.client, [key], [capacity, refill, amount, 0]))
            if wait_ms <= 0 or should_stop():
                return waited
            pause = min(wait_ms / 1000, 1.0)
            self.sleep(pause)
            waited += pause


def _shape(per_minute: float, burst_s: float) -> tuple[float, float]:
    """Capacity (at least one) and refill per millisecond of a bucket."""
    per_ms = per_minute / 60_000
    return max(1.0, math.floor(per_ms * 1000 * burst_s)), per_ms

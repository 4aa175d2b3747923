"""The shared token bucket, on a real redis-server (its scripts read Redis's clock)."""

from __future__ import annotations

import redis

from shared.settings import RateLimit
from shared.store.keys import KeySpace
from shared.store.rate_limit import RateLimiter


def limiter(client: redis.Redis, keys: KeySpace, **limit: float) -> tuple[RateLimiter, list[float]]:
    slept: list[float] = []
    return RateLimiter(client, keys, {"p": RateLimit(**limit)}, sleep=slept.append), slept


def test_burst_is_free_then_callers_wait(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket, slept = limiter(real_redis, keys, requests_per_minute=60, burst_s=2)
    assert bucket.acquire("p", "m", 0) == 0 and bucket.acquire("p", "m", 0) == 0
    bucket.acquire("p", "m", 0)
    assert slept and 0 < slept[0] <= 1.0


def test_unlimited_providers_never_wait(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket, slept = limiter(real_redis, keys, requests_per_minute=1)
    for _ in range(5):
        assert bucket.acquire("other", "m", 10_000) == 0
    assert slept == []


def test_tokens_settled_after_the_call_make_the_next_caller_wait(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    limits = {"p": RateLimit(tokens_per_minute=60_000, burst_s=1)}  # 1000 tokens a second
    bucket = RateLimiter(real_redis, keys, limits)  # real sleeps: Redis's clock must move
    assert bucket.acquire("p", "m", 1000) == 0
    bucket.settle("p", "m", 500)  # the call used 1500, not 1000: the bucket is 500 in debt
    assert bucket.acquire("p", "m", 100) >= 0.5


def test_model_specific_limits_win(real_redis: redis.Redis, keys: KeySpace) -> None:
    limits = {"p": RateLimit(requests_per_minute=6000), "p:slow": RateLimit(requests_per_minute=1)}
    bucket = RateLimiter(real_redis, keys, limits, sleep=lambda _: None)
    assert bucket.limit_for("p", "slow") == limits["p:slow"]
    assert bucket.limit_for("p", "fast") == limits["p"]


def test_a_stop_request_ends_the_wait(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket, slept = limiter(real_redis, keys, requests_per_minute=1)
    bucket.acquire("p", "m", 0)
    assert bucket.acquire("p", "m", 0, should_stop=lambda: True) == 0
    assert slept == []

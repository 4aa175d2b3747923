"""The shared token buckets and their line, on a real redis-server (its scripts read Redis's
clock): callers wait by priority class, batches take turns, a silent waiter is dropped, a
429's pause holds every caller."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from shared.models.config import ConversationConfig
from shared.models.priority import INTERACTIVE, Priority, PriorityClass, priority_of
from shared.settings import RateLimit
from shared.store.keys import KeySpace
from shared.store.rate_limit import MAX_PAUSE_S, RateLimiter

SLOT_S = 0.1  # 600 requests a minute, one at a time


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


def test_a_provider_limit_is_shared_by_its_models(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket = RateLimiter(real_redis, keys, {"p": RateLimit(requests_per_minute=60)})
    assert bucket.acquire("p", "a", 0) == 0
    assert bucket.acquire("p", "b", 0, should_stop=lambda: True) == 0
    assert real_redis.zcard(keys.rate_queue("p", "*", "interactive")) == 0  # it left the line
    started = time.monotonic()
    bucket.acquire("p", "b", 0)  # one request a second for the provider, whatever the model
    assert time.monotonic() - started > 0.5


def test_a_stop_request_ends_the_wait(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket, slept = limiter(real_redis, keys, requests_per_minute=1)
    bucket.acquire("p", "m", 0)
    assert bucket.acquire("p", "m", 0, should_stop=lambda: True) == 0
    assert slept == []


class Line:
    """Callers on threads, each acquiring once; `granted` is the order their turns came."""

    def __init__(self, bucket: RateLimiter, client: redis.Redis, keys: KeySpace) -> None:
        self.bucket, self.client, self.keys = bucket, client, keys
        self.granted: list[str] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def join_line(self, label: str, priority: Priority, *, tokens: int = 0) -> None:
        before = self.waiting()

        def wait() -> None:
            self.bucket.acquire("p", "m", tokens, priority=priority)
            with self._lock:
                self.granted.append(label)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        self.threads.append(thread)
        deadline = time.monotonic() + 30  # a bound on a loaded machine, not a measure
        while self.waiting() <= before and label not in self.granted:
            assert time.monotonic() < deadline, f"{label} never joined the line"
            time.sleep(0.002)

    def waiting(self) -> int:
        return sum(
            self.client.zcard(self.keys.rate_queue("p", "*", cls.value)) for cls in PriorityClass
        )

    def finish(self) -> list[str]:
        for thread in self.threads:
            thread.join(timeout=20)
        return self.granted


def _tight(client: redis.Redis, keys: KeySpace) -> RateLimiter:
    """One request at a time, 10 a second, and the bucket already spent."""
    bucket = RateLimiter(client, keys, {"p": RateLimit(requests_per_minute=600, burst_s=0.1)})
    bucket.acquire("p", "m", 0)
    return bucket


def test_interactive_calls_go_first_then_scheduled_then_batch(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    line = Line(_tight(real_redis, keys), real_redis, keys)
    for n in range(4):
        line.join_line(f"batch{n}", Priority(PriorityClass.BATCH, "b1"))
    line.join_line("scheduled", Priority(PriorityClass.SCHEDULED))
    line.join_line("chat", INTERACTIVE)
    order = line.finish()
    assert len(order) == 6
    # whoever was at the bucket's edge when they came may have gone first; no more than that
    assert order.index("chat") <= 1 and order.index("scheduled") <= 2, order
    assert order.index("chat") < order.index("scheduled")


def test_batches_take_turns_whoever_came_first(real_redis: redis.Redis, keys: KeySpace) -> None:
    line = Line(_tight(real_redis, keys), real_redis, keys)
    for n in range(6):
        line.join_line(f"a{n}", Priority(PriorityClass.BATCH, "a"))
    for n in range(6):
        line.join_line(f"b{n}", Priority(PriorityClass.BATCH, "b"))
    order = [label[0] for label in line.finish()]
    assert len(order) == 12
    # b came after a's six, but from its first waiter on the two alternate
    assert order.index("b") <= 2, order
    leads = [order[:k].count("a") - order[:k].count("b") for k in range(1, 13)]
    assert max(abs(lead) for lead in leads) <= 2, order


def test_a_silent_waiter_is_dropped_and_the_line_moves_on(
    real_redis: redis.Redis, keys: KeySpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.store import rate_limit

    monkeypatch.setattr(rate_limit, "_STALE_MS", 300)
    bucket = _tight(real_redis, keys)
    # a waiter whose process stops after joining (frozen, or killed): it never asks again
    frozen = RateLimiter(real_redis, keys, bucket.limits, sleep=lambda _: threading.Event().wait())
    threading.Thread(target=frozen.acquire, args=("p", "m", 0), daemon=True).start()
    deadline = time.monotonic() + 30
    while real_redis.zcard(keys.rate_queue("p", "*", "interactive")) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    started = time.monotonic()
    bucket.acquire("p", "m", 0, priority=Priority(PriorityClass.BATCH, "b"))
    assert time.monotonic() - started < 10  # not held behind the dead one for good
    assert real_redis.zcard(keys.rate_queue("p", "*", "interactive")) == 0


def test_a_pause_holds_every_caller_limited_or_not(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket = RateLimiter(real_redis, keys, {"p": RateLimit(requests_per_minute=6000)})
    assert bucket.pause("p", 0.4) == 0.4
    assert bucket.pause("p", 0.1) == 0.1 and bucket.paused_ms("p") > 250  # never shortened
    for model in ("m", "other"):
        bucket.pause("p", 0.3)
        started = time.monotonic()
        bucket.acquire("p", model, 0)
        assert time.monotonic() - started > 0.2
    bucket.pause("q", 0.3)  # a provider without any limit
    started = time.monotonic()
    assert bucket.acquire("q", "m", 0) > 0.2 and time.monotonic() - started > 0.2
    assert bucket.acquire("q", "m", 0) == 0 and bucket.paused_ms("p") == 0


def test_a_pause_is_cut_to_its_bound(real_redis: redis.Redis, keys: KeySpace) -> None:
    bucket = RateLimiter(real_redis, keys, {})
    assert bucket.pause("p", 86_400) == MAX_PAUSE_S
    assert bucket.pause("q", None) == 1.0  # a 429 without Retry-After
    assert bucket.pause("r", 0) == 0 and bucket.paused_ms("r") == 0


@pytest.mark.parametrize(
    ("batch_id", "owner", "cls"),
    [
        ("b1", "alice", PriorityClass.BATCH),
        (None, "schedule:nightly", PriorityClass.SCHEDULED),
        (None, "trigger:github", PriorityClass.SCHEDULED),
        (None, "alice", PriorityClass.INTERACTIVE),
        (None, None, PriorityClass.INTERACTIVE),
        (None, "batch:b1", PriorityClass.INTERACTIVE),  # only the config's batch id counts
    ],
)
def test_the_class_follows_from_the_conversation(
    batch_id: str | None, owner: str | None, cls: PriorityClass
) -> None:
    priority = priority_of(ConversationConfig(batch_id=batch_id), owner)
    assert priority.cls is cls and priority.batch_id == (batch_id or "")

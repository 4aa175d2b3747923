"""The CLI's Redis retry and the settings it and Celery's redelivery read, on real sockets."""

from __future__ import annotations

import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cli.retry import RedisRetry, unreachable
from shared.client.tasks import TaskSender
from shared.errors import SettingsError, StorageError
from shared.local.embedded_redis import free_port
from shared.settings import Settings, load_settings
from shared.store.connection import connection_lost, storage_errors


def refused() -> StorageError:
    """The error a command gets from a port where no Redis listens."""
    client = redis.Redis(host="127.0.0.1", port=free_port(), retry=Retry(NoBackoff(), 0))
    try:
        with storage_errors("reading batch b"):
            client.ping()
    except StorageError as exc:
        return exc
    raise AssertionError("something answered on a free port")


def test_unreachable_means_not_reached_not_refused_by_redis(real_redis: redis.Redis) -> None:
    assert unreachable(refused())
    real_redis.set("plain", "x")
    with pytest.raises(StorageError) as answered, storage_errors("reading a list"):
        real_redis.lrange("plain", 0, -1)  # WRONGTYPE: Redis answered
    assert not unreachable(answered.value)


def test_a_broker_that_cannot_take_a_task_is_a_storage_error() -> None:
    sender = TaskSender(Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    try:
        with pytest.raises(StorageError, match="sending advance for conversation c1") as failed:
            sender.advance("c1")
    finally:
        sender.close()
    assert unreachable(failed.value)


def test_retry_says_so_once_and_gives_up_at_its_limit_naming_it() -> None:
    said: list[str] = []
    attempts: list[float] = []

    def always_refused() -> None:
        attempts.append(time.monotonic())
        raise refused()

    started = time.monotonic()
    with pytest.raises(StorageError, match=r"after 1s of retrying \(SIGNOFF_REDIS_RETRY_S=1\)"):
        RedisRetry(1.0, said.append)(always_refused, "following batch b")
    assert 1.0 <= time.monotonic() - started < 2.5
    assert len(said) == 1 and said[0].startswith("Redis unavailable, retrying for up to 1s")
    assert len(attempts) >= 3  # backing off, not spinning: 0.25 s, 0.5 s, then the limit


def test_retry_goes_on_when_redis_answers_again_and_says_so() -> None:
    said: list[str] = []
    outcomes = [refused(), refused(), "counts"]

    def flaky() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, StorageError):
            raise outcome
        return outcome

    assert RedisRetry(30.0, said.append)(flaky, "following batch b") == "counts"
    assert len(said) == 2 and said[1].startswith("Redis is back after")


def test_an_error_redis_answered_is_not_retried(real_redis: redis.Redis) -> None:
    said: list[str] = []
    real_redis.set("plain", "x")

    def wrong_type() -> None:
        with storage_errors("reading a list"):
            real_redis.lrange("plain", 0, -1)

    with pytest.raises(StorageError, match="WRONGTYPE"):
        RedisRetry(30.0, said.append)(wrong_type, "reading")
    assert said == []


def test_no_retrying_at_zero() -> None:
    said: list[str] = []

    def always_refused() -> None:
        raise refused()

    with pytest.raises(StorageError, match="after 0s"):
        RedisRetry(0.0, said.append)(always_refused, "reading")
    assert said == []


def test_the_visibility_timeout_stays_well_above_a_leg(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings()
    assert defaults.visibility_timeout_s >= 2 * defaults.leg_time_slice_s
    assert defaults.visibility_timeout_s < 3_600  # redelivery is harmless: no need to wait an hour
    monkeypatch.setenv("SIGNOFF_VISIBILITY_TIMEOUT_S", "400")
    with pytest.raises(
        SettingsError,
        match=r"^invalid settings: SIGNOFF_LEG_TIME_SLICE_S: must be at most half of "
        r"SIGNOFF_VISIBILITY_TIMEOUT_S \(400 s\)",
    ):
        load_settings()
    monkeypatch.setenv("SIGNOFF_LEG_TIME_SLICE_S", "200")
    assert load_settings().visibility_timeout_s == 400
    monkeypatch.setenv("SIGNOFF_REDIS_RETRY_S", "5")
    assert load_settings().redis_retry_s == 5.0


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"),
        redis.exceptions.MasterDownError("MASTERDOWN Link with MASTER is down"),
        redis.exceptions.TryAgainError("TRYAGAIN Multiple keys request during rehashing"),
        redis.exceptions.SlotNotCoveredError("Slot 42 not covered by the cluster"),
    ],
)
def test_a_cluster_failing_over_is_a_connection_lost_not_a_refusal(error: Exception) -> None:
    """A worker's leg meeting these is sent again (the cluster answers after its failover);
    a script's own error is not."""
    with pytest.raises(StorageError) as caught, storage_errors("claiming conversation c"):
        raise error
    assert connection_lost(caught.value)
    assert type(error).__name__ in str(caught.value)
    with pytest.raises(StorageError) as refusal, storage_errors("claiming conversation c"):
        raise redis.exceptions.ResponseError("ERR Error running script")
    assert not connection_lost(refusal.value)

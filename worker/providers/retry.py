"""Retries a model call with exponential backoff, but only before its first event.

A provider's attempt is a generator of events. When it fails with a retryable
`ProviderError` (5xx, no answer at all) before yielding anything, the call
is made again after a wait; once an event has reached the caller a failure is
raised as it is, so a half-streamed answer is never replayed. A server's
``Retry-After`` (or ``retry-after-ms``) is honoured up to a cap. A 429 is raised at once as
`RateLimited`, carrying the server's wait, for the turn to handle (`failure`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from shared.errors import ProviderError, RateLimited

__all__ = ["RetryPolicy", "TransientFailure", "failure", "retry_after_s", "stream_with_retries"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait; tests pass tiny delays."""

    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 30.0

    def delay_s(self, retry: int, retry_after: float | None) -> float:
        """The wait before retry number `retry` (from 0): the server's ask, capped, else backoff."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        ceiling = min(self.backoff_s * 2**retry, self.max_backoff_s)
        # Jitter spreads the retries of many workers hit by the same rate limit.
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 - not cryptographic


class TransientFailure(Exception):
    """Raised inside an attempt for a retryable failure; holds the error to report at the end."""

    def __init__(self, error: ProviderError, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


def failure(error: ProviderError, retry_after: float | None = None) -> Exception:
    """What an attempt raises: retryable errors wrapped for the retry loop, others as they are.

    A 429 is not retried here: it goes to the turn with the server's Retry-After, which
    pauses the provider for every worker and calls again when the pause is over
    (shared/store/rate_limit.py), rather than each worker finding the limit on its own.
    """
    if isinstance(error, RateLimited):
        return RateLimited(error.message, error.http_code, retry_after)
    return TransientFailure(error, retry_after) if error.retryable else error


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait in seconds, from ``retry-after-ms`` or ``Retry-After``."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    return seconds if seconds is not None else _seconds_until(value)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _seconds_until(http_date: str) -> float | None:
    try:
        moment = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max((moment - datetime.now(UTC)).total_seconds(), 0.0)


def stream_with_retries(
    attempt: Callable[[], Generator[T, None, None]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Generator[T, None, None]:
    """Yields the events of `attempt`, calling it again on a transient failure before any event."""
    retry = 0
    while True:
        started = False
        events = attempt()
        try:
            for event in events:
                started = True
                yield event
            return
        except TransientFailure as exc:
            if started or retry >= policy.max_retries:
                raise exc.error from exc.__cause__
            delay = policy.delay_s(retry, exc.retry_after)
            log.warning("model call failed (%s); retry %d in %.2fs", exc.error, retry + 1, delay)
            sleep(delay)
            retry += 1
        finally:
            events.close()

"""A leg's model calls under its budgets and its provider's rate limit, answers and compactions
alike: reserve the worst case, wait for a turn in the provider's line, call, settle.

A 429 pauses the provider for every worker (`RateLimiter.pause`) and the call waits its turn
again, up to `RATE_LIMIT_RETRIES` times and while the turn's timeout leaves room for the pause.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from shared.errors import ProviderError, RateLimited
from shared.models.priority import priority_of
from shared.models.steps import UsageMetadata
from shared.store.rate_limit import DEFAULT_PAUSE_S, RateLimiter
from worker.budget import Reservation, reserve, settlement
from worker.context import estimate_tokens
from worker.leg import Leg
from worker.providers.base import ModelRequest, Provider, TextDelta, UsageEvent
from worker.spend import call_usage
from worker.streaming import ModelOutput

__all__ = ["RATE_LIMIT_RETRIES", "Meter"]

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 10  # a model call answered 429 is made again at most this often

T = TypeVar("T")


class Meter:
    """Runs one leg's model calls within its budgets and its provider's rate limit."""

    def __init__(self, leg: Leg, limiter: RateLimiter | None) -> None:
        self.leg = leg
        self.limiter = limiter

    def reserve(self, request: ModelRequest) -> Reservation:
        """The call's worst case against every budget over it; raises BudgetRefused."""
        return reserve(self.leg, request)

    def limited(
        self, estimate: int, paused_ms: int | None, attempt: Callable[[], T]
    ) -> T | ProviderError:
        """`attempt` once the call's turn has come, again after each 429's pause; the last
        error when it may not go again."""
        retries = 0
        while True:
            self._wait_for_slot(estimate, paused_ms)
            try:
                return attempt()
            except ProviderError as exc:
                if not self._pause_for(exc, retries):
                    return exc
            retries, paused_ms = retries + 1, None

    def settle(self, reservation: Reservation, usage: UsageMetadata | None, estimate: int) -> None:
        """The next flush releases the reservation and spends what the call used; the token
        bucket is corrected by the real count."""
        self.leg.writer.settle(settlement(reservation, usage), reservation.spend_keys)
        if self.limiter is not None and usage is not None:
            config = self.leg.config
            self.limiter.settle(config.provider, config.model, usage.total_token_count - estimate)

    def collect(self, provider: Provider, request: ModelRequest) -> ModelOutput:
        """A whole answer, not streamed to anyone (a compaction's summary), with its usage and
        cost; raises BudgetRefused, or ProviderError when the call failed."""
        reservation = self.reserve(request)
        estimate = estimate_tokens(request.messages)
        got = self.limited(estimate, reservation.paused_ms, lambda: _collect(provider, request))
        if isinstance(got, ProviderError):
            self.settle(reservation, None, estimate)
            raise got
        got.usage = call_usage(reservation.price, request, got)
        self.settle(reservation, got.usage, estimate)
        return got

    def _wait_for_slot(self, estimate: int, paused_ms: int | None) -> None:
        if self.limiter is None:
            return
        config = self.leg.config
        self.limiter.acquire(
            config.provider,
            config.model,
            estimate,
            self.leg.cancel_requested,
            priority=priority_of(config, self.leg.flags.get("owner")),
            paused_ms=paused_ms,
        )

    def _pause_for(self, error: ProviderError, retries: int) -> bool:
        """Whether to call again after `error`: a 429, with retries and turn time left for its
        pause, which is then set for every worker."""
        if not isinstance(error, RateLimited) or self.limiter is None:
            return False
        wait = DEFAULT_PAUSE_S if error.retry_after_s is None else error.retry_after_s
        left = self.leg.config.limits.timeout_s - self.leg.elapsed_s()
        if retries >= RATE_LIMIT_RETRIES or wait >= left:
            return False
        paused = self.limiter.pause(self.leg.config.provider, wait)
        log.info("model call answered 429: %s paused %.2fs, calling again", error, paused)
        return True


def _collect(provider: Provider, request: ModelRequest) -> ModelOutput:
    text: list[str] = []
    output = ModelOutput()
    for event in provider.stream(request):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, UsageEvent):
            output.usage = event.usage
    output.content = "".join(text).strip()
    return output

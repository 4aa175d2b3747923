"""Sending one webhook delivery: sign it, POST it with a timeout, log the attempt, and say
when to try again (exponential backoff, a bounded number of attempts).

Each attempt is signed anew (its `webhook-timestamp` is now, so receivers that refuse
old timestamps accept a retry) over the same body and the same `webhook-id`. Redirects
are not followed and every request has `SIGNOFF_WEBHOOK_TIMEOUT_S`: operators choose
the URLs, and a slow endpoint holds a worker thread for that long at most. Connections go
through `shared.outbound`: an endpoint on a loopback, private, link-local or metadata
address is refused (an attempt whose error says so) unless SIGNOFF_OUTBOUND_ALLOW allows it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import httpx

from shared.errors import NotFound
from shared.metrics.series import WEBHOOK_DELIVERIES
from shared.models.webhooks import DeliveryAttempt, DeliveryStatus, WebhookDelivery
from shared.outbound import OutboundPolicy, guarded_client
from shared.settings import Settings
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from shared.webhooks.signing import signed_headers

__all__ = ["Deliverer", "Retry", "backoff_s"]

log = logging.getLogger(__name__)

USER_AGENT = "Signoff-Webhooks/1"
_ERROR_CHARS = 300
_LOCK_SPARE_S = 5.0  # an attempt's lock outlasts its request timeout by this much


def backoff_s(settings: Settings, attempts_made: int) -> float:
    """The wait after `attempts_made` failed attempts: doubling from the setting, capped."""
    return float(
        min(
            settings.webhook_backoff_s * 2 ** max(attempts_made - 1, 0),
            settings.webhook_backoff_max_s,
        )
    )


@dataclass(frozen=True)
class Retry:
    """The next attempt of a delivery: after `wait_s`, with `made` attempts made before it."""

    wait_s: float
    made: int


class Deliverer:
    """Makes attempts of deliveries with one HTTP client (its connections are reused)."""

    def __init__(
        self, settings: Settings, endpoints: EndpointStore, deliveries: DeliveryLog
    ) -> None:
        self.settings = settings
        self.endpoints = endpoints
        self.deliveries = deliveries
        self.http = guarded_client(
            OutboundPolicy(settings.outbound_allow),
            timeout=settings.webhook_timeout_s,
            follow_redirects=False,
            headers={"user-agent": USER_AGENT},
        )

    def attempt(self, did: str, seen: int | None = None) -> Retry | None:
        """One attempt of a pending delivery; returns when to make the next, or None.

        `seen` is how many attempts (this round) the task's sender saw made: a copy of a
        task whose attempt another copy already made (the sweep re-sent a retry lost with a
        worker, and then the lost one turned up after all), or one that finds another
        attempt in flight, does nothing, so each attempt is sent and counted once."""
        if not self.deliveries.lock_attempt(did, self.settings.webhook_timeout_s + _LOCK_SPARE_S):
            return None
        try:
            return self._attempt(did, seen)
        finally:
            self.deliveries.unlock_attempt(did)

    def _attempt(self, did: str, seen: int | None) -> Retry | None:
        delivery = self.deliveries.get(did)
        if delivery.status is not DeliveryStatus.PENDING:
            self.deliveries.settled(did)
            return None  # already delivered, or given up and not re-sent since
        if seen is not None and seen != delivery.attempts_this_round:
            return None  # a stale copy: the attempt it was for is made
        try:
            endpoint = self.endpoints.get(delivery.endpoint_id)
        except NotFound:
            self.deliveries.fail(did, "the endpoint was removed")
            return None
        result = self._post(endpoint.url, endpoint.secret, delivery)
        made = delivery.attempts_this_round + 1
        if result.ok:
            status, wait = DeliveryStatus.SUCCEEDED, None
        elif made >= self.settings.webhook_max_attempts:
            status, wait = DeliveryStatus.FAILED, None
        else:
            status, wait = DeliveryStatus.PENDING, backoff_s(self.settings, made)
        next_at = None if wait is None else time.time() + wait
        self.deliveries.record_attempt(did, result, status=status, next_attempt_at=next_at)
        WEBHOOK_DELIVERIES.labels(_OUTCOMES[status]).inc()
        log.info(
            "webhook %s to endpoint %s: attempt %d, %s",
            did,
            endpoint.id,
            made,
            result.status_code if result.status_code is not None else result.error,
        )
        return None if wait is None else Retry(wait_s=wait, made=made)

    def _post(self, url: str, secret: str, delivery: WebhookDelivery) -> DeliveryAttempt:
        started = time.time()
        clock = time.perf_counter()
        headers = signed_headers(secret, delivery.id, int(started), delivery.body)
        try:
            response = self.http.post(url, content=delivery.body.encode(), headers=headers)
        except httpx.HTTPError as exc:
            return DeliveryAttempt(
                at=started,
                duration_ms=_ms(clock),
                error=f"{exc.__class__.__name__}: {exc}"[:_ERROR_CHARS],
            )
        return DeliveryAttempt(at=started, duration_ms=_ms(clock), status_code=response.status_code)

    def close(self) -> None:
        self.http.close()


# how an attempt is counted, by the status it leaves its delivery in
_OUTCOMES = {
    DeliveryStatus.SUCCEEDED: "succeeded",
    DeliveryStatus.FAILED: "failed",
    DeliveryStatus.PENDING: "retrying",
}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)

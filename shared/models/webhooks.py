"""Outbound webhooks on the wire: events, endpoints, deliveries and their attempts.

An operator registers an endpoint (a URL, a `whsec_` secret, the events it wants);
each event becomes one delivery per endpoint that wants it, sent and retried by the
worker. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import time
from enum import Enum
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, Field

from shared.models.patterns import SPACE

__all__ = [
    "IPV6_PATTERN",
    "DeliveryAttempt",
    "DeliveryStatus",
    "EndpointRequest",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookEventKind",
    "http_url",
]

MAX_URL_CHARS = 2_000
MAX_DESCRIPTION_CHARS = 200


class WebhookEventKind(str, Enum):
    """What an endpoint can subscribe to (the `type` of a delivered payload)."""

    APPROVAL_NEEDED = "approval.needed"
    APPROVAL_RESOLVED = "approval.resolved"
    APPROVAL_EXPIRED = "approval.expired"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    BATCH_FINISHED = "batch.finished"
    SCHEDULE_FIRED = "schedule.fired"


class DeliveryStatus(str, Enum):
    PENDING = "pending"  # queued, or waiting for its next attempt
    SUCCEEDED = "succeeded"  # the endpoint answered 2xx
    FAILED = "failed"  # every attempt failed (or the endpoint is gone); can be re-sent


# An absolute http(s) URL: operators choose where deliveries go, but never a file:, gopher:
# or other scheme the HTTP client might be talked into. In the schema, so the API says it.
# The authority: optional user info, a host (a name, or an IPv6 address in brackets, as RFC 3986
# writes one), and a port of 0-65535, so that a URL the pattern takes is one a client can parse
# (the validator still asks urlsplit, which reads the same addresses).
_USER = r"(?:[A-Za-z0-9\-._~%!$&'()*+,;=:]*@)?"
_H16 = r"[0-9A-Fa-f]{1,4}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = rf"(?:{_H16}:{_H16}|{_OCTET}(?:\.{_OCTET}){{3}})"
# RFC 3986's IPv6address: eight groups, "::" standing for one or more of them, the last two
# possibly an IPv4 address. `http://[:]` or `http://[1:2]` is no address.
_IPV6_FORMS = (
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
)
IPV6_PATTERN = f"(?:{'|'.join(_IPV6_FORMS)})"
_HOST = rf"(?:\[{IPV6_PATTERN}\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)"
_PORT = r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{0,4}))?"
HTTP_URL_PATTERN = rf"^https?://{_USER}{_HOST}{_PORT}(?:[/?#][^{SPACE}]*)?$"


def http_url(value: str) -> str:
    """`value` if it is an absolute http(s) URL, else ValueError saying so."""
    if not re.match(HTTP_URL_PATTERN, value):
        raise ValueError("must be an absolute http:// or https:// URL without spaces")
    try:
        urlsplit(value).port  # noqa: B018  # what the pattern cannot see, urlsplit does
    except ValueError as exc:
        raise ValueError(f"is not a URL a client can read: {exc}") from None
    return value


HttpUrl = Annotated[
    str,
    AfterValidator(http_url),
    Field(
        min_length=1,
        max_length=MAX_URL_CHARS,
        json_schema_extra={"pattern": HTTP_URL_PATTERN},
        description="An absolute http:// or https:// URL.",
    ),
]


class WebhookEvent(BaseModel):
    """Something that happened, as the outbox carries it to the dispatcher.

    `event_id` is derived from what happened (`turn.completed:<cid>:<turn>`), so the
    same event emitted twice (a retried leg) makes the same deliveries, not new ones.
    """

    event_id: str
    kind: WebhookEventKind
    at: float = Field(default_factory=time.time)
    data: dict[str, Any]

    def body(self) -> str:
        """The JSON every endpoint receives: Standard Webhooks' `type`, `timestamp`, `data`,
        and a `text` line that chat tools' incoming webhooks show as it is."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at))
        payload = {"type": self.kind.value, "timestamp": stamp, "data": self.data}
        text = self.data.get("text")
        if isinstance(text, str):
            payload["text"] = text
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class EndpointRequest(BaseModel):
    """An operator's registration of an endpoint."""

    model_config = {"extra": "forbid"}

    url: HttpUrl
    events: list[WebhookEventKind] = Field(
        min_length=1, description="The events to deliver; at least one."
    )
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)
    secret: str | None = Field(
        None,
        pattern=r"^whsec_[A-Za-z0-9+/]{16,}={0,2}$",
        description="A `whsec_<base64>` signing secret; made for you when absent.",
    )


class WebhookEndpoint(BaseModel):
    """A registered endpoint; its secret is shown once, when it is made."""

    id: str
    url: str
    events: list[WebhookEventKind]
    description: str = ""
    secret: str = Field(exclude=True, repr=False)
    created_at: float
    created_by: str

    def wants(self, kind: WebhookEventKind) -> bool:
        return kind in self.events


class DeliveryAttempt(BaseModel):
    """One try: when, how long, and the status code or the error (never the secret)."""

    at: float
    duration_ms: float
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class WebhookDelivery(BaseModel):
    """One event for one endpoint, with what happened to each attempt."""

    id: str = Field(description="Sent as `webhook-id`: the same on every attempt.")
    endpoint_id: str
    event_id: str
    event_type: WebhookEventKind
    created_at: float
    body: str = Field(description="The signed JSON payload, exactly as sent.")
    status: DeliveryStatus = DeliveryStatus.PENDING
    next_attempt_at: float | None = None
    attempts_this_round: int = Field(0, description="Attempts since it was (re-)sent.")
    attempts: list[DeliveryAttempt] = []

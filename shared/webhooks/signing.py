"""The Standard Webhooks signature, both ways: sign what we send, verify what triggers get.

Headers `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`
(`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, space-separated when a
secret is being rotated). The secret is `whsec_<base64 key>`. Sans I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "SignatureRefused",
    "Verified",
    "new_secret",
    "sign",
    "signed_headers",
    "verify",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
_VERSION = "v1"


class SignatureRefused(Exception):
    """Raised when a request's signature headers are missing, malformed, stale or wrong."""


def new_secret() -> str:
    """A fresh `whsec_` secret of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a webhook secret is whsec_ followed by base64") from exc


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """The `webhook-signature` value of one message."""
    content = f"{msg_id}.{timestamp}.{body}".encode()
    digest = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return f"{_VERSION},{base64.b64encode(digest).decode()}"


def signed_headers(secret: str, msg_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The three headers of one signed delivery (plus its content type)."""
    return {
        ID_HEADER: msg_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, msg_id, timestamp, body),
        "content-type": "application/json",
    }


@dataclass(frozen=True)
class Verified:
    """A request whose signature held: its message id and timestamp."""

    msg_id: str
    timestamp: int


def verify(
    secret: str, headers: Mapping[str, str], body: str, *, now: float, tolerance_s: float
) -> Verified:
    """Checks the headers against `body`; raises SignatureRefused saying what is wrong."""
    msg_id = headers.get(ID_HEADER, "")
    stamp = headers.get(TIMESTAMP_HEADER, "")
    given = headers.get(SIGNATURE_HEADER, "")
    if not msg_id or not stamp or not given:
        raise SignatureRefused(f"missing {ID_HEADER}, {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise SignatureRefused(f"{TIMESTAMP_HEADER} must be Unix seconds")
    timestamp = int(stamp)
    if abs(now - timestamp) > tolerance_s:
        raise SignatureRefused(
            f"{TIMESTAMP_HEADER} is more than {tolerance_s:g} s away from now: refused as a replay"
        )
    expected = sign(secret, msg_id, timestamp, body).encode()
    for candidate in given.split(" "):
        if hmac.compare_digest(candidate.encode(), expected):
            return Verified(msg_id, timestamp)
    raise SignatureRefused("the signature does not match")

"""Signed single-use approval links: one request, one approver, an expiry, used once.

A link carries its claims (notification, approver, expiry, a random nonce) and an HMAC-SHA256
of them under the secret key, so nothing is stored until it is used; using it sets its nonce
in Redis with SET NX, so a second use (or a race of two) finds it taken. Opening a link
(a GET) never resolves: mail scanners and chat unfurlers fetch links; the confirmation page
posts the decision. Only the approver it names, signed in, may use it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import redis
from pydantic import BaseModel, ValidationError

from shared.errors import Conflict, Forbidden, InvalidInput, NotConfigured, NotFound
from shared.settings import Settings
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.webhooks.payloads import public_base

__all__ = ["MAX_LINK_LIFETIME_S", "ApprovalLinks", "LinkClaims", "LinkExpired"]

MAX_LINK_LIFETIME_S = 7 * 86_400
_PATH = "/approve/"


class LinkExpired(Conflict):
    """Raised when a link is past its expiry; the web answers 410."""

    code = "link_expired"


class LinkClaims(BaseModel):
    """What a link says: which notification, for whom, until when, and its one-use nonce."""

    nid: str
    approver: str
    expires_at: float
    nonce: str


@dataclass(frozen=True)
class ApprovalLinks:
    """Makes and checks links with the secret key; marks them used in Redis."""

    client: redis.Redis
    keys: KeySpace
    settings: Settings

    def _key(self) -> bytes:
        secret = self.settings.secret_key.get_secret_value()
        if not secret:
            raise NotConfigured("approval links need SIGNOFF_SECRET_KEY (they are signed with it)")
        return hashlib.sha256(b"signoff approval link\0" + secret.encode()).digest()

    def token(self, nid: str, approver: str, *, expires_in_s: int) -> str:
        """A link's token for `approver` to decide `nid`, good for `expires_in_s` seconds."""
        if not 0 < expires_in_s <= MAX_LINK_LIFETIME_S:
            raise InvalidInput(
                f"expires_in_s must be 1-{MAX_LINK_LIFETIME_S} seconds, not {expires_in_s}"
            )
        claims = LinkClaims(
            nid=nid,
            approver=approver,
            expires_at=time.time() + expires_in_s,
            nonce=secrets.token_urlsafe(18),
        )
        body = _encode(claims.model_dump_json().encode())
        return f"{body}.{self._sign(body)}"

    def url(self, token: str) -> str:
        return f"{public_base(self.settings)}{_PATH}{token}"

    def claims(self, token: str) -> LinkClaims:
        """The link's claims if its signature holds (NotFound otherwise: nothing is said about
        why); LinkExpired past its expiry."""
        body, _, signature = token.partition(".")
        if not body or not hmac.compare_digest(self._sign(body), signature):
            raise NotFound("this approval link is not valid")
        try:
            claims = LinkClaims.model_validate_json(_decode(body))
        except (ValueError, ValidationError):
            raise NotFound("this approval link is not valid") from None
        if time.time() >= claims.expires_at:
            raise LinkExpired("this approval link has expired; ask for a new one")
        return claims

    def check(self, token: str, caller: str) -> LinkClaims:
        """The claims, for `caller`: Forbidden when the link is another approver's, Conflict
        when it was used."""
        claims = self.claims(token)
        if claims.approver != caller:
            raise Forbidden(
                f"this approval link is for {claims.approver!r}, not {caller!r}; it works only "
                "for the approver it was sent to"
            )
        with storage_errors("reading an approval link"):
            used = self.client.exists(self.keys.approval_link_used(claims.nonce))
        if used:
            raise Conflict("this approval link was already used; it works once")
        return claims

    def use(self, token: str, caller: str) -> LinkClaims:
        """Checks the link for `caller` and marks it used, atomically: one use wins."""
        claims = self.check(token, caller)
        ttl = max(int(claims.expires_at - time.time()) + 1, 1)
        with storage_errors("using an approval link"):
            fresh = self.client.set(
                self.keys.approval_link_used(claims.nonce), caller, nx=True, ex=ttl
            )
        if not fresh:
            raise Conflict("this approval link was already used; it works once")
        return claims

    def _sign(self, body: str) -> str:
        return _encode(hmac.new(self._key(), body.encode(), hashlib.sha256).digest())


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

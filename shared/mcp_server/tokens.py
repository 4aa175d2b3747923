"""Who calls the MCP server: an API token of the token store, with its name and role."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from shared.errors import Forbidden
from shared.models.users import Role
from shared.store.users import TokenStore

__all__ = ["TokenCaller", "caller_for_token"]


@dataclass(frozen=True)
class TokenCaller:
    """An API token's name, role and scopes: a `shared.gate.Caller` and an approver."""

    name: str
    role: Role
    scopes: tuple[str, ...] = ()


def caller_for_token(tokens: TokenStore, token: str) -> TokenCaller:
    """The token's caller; Forbidden for a token that is unknown, revoked or expired."""
    found = tokens.lookup(token.strip())
    if found is None:
        raise Forbidden("the API token is unknown or revoked; ask an operator for one")
    if found.expired():
        when = datetime.fromtimestamp(found.expires_at or 0.0, UTC)
        raise Forbidden(
            f"the API token expired at {when:%Y-%m-%d %H:%M:%S} UTC; ask an operator for a new one"
        )
    return TokenCaller(found.name, found.role, found.scopes)

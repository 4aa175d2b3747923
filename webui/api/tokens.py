"""/tokens: API tokens for operators: list them, create one (its value shown once), revoke."""

from __future__ import annotations

from typing import Annotated

from flask import Blueprint, Response
from pydantic import BaseModel, Field

from shared.store.users import (
    MAX_TOKEN_LIFETIME_S,
    MAX_TOKEN_NAME,
    TOKEN_NAME_PATTERN,
    ApiToken,
    Role,
)
from webui.api.models import INTEGRAL, RequestBody
from webui.api.replies import reply
from webui.auth import actor, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["NewToken", "TokenCreated", "TokenList", "TokenView", "blueprint"]

_Lifetime = Annotated[int, Field(gt=0, le=MAX_TOKEN_LIFETIME_S), INTEGRAL]


class NewToken(RequestBody):
    """A token to create."""

    name: str = Field(
        min_length=1,
        max_length=MAX_TOKEN_NAME,
        description="What or who the token is for: not only whitespace, and no control or "
        "invisible formatting characters.",
        json_schema_extra={"pattern": TOKEN_NAME_PATTERN},
    )
    role: Role = Field(Role.VIEWER, description="viewer reads; submitter also sends prompts.")
    expires_in_s: _Lifetime | None = Field(
        None, description="Seconds until it expires; null: never."
    )


class TokenView(BaseModel):
    """A token as listed: never its value."""

    id: str = Field(description="Names the token for revocation (a prefix of its digest).")
    name: str
    role: Role
    created_at: float
    expires_at: float | None = Field(description="Unix time it expires; null: never.")
    last_used_at: float | None = Field(description="Unix time, to the minute; null: never used.")
    expired: bool

    @classmethod
    def of(cls, token: ApiToken) -> TokenView:
        return cls(
            id=token.token_id,
            name=token.name,
            role=token.role,
            created_at=token.created_at,
            expires_at=token.expires_at,
            last_used_at=token.last_used_at,
            expired=token.expired(),
        )


class TokenCreated(TokenView):
    """A token just created, with its value: shown in this answer only."""

    token: str = Field(description="The bearer token; Signoff keeps only its digest.")


class TokenList(BaseModel):
    items: list[TokenView]


@requires(Role.OPERATOR)
@operation("API tokens, oldest first (never their values)", response=TokenList)
def list_tokens() -> Response:
    tokens = services().tokens.tokens()
    return reply(TokenList(items=[TokenView.of(token) for token in tokens]))


@requires(Role.OPERATOR)
@operation(
    "Create an API token; its value is in this answer and nowhere else",
    request=NewToken,
    response=TokenCreated,
    status=201,
    errors=(400, 422),
)
def create_token() -> Response:
    body = json_body(NewToken)
    issued = services().tokens.issue(
        body.name, body.role, expires_in_s=body.expires_in_s, actor=actor()
    )
    view = TokenView.of(issued.info)
    return reply(TokenCreated(**view.model_dump(), token=issued.token), 201)


@requires(Role.OPERATOR)
@operation(
    "Revoke an API token: it is refused from the next request on", response=TokenView, errors=(404,)
)
def revoke_token(token_id: str) -> Response:
    revoked = services().tokens.revoke(token_id, actor=actor())
    return reply(TokenView.of(revoked))


def blueprint() -> Blueprint:
    bp = Blueprint("tokens", __name__)
    bp.add_url_rule("/tokens", view_func=list_tokens, methods=["GET"])
    bp.add_url_rule("/tokens", view_func=create_token, methods=["POST"])
    bp.add_url_rule("/tokens/<token_id>", view_func=revoke_token, methods=["DELETE"])
    return bp

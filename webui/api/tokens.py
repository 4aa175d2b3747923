"""/tokens: API tokens for operators: list them, create one (its value shown once), revoke."""

from __future__ import annotations

from typing import Annotated, Self

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict

from shared.errors import InvalidInput
from shared.models.patterns import SPACE
from shared.models.users import MAX_SCOPES, Role, check_scopes
from shared.store.users import MAX_TOKEN_LIFETIME_S, MAX_TOKEN_NAME, TOKEN_NAME_PATTERN, ApiToken
from webui.api.models import INTEGRAL, RequestBody
from webui.api.replies import reply
from webui.auth import actor, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["NewToken", "TokenCreated", "TokenList", "TokenView", "blueprint"]

_Lifetime = Annotated[int, Field(gt=0, le=MAX_TOKEN_LIFETIME_S), INTEGRAL]


# A scope as check_scopes reads it: a known kind, a colon, a value that is not only whitespace
# (`str.strip`'s, written out: ECMA-262 and Rust read `\s` otherwise).
SCOPE = rf"^[{SPACE}]*(tool|label|batch|agent):[\s\S]*[^{SPACE}]"
# Scopes are an approver's only (a role left out is viewer).
_Scope = Annotated[str, Field(max_length=200, json_schema_extra={"pattern": SCOPE})]
_SCOPED_APPROVER: JsonDict = {
    "if": {"properties": {"role": {"not": {"const": "approver"}}}},
    "then": {"properties": {"scopes": {"maxItems": 0}}},
}


class NewToken(RequestBody):
    """A token to create."""

    model_config = ConfigDict(json_schema_extra=_SCOPED_APPROVER)

    name: str = Field(
        min_length=1,
        max_length=MAX_TOKEN_NAME,
        description="What or who the token is for: not only whitespace, and no control or "
        "invisible formatting characters.",
        json_schema_extra={"pattern": TOKEN_NAME_PATTERN},
    )
    role: Role = Field(
        Role.VIEWER,
        description="viewer reads; submitter also sends prompts; approver reads and resolves "
        "approvals (within its scopes); operator does everything.",
    )
    scopes: list[Annotated[str, Field(max_length=200, json_schema_extra={"pattern": SCOPE})]] = (
        Field(
            default_factory=list,
            max_length=MAX_SCOPES,
            description="An approver's: it resolves only approvals these match (tool:NAME, "
            "label:NAME, batch:ID, agent:NAME; kinds together narrow). None: every approval.",
        )
    )
    expires_in_s: _Lifetime | None = Field(
        None, description="Seconds until it expires; null: never."
    )

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        try:
            return list(check_scopes(value, field="scopes"))
        except InvalidInput as exc:  # a 422 naming the field, as pydantic's own
            raise ValueError(exc.message) from None

    @model_validator(mode="after")
    def _scoped_approver(self) -> Self:
        if self.scopes and self.role is not Role.APPROVER:
            raise ValueError("scopes: only an approver has scopes")
        return self


class TokenView(BaseModel):
    """A token as listed: never its value."""

    id: str = Field(description="Names the token for revocation (a prefix of its digest).")
    name: str
    role: Role
    scopes: list[str] = Field(description="An approver's scopes; empty: every approval.")
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
            scopes=list(token.scopes),
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
        body.name, body.role, expires_in_s=body.expires_in_s, actor=actor(), scopes=body.scopes
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

"""Routes: which approval requests go to whom: approvers by email, and a Slack channel."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.models.config import INTEGRAL, LABEL_PATTERN, TOOL_NAME_PATTERN
from shared.models.patterns import SPACE

__all__ = ["EmailRecipient", "Route"]

ROUTE_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_EMAIL = rf"^[^@{SPACE}<>,;]{{1,64}}@[^@{SPACE}<>,;]{{1,255}}$"


class EmailRecipient(BaseModel):
    """An approver (a Signoff user) and the address its requests are mailed to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approver: str = Field(min_length=1, max_length=100, description="The link works for them.")
    address: str = Field(pattern=_EMAIL, description="Where the email goes.")


# The API says what `Route._somewhere` checks, but for a route escalating to itself (no JSON
# Schema compares two fields): email recipients or a Slack channel, and escalate_after_s with
# escalate_to (a null one is none).
_SET = {"not": {"type": "null"}}
_RULES: dict[str, Any] = {
    "anyOf": [
        {"required": ["email"], "properties": {"email": {"minItems": 1}}},
        {"required": ["slack_channel"], "properties": {"slack_channel": _SET}},
    ],
    "allOf": [
        {
            "if": {"required": [given], "properties": {given: _SET}},
            "then": {"required": [other], "properties": {other: _SET}},
        }
        for given, other in (
            ("escalate_after_s", "escalate_to"),
            ("escalate_to", "escalate_after_s"),
        )
    ],
}


class Route(BaseModel):
    """Requests matching every matcher set (none set: every request) are emailed to each
    recipient, with a signed link for that recipient."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_RULES)

    name: str = Field(pattern=ROUTE_NAME_PATTERN)
    tool: str | None = Field(None, pattern=TOOL_NAME_PATTERN, description="Only calls of this.")
    label: str | None = Field(None, pattern=LABEL_PATTERN, description="Only this label's.")
    batch_id: str | None = Field(None, max_length=128, description="Only this batch's.")
    agent: str | None = Field(None, max_length=128, description="Only this agent's.")
    email: list[EmailRecipient] = Field(default_factory=list, max_length=50)
    slack_channel: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_#-]{1,80}$",
        description="Post the request here with Allow and Deny buttons.",
    )

    escalate_after_s: Annotated[int, Field(ge=1, le=7 * 86_400), INTEGRAL] | None = Field(
        None,
        description="With escalate_to: a request still pending this long after this route "
        "sent it is sent to that route too (once).",
    )
    escalate_to: str | None = Field(
        None, pattern=ROUTE_NAME_PATTERN, description="Another route's name (not this one's)."
    )
    escalation_only: bool = Field(
        False, description="Used only as another route's escalate_to, never matched directly."
    )

    @model_validator(mode="after")
    def _somewhere(self) -> Route:
        if not self.email and self.slack_channel is None:
            raise ValueError("a route sends somewhere: give email recipients or a slack_channel")
        if (self.escalate_after_s is None) != (self.escalate_to is None):
            raise ValueError("escalate_after_s and escalate_to go together")
        if self.escalate_to == self.name:
            raise ValueError("escalate_to: a route cannot escalate to itself")
        return self

    def matches(
        self, *, tool: str | None, labels: list[str], batch_id: str | None, agent: str | None
    ) -> bool:
        """Whether a request with these facets goes this way."""
        return not self.escalation_only and (
            (self.tool is None or self.tool == tool)
            and (self.label is None or self.label in labels)
            and (self.batch_id is None or self.batch_id == batch_id)
            and (self.agent is None or self.agent == agent)
        )

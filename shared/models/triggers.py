"""Inbound triggers: an external event, signed with the trigger's secret, becomes a prompt
for a named agent. Pure models."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.models.config import AGENT_NAME_PATTERN

__all__ = ["TRIGGER_NAME_PATTERN", "Trigger", "TriggerFired", "TriggerRequest"]

TRIGGER_NAME_PATTERN = r"^[A-Za-z0-9_\-]{1,64}$"


class TriggerRequest(BaseModel):
    """An operator's definition of a trigger."""

    model_config = {"extra": "forbid"}

    name: str = Field(pattern=TRIGGER_NAME_PATTERN, description="Letters, digits, _ and - (1-64).")
    agent: str = Field(pattern=AGENT_NAME_PATTERN, description="The agent each event runs.")
    template: str = Field(
        min_length=1,
        max_length=10_000,
        description="The prompt, with fields of the event like {payload.issue.title}: each a "
        "path into the event (payload, then keys or list positions joined by dots), without "
        "format specs or conversions; a template with any other field is refused (422).",
    )
    description: str = Field("", max_length=200)
    secret: str | None = Field(
        None,
        pattern=r"^whsec_[A-Za-z0-9+/]{16,}={0,2}$",
        description="A `whsec_<base64>` secret senders sign with; made for you when absent.",
    )


class Trigger(BaseModel):
    """A stored trigger; its secret is shown once, when it is made."""

    name: str
    agent: str
    template: str
    description: str = ""
    secret: str = Field(exclude=True, repr=False)
    created_at: float
    created_by: str


class TriggerFired(BaseModel):
    """What an event started."""

    trigger: str
    conversation_id: str
    turn_id: str

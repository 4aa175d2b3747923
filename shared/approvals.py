"""The notification model: what an operator is asked, and how it can be resolved.

Interactions ask for a decision (Allow, Deny with a reason, or Submit content valid
against a schema); passive notifications only inform (turn completed, failed, a
notification expired, compaction). Resolutions work like deferred tool results:
the turn parks with the request and continues, on any worker, with the decision.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, field_validator

from shared.steps import ToolCall

__all__ = [
    "RESOLUTION",
    "Allow",
    "Delivery",
    "Deny",
    "Notification",
    "NotificationKind",
    "NotificationStatus",
    "PassiveEvent",
    "Resolution",
    "ResolutionKind",
    "Submit",
]


class NotificationKind(str, Enum):
    INTERACTION = "interaction"
    PASSIVE = "passive"


class NotificationStatus(str, Enum):
    PENDING = "pending"
    RESOLVED = "resolved"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class ResolutionKind(str, Enum):
    ALLOW = "allow"
    DENY = "deny"
    SUBMIT = "submit"


class PassiveEvent(str, Enum):
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    NOTIFICATION_EXPIRED = "notification_expired"
    COMPACTION = "compaction"


class Allow(BaseModel):
    """Run the tool; with `arguments`, run it with these instead (validated first)."""

    kind: Literal["allow"] = "allow"
    arguments: dict[str, Any] | None = None
    sticky: Literal["conversation", "batch"] | None = Field(
        default=None, description="Also allow this tool for the rest of the conversation or batch."
    )


class Deny(BaseModel):
    """Do not run the tool; the model is told why."""

    kind: Literal["deny"] = "deny"
    reason: str

    @field_validator("reason")
    @classmethod
    def _reason_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a denial needs a reason")
        return value.strip()


class Submit(BaseModel):
    """Answer a question with content valid against the notification's schema."""

    kind: Literal["submit"] = "submit"
    content: Any


Resolution = Annotated[Allow | Deny | Submit, Field(discriminator="kind")]
RESOLUTION: TypeAdapter[Allow | Deny | Submit] = TypeAdapter(Resolution)


class Notification(BaseModel):
    """One request for a decision (or one passive notice), with its outcome once resolved."""

    id: str
    conversation_id: str
    turn_id: str
    batch_id: str | None = None
    kind: NotificationKind = NotificationKind.INTERACTION
    title: str
    body: str = ""
    tool_call: ToolCall | None = None
    question: str | None = None
    allowed: list[ResolutionKind]
    submit_schema: dict[str, Any] | None = None
    arguments_schema: dict[str, Any] | None = None
    created_at: float
    expires_at: float | None = None
    status: NotificationStatus = NotificationStatus.PENDING
    resolution: Resolution | None = None
    resolved_by: str | None = None
    resolved_at: float | None = None

    @property
    def tool_name(self) -> str | None:
        return self.tool_call.name if self.tool_call else None


class Delivery(BaseModel):
    """One entry of a notification stream, as a consumer receives it."""

    entry_id: str
    notification_id: str
    kind: NotificationKind
    conversation_id: str
    turn_id: str = ""
    event: str = ""
    title: str = ""
    delivery_count: int = 1

"""The notification model: what an operator is asked, and how it can be resolved.

Interactions ask for a decision (Allow, Deny with a reason, or Submit content valid
against a schema); passive notifications only inform (turn completed, failed, a
notification expired, compaction). Resolutions work like deferred tool results:
the turn parks with the request and continues, on any worker, with the decision.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, TypeAdapter, field_validator

from shared.models.steps import ToolCall
from shared.models.value_enum import ValueEnum

__all__ = [
    "EXPIRED_DENIAL",
    "RESOLUTION",
    "Allow",
    "ClaimAction",
    "Delivery",
    "DeliveryEntry",
    "Deny",
    "Notification",
    "NotificationKind",
    "NotificationStatus",
    "PassiveEvent",
    "QuorumAllow",
    "Resolution",
    "ResolutionKind",
    "Submit",
]


# How a denied call's error starts when its approval expired unanswered (the worker writes it;
# a batch's retry tells such items apart by it).
EXPIRED_DENIAL = "denied (it expired)"


class NotificationKind(ValueEnum):
    INTERACTION = "interaction"
    PASSIVE = "passive"


class NotificationStatus(ValueEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class ResolutionKind(str, Enum):
    ALLOW = "allow"
    DENY = "deny"
    SUBMIT = "submit"


class ClaimAction(str, Enum):
    """A claim of a pending notification (someone is on it), or its release: audited."""

    CLAIM = "claim"
    RELEASE = "release"


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


class QuorumAllow(BaseModel):
    """One approver's allow of a call that needs several: who, and the arguments' hash."""

    by: str
    arguments_hash: str = Field(
        description="SHA-256 (hex, 16 digits) of the arguments this approver allowed, as edited: "
        "only allows of the same arguments count together."
    )


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
    approvals_needed: int | None = Field(
        None, description="Distinct approvers who must allow it (set once the first has)."
    )
    allowed_by: list[QuorumAllow] = Field(
        default_factory=list, description="Who has allowed so far, when it needs several."
    )
    claimed_by: str | None = Field(
        None,
        description="Who said they are on it (a claim); anyone who may resolve it still may.",
    )
    claimed_at: float | None = None

    @property
    def tool_name(self) -> str | None:
        return self.tool_call.name if self.tool_call else None


class DeliveryEntry(BaseModel):
    """One entry of a notification stream, as it is written: what a consumer is told."""

    notification_id: str
    kind: NotificationKind
    conversation_id: str
    turn_id: str = ""
    event: str = ""
    title: str = ""

    @classmethod
    def interaction(cls, note: Notification) -> Self:
        """The delivery of a notification that asks for a decision."""
        return cls(
            notification_id=note.id,
            kind=note.kind,
            conversation_id=note.conversation_id,
            turn_id=note.turn_id,
            event="interaction",
            title=note.title,
        )

    @classmethod
    def passive(
        cls,
        notification_id: str,
        *,
        conversation_id: str,
        turn_id: str,
        event: PassiveEvent,
        title: str,
    ) -> Self:
        """The delivery of a notice that informs and needs no decision."""
        return cls(
            notification_id=notification_id,
            kind=NotificationKind.PASSIVE,
            conversation_id=conversation_id,
            turn_id=turn_id,
            event=event.value,
            title=title,
        )

    def fields(self) -> dict[str, str]:
        """The stream entry's fields, in order."""
        return {name: str(value) for name, value in self.model_dump(mode="json").items()}


class Delivery(DeliveryEntry):
    """One entry of a notification stream, as a consumer receives it."""

    entry_id: str
    delivery_count: int = 1

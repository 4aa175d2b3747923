"""Everything that travels through a conversation's event stream.

One discriminated union on ``kind``, parsed by one TypeAdapter when read and
validated when written. ``id`` is the Redis stream id, filled in on read.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from shared.models.steps import Step, UsageMetadata
from shared.models.value_enum import ValueEnum

__all__ = [
    "EVENT",
    "CancelledEvent",
    "ChatResponse",
    "ClaimEvent",
    "CompletedEvent",
    "ConversationStatus",
    "Event",
    "EventBase",
    "FailedEvent",
    "NotificationEvent",
    "StatusEvent",
    "StepEvent",
    "TurnStartedEvent",
    "TurnStatus",
]


class TurnStatus(ValueEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_USER = "waiting_for_user"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED)


class ConversationStatus(ValueEnum):
    IDLE = "idle"
    RUNNING = "running"
    WAITING_FOR_USER = "waiting_for_user"
    CLOSED = "closed"


class ChatResponse(BaseModel):
    """The authoritative result of one turn."""

    turn_id: str = ""
    text: str = ""
    thinking: str = ""
    steps: list[Step] = Field(default_factory=list)
    usage_metadata: UsageMetadata | None = None
    structured_output: Any = None


class EventBase(BaseModel):
    id: str | None = Field(default=None, description="Redis stream id, set when read.")
    conversation_id: str
    turn_id: str = ""
    step_index: int | None = None


class TurnStartedEvent(EventBase):
    kind: Literal["turn_started"] = "turn_started"


class StepEvent(EventBase):
    """A step: partial (status active, carrying deltas) or finished (appended to history)."""

    kind: Literal["step"] = "step"
    step: Step


class NotificationEvent(EventBase):
    kind: Literal["notification"] = "notification"
    notification_id: str
    notification_kind: str = "interaction"
    status: str = "pending"
    title: str = ""


class ClaimEvent(EventBase):
    """Live only (never stored, no stream id): a pending request was claimed or released, so
    open inboxes show who has it."""

    kind: Literal["claim"] = "claim"
    notification_id: str
    claimed_by: str = Field("", description="Who holds it now; empty once released.")


class StatusEvent(EventBase):
    kind: Literal["status"] = "status"
    status: ConversationStatus


class CompletedEvent(EventBase):
    """Terminal: the turn finished; `response` is authoritative, never rebuilt from deltas."""

    kind: Literal["completed"] = "completed"
    response: ChatResponse


class FailedEvent(EventBase):
    """Terminal: the turn ended with an error."""

    kind: Literal["failed"] = "failed"
    error: str
    code: str = "error"


class CancelledEvent(EventBase):
    """Terminal: abort() ended the turn."""

    kind: Literal["cancelled"] = "cancelled"
    reason: str = "aborted"


Event = Annotated[
    TurnStartedEvent
    | StepEvent
    | NotificationEvent
    | ClaimEvent
    | StatusEvent
    | CompletedEvent
    | FailedEvent
    | CancelledEvent,
    Field(discriminator="kind"),
]
EVENT: TypeAdapter[
    TurnStartedEvent
    | StepEvent
    | NotificationEvent
    | ClaimEvent
    | StatusEvent
    | CompletedEvent
    | FailedEvent
    | CancelledEvent
] = TypeAdapter(Event)

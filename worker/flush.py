"""What one flush writes, by name: the worker's write model.

Every change a leg makes (steps, events, the turn's record and checkpoint, the
conversation's fields, tool outcomes, a notification and its deliveries) is one
`Flush`; the writer sends it to Redis in one fenced round trip. Pure: no I/O.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from shared.models.events import ChatResponse, ConversationStatus, EventBase, TurnStatus
from shared.models.notifications import DeliveryEntry, Notification
from shared.models.steps import Step, UsageMetadata
from shared.models.webhooks import WebhookEvent
from shared.store.conversations import allow_field
from worker.tool_ledger import outcome_record
from worker.tools import ToolOutcome

__all__ = ["Flush", "TurnEnd"]


class TurnEnd(BaseModel):
    """How a turn ended: its record keeps the response or the error, and the conversation
    lets go of it (no active turn, no abort pending, parked on nothing)."""

    finished_at: float = Field(default_factory=time.time)
    response: ChatResponse | None = None  # a completed turn's
    error: str | None = None  # why a failed or cancelled turn ended


class Flush(BaseModel):
    """What one round trip writes. Fields left at their defaults write nothing."""

    # mutable defaults by factory: pydantic deep-copies a default value for every instance
    steps: list[Step] = Field(default_factory=list)  # finished steps, appended to history
    usage: UsageMetadata | None = None  # added to the conversation's and the day's usage
    start_turn: bool = False  # the first step is a turn's start
    # emitted in order, before any status event
    events: list[EventBase] = Field(default_factory=list)
    turn_status: TurnStatus | None = None
    started_at: float | None = None  # when the turn started running
    # where the turn stands, for the next leg: the JSON of its `TurnCheckpoint`, a snapshot
    checkpoint: str | None = None
    end: TurnEnd | None = None
    conversation_status: ConversationStatus | None = None  # with its `status` event
    parked_on: str | None = None  # the notification the turn waits on; "" when it goes on
    allow_tool: str | None = None  # a tool the operator allowed for the whole conversation
    # recorded by call id (`ToolLedger`)
    tool_results: dict[str, ToolOutcome] = Field(default_factory=dict)
    notification: Notification | None = None  # a new pending one, filed in the inbox too
    # on the conversation's and the global stream
    deliveries: list[DeliveryEntry] = Field(default_factory=list)
    # for the webhook outbox, in the same round trip
    webhooks: list[WebhookEvent] = Field(default_factory=list)

    @property
    def resumes(self) -> bool:
        """The turn goes on after a park."""
        return self.turn_status is TurnStatus.RUNNING and self.parked_on == ""

    def turn_fields(self) -> dict[str, str]:
        """The fields of the turn's hash this flush writes."""
        fields: dict[str, str] = {}
        if self.turn_status is not None:
            fields["status"] = self.turn_status.value
        if self.started_at is not None:
            fields["started_at"] = repr(self.started_at)
        if self.checkpoint is not None:
            fields["checkpoint"] = self.checkpoint
        if self.end is not None:
            fields |= {"finished_at": repr(self.end.finished_at), "checkpoint": ""}
            if self.end.response is not None:
                fields["response"] = self.end.response.model_dump_json()
            if self.end.error is not None:
                fields["error"] = self.end.error
        return fields

    def conversation_fields(self) -> dict[str, str]:
        """The fields of the conversation's hash this flush writes (its status aside)."""
        fields: dict[str, str] = {}
        if self.parked_on is not None:
            fields["parked_on"] = self.parked_on
        if self.allow_tool is not None:
            fields[allow_field(self.allow_tool)] = "1"
        if self.end is not None:
            fields |= {"active_turn": "", "cancel_turn": "", "parked_on": ""}
            fields["updated_at"] = repr(self.end.finished_at)
            if self.turn_status is not None:
                fields["last_turn_status"] = self.turn_status.value
        return fields

    def tool_result_fields(self) -> dict[str, str]:
        """The fields of the conversation's tool results hash."""
        return {call_id: outcome_record(o) for call_id, o in self.tool_results.items()}

    def notification_fields(self) -> dict[str, str]:
        """The fields of the new notification's hash."""
        note = self.notification
        return {} if note is None else {"doc": note.model_dump_json(), "status": note.status.value}

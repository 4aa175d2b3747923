"""Following one turn through the event stream: pure logic shared by the sync and async clients."""

from __future__ import annotations

from shared.chunks import ChunkFilter, StreamChunk
from shared.errors import Cancelled, TurnFailed
from shared.events import (
    CancelledEvent,
    ChatResponse,
    CompletedEvent,
    EventBase,
    FailedEvent,
    StepEvent,
)
from shared.steps import Step

__all__ = ["TurnFollower"]


class TurnFollower:
    """Feeds on events; yields the turn's steps and chunks; knows when the turn has ended."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.response: ChatResponse | None = None
        self.error: Exception | None = None
        self.done = False
        self._filter = ChunkFilter()

    def steps(self, event: EventBase) -> list[Step]:
        """The step an event carries for this turn (none for other turns), noting its end."""
        if event.turn_id != self.turn_id:
            return []
        if isinstance(event, CompletedEvent):
            self.response, self.done = event.response, True
        elif isinstance(event, FailedEvent):
            self.error, self.done = TurnFailed(f"turn {self.turn_id} failed: {event.error}"), True
        elif isinstance(event, CancelledEvent):
            self.error, self.done = (
                Cancelled(f"turn {self.turn_id} was cancelled: {event.reason}"),
                True,
            )
        elif isinstance(event, StepEvent):
            return [event.step]
        return []

    def chunks(self, event: EventBase) -> list[StreamChunk]:
        return [chunk for step in self.steps(event) for chunk in self._filter.feed(step)]

    def result(self) -> ChatResponse:
        """The authoritative response, or the error that ended the turn."""
        if self.error is not None:
            raise self.error
        if self.response is None:
            raise TurnFailed(f"turn {self.turn_id} ended without a completed value")
        return self.response

    def finish_from_record(self, status: str, fields: dict[str, str]) -> None:
        """Ends the turn from its record when its terminal event left the stream."""
        if status == "completed":
            self.response = ChatResponse.model_validate_json(fields["response"])
        elif status == "failed":
            self.error = TurnFailed(f"turn {self.turn_id} failed: {fields.get('error', '')}")
        elif status == "cancelled":
            self.error = Cancelled(f"turn {self.turn_id} was cancelled: {fields.get('error', '')}")
        else:
            return
        self.done = True

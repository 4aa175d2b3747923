"""One model call, streamed: deltas buffered here, written once a window by the process's ticker.

The main loop reads provider events into a buffer; the process's `DeltaFlusher`
(`worker/deltas.py`) writes every model call's buffer in one round trip per flush
window, so a pause in the model never holds text back and a thousand streams cost
one write per window. Each tick reports whether abort was requested and whether the
lease was taken over; the loop closes the provider stream at once on either. What is
left in the buffer when the call ends goes into the leg's next flush.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shared.models.events import StepEvent
from shared.models.steps import Step, ToolCall, UsageMetadata
from shared.store.emit import encode_event
from worker.deltas import DeltaEntry, DeltaFlusher, TickReply
from worker.providers.base import (
    FinishEvent,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)
from worker.writer import LeaseLost, Writer

__all__ = ["ModelOutput", "StepStreamer"]


@dataclass
class ModelOutput:
    """What one model call produced."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsageMetadata | None = None
    finish_reason: str = ""
    stopped: bool = False  # abort or timeout closed the stream early


class StepStreamer:
    """Streams the deltas of the step at `step_index` and collects the model's output."""

    def __init__(
        self,
        writer: Writer,
        deltas: DeltaFlusher,
        *,
        step_index: int,
        should_stop: Callable[[], bool],
    ) -> None:
        self.writer = writer
        self.cid = writer.cid
        self.step_index = step_index
        self.should_stop = should_stop
        self.cancel_requested = False
        self.output = ModelOutput()
        self._deltas = deltas
        self._thinking: list[str] = []
        self._text: list[str] = []
        self._lock = threading.Condition()
        self._in_flight = False  # a tick carries deltas of this call
        self._done = False  # the call ended: ticks take nothing more
        self._fenced = False
        self._error: Exception | None = None
        self.first_event_at: float | None = None  # monotonic: the first text, thinking or call

    def run(self, events: Iterator[ProviderEvent]) -> ModelOutput:
        try:
            self._consume(events)
        finally:
            with self._lock:  # a tick under way returns first; none takes anything after
                self._done = True
                while self._in_flight:
                    self._lock.wait()
            close = getattr(events, "close", None)
            if close is not None:
                close()
        self._raise_tick_outcome()
        return self.output

    def _consume(self, events: Iterator[ProviderEvent]) -> None:
        for event in events:
            self._raise_tick_outcome()
            self._take(event)
            if self.cancel_requested or self.should_stop():
                self.output.stopped = True
                return

    def _take(self, event: ProviderEvent) -> None:
        if self.first_event_at is None and isinstance(
            event, ThinkingDelta | TextDelta | ToolCallEvent
        ):
            self.first_event_at = time.monotonic()
        if isinstance(event, ThinkingDelta | TextDelta):
            self._buffer(event)
        elif isinstance(event, ToolCallEvent):
            self.output.tool_calls.append(event.call)
        elif isinstance(event, UsageEvent):
            self.output.usage = (self.output.usage or UsageMetadata()) + event.usage
        elif isinstance(event, FinishEvent):
            self.output.finish_reason = event.reason

    def _buffer(self, event: ThinkingDelta | TextDelta) -> None:
        with self._lock:
            opens = not self._thinking and not self._text
            if isinstance(event, ThinkingDelta):
                self._thinking.append(event.text)
                self.output.thinking += event.text
            else:
                self._text.append(event.text)
                self.output.content += event.text
        if opens:
            self._deltas.enrol(self)

    def _raise_tick_outcome(self) -> None:
        if self._fenced:
            raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
        if self._error is not None:
            raise self._error

    def take_for_tick(self) -> DeltaEntry | None:
        """The flusher's take: the buffer as one entry, unless the call already ended."""
        with self._lock:
            if self._done:
                return None
            event = self._take_locked()
            if event is None:
                return None
            self._in_flight = True
        writer = self.writer
        return DeltaEntry(
            token=writer.token,
            turn_id=writer.turn_id,
            channel=writer.live_channel,
            events=[encode_event(event)],
        )

    def tick_done(self, reply: TickReply | None, error: Exception | None) -> None:
        """The tick carrying this call's deltas returned: note abort, a lost lease, or failure."""
        with self._lock:
            if reply is not None and reply.cancel_requested:
                self.cancel_requested = True
                self.writer.cancel_seen = True
            self._fenced = self._fenced or (reply is not None and reply.fenced)
            self._error = self._error or error
            self._in_flight = False
            self._lock.notify_all()

    def take_pending(self) -> StepEvent | None:
        """The buffered deltas as one partial step event, emptying the buffer."""
        with self._lock:
            return self._take_locked()

    def _take_locked(self) -> StepEvent | None:
        if not self._thinking and not self._text:
            return None
        step = Step.model_delta(
            index=self.step_index,
            thinking_delta="".join(self._thinking),
            content_delta="".join(self._text),
        )
        self._thinking.clear()
        self._text.clear()
        return StepEvent(
            conversation_id=self.cid,
            turn_id=self.writer.turn_id,
            step_index=self.step_index,
            step=step,
        )

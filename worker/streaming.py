"""One model call, streamed: deltas coalesced over a short window, one flush per window.

The main loop reads provider events; a ticker flushes deltas that have waited a
full window, so a pause in the model never holds text back. Every flush reports
whether abort was requested, and the loop closes the provider stream when it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shared.models.events import StepEvent
from shared.models.steps import Step, ToolCall, UsageMetadata
from worker.flush import Flush
from worker.providers.base import (
    FinishEvent,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)
from worker.writer import Writer

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
        self, writer: Writer, *, step_index: int, window_ms: int, should_stop: Callable[[], bool]
    ) -> None:
        self.writer = writer
        self.step_index = step_index
        self.window_s = window_ms / 1000
        self.should_stop = should_stop
        self.cancel_requested = False
        self.output = ModelOutput()
        self._thinking: list[str] = []
        self._text: list[str] = []
        self._oldest = 0.0
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._error: BaseException | None = None
        self._done = threading.Event()

    def run(self, events: Iterator[ProviderEvent]) -> ModelOutput:
        ticker = threading.Thread(target=self._tick, name="flush-ticker", daemon=True)
        ticker.start()
        try:
            self._consume(events)
        finally:
            self._done.set()
            ticker.join()
            close = getattr(events, "close", None)
            if close is not None:
                close()
        self._raise_ticker_error()
        return self.output

    def _consume(self, events: Iterator[ProviderEvent]) -> None:
        for event in events:
            self._raise_ticker_error()
            self._take(event)
            if self.cancel_requested or self.should_stop():
                self.output.stopped = True
                return

    def _take(self, event: ProviderEvent) -> None:
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
            if not self._thinking and not self._text:
                self._oldest = time.monotonic()
            if isinstance(event, ThinkingDelta):
                self._thinking.append(event.text)
                self.output.thinking += event.text
            else:
                self._text.append(event.text)
                self.output.content += event.text
            due = time.monotonic() - self._oldest >= self.window_s
        if due:
            self.flush_deltas()

    def _tick(self) -> None:
        while not self._done.wait(max(self.window_s, 0.005)):
            with self._lock:
                stale = (
                    self._thinking or self._text
                ) and time.monotonic() - self._oldest >= self.window_s
            if stale:
                try:
                    self.flush_deltas()
                except BaseException as exc:  # surfaced to the consuming thread
                    self._error = exc
                    return

    def _raise_ticker_error(self) -> None:
        if self._error is not None:
            raise self._error

    def take_pending(self) -> StepEvent | None:
        """The buffered deltas as one partial step event, emptying the buffer."""
        with self._lock:
            if not self._thinking and not self._text:
                return None
            step = Step.model_delta(
                index=self.step_index,
                thinking_delta="".join(self._thinking),
                content_delta="".join(self._text),
            )
            self._thinking.clear()
            self._text.clear()
        writer = self.writer
        return StepEvent(
            conversation_id=writer.cid,
            turn_id=writer.turn_id,
            step_index=self.step_index,
            step=step,
        )

    def flush_deltas(self) -> None:
        with self._write_lock:  # take and write together, so flushes keep their order
            event = self.take_pending()
            if event is None:
                return
            result = self.writer.write(Flush(events=[event]))
        if result.cancel_requested:
            self.cancel_requested = True

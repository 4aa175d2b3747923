"""One model call, streamed: deltas coalesced over a short window, one flush per window.

The main loop reads provider events; a ticker flushes deltas that have waited a
full window, so a pause in the model never holds text back. The ticker is one
thread per worker process, reminded when a window opens (a thread per model call
was started and joined twice in every one-turn leg). Every flush reports whether
abort was requested, and the loop closes the provider stream when it is.
"""

from __future__ import annotations

import heapq
import itertools
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
        try:
            self._consume(events)
        finally:
            with self._write_lock:  # a tick's flush under way ends first; none starts after
                self._done.set()
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
            opens = not self._thinking and not self._text
            if opens:
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
        elif opens:
            _TICKER.remind(self, self._oldest + self.window_s)

    @property
    def finished(self) -> bool:
        """The model call is over: no tick can flush anything for it any more."""
        return self._done.is_set()

    def tick(self) -> None:
        """The ticker's call once a window has passed: flush what waited the whole window."""
        with self._write_lock:
            if self._done.is_set() or self._error is not None:
                return
            with self._lock:
                stale = (
                    self._thinking or self._text
                ) and time.monotonic() - self._oldest >= self.window_s
            if stale:
                try:
                    self._flush_pending()
                except BaseException as exc:  # surfaced to the consuming thread
                    self._error = exc

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
            self._flush_pending()

    def _flush_pending(self) -> None:
        event = self.take_pending()
        if event is None:
            return
        result = self.writer.write(Flush(events=[event]))
        if result.cancel_requested:
            self.cancel_requested = True


class _Ticker:
    """One thread that calls `StepStreamer.tick` when each open window is due."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, StepStreamer]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def remind(self, streamer: StepStreamer, at: float) -> None:
        with self._wake:
            heapq.heappush(self._due, (at, next(self._order), streamer))
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(target=self._run, name="flush-ticker", daemon=True)
                self._thread.start()
            elif self._due[0][2] is streamer:
                self._wake.notify()  # sooner than what the thread waits for

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    # Most model calls end inside their first window: their reminders are
                    # dropped here rather than woken for (a wake per call cost the worker
                    # several per cent of its time at the throughput benchmark's load).
                    while self._due and self._due[0][2].finished:
                        heapq.heappop(self._due)
                    if self._due and self._due[0][0] <= time.monotonic():
                        break
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, streamer = heapq.heappop(self._due)
            streamer.tick()  # outside the lock: a flush is a round trip


_TICKER = _Ticker()

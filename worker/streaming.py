"""One model call, streamed: deltas buffered here, written once a window by the process's ticker.

The main loop reads provider events into a buffer; the process's `DeltaFlusher`
(`worker/deltas.py`) writes every model call's buffer in one round trip per flush
window, so a pause in the model never holds text back and a thousand streams cost
one write per window. Each tick reports whether abort was requested and whether the
lease was taken over; the loop closes the provider stream at once on either. What is
left in the buffer when the call ends goes into the leg's next flush.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
        # The buffer takes a plain lock at each token; a tick's return is waited for on a
        # condition of its own, over a reentrant lock: a condition over gevent's plain lock
        # checks ownership with a failed acquire, which yields, at every notify.
        self._mutex = threading.Lock()
        self._ticks = threading.Condition()
        self._in_flight = False  # a tick carries deltas of this call (set under _mutex)
        self._done = False  # the call ended: ticks take nothing more
        self._fenced = False
        self._error: Exception | None = None
        self.first_event_at: float | None = None  # monotonic: the first text, thinking or call
        self._delta_template: _DeltaTemplate | None = None  # made at the first tick's take

    def run(self, events: Iterator[ProviderEvent]) -> ModelOutput:
        try:
            self._consume(events)
        finally:
            with self._mutex:  # no tick takes anything after this
                self._done = True
            with self._ticks:  # and one under way returns first
                while self._in_flight:
                    self._ticks.wait()
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
            self.output.tool_calls.append(_writable_call(event.call))
        elif isinstance(event, UsageEvent):
            self.output.usage = (self.output.usage or UsageMetadata()) + event.usage
        elif isinstance(event, FinishEvent):
            self.output.finish_reason = event.reason

    def _buffer(self, event: ThinkingDelta | TextDelta) -> None:
        text = _writable(event.text)
        with self._mutex:
            opens = not self._thinking and not self._text
            if isinstance(event, ThinkingDelta):
                self._thinking.append(text)
                self.output.thinking += text
            else:
                self._text.append(text)
                self.output.content += text
        if opens:
            self._deltas.enrol(self)

    def _raise_tick_outcome(self) -> None:
        if self._fenced:
            raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
        if self._error is not None:
            raise self._error

    def take_for_tick(self) -> DeltaEntry | None:
        """The flusher's take: the buffer as one entry, unless the call already ended."""
        with self._mutex:
            if self._done or (not self._thinking and not self._text):
                return None
            thinking, text = "".join(self._thinking), "".join(self._text)
            self._thinking.clear()
            self._text.clear()
            self._in_flight = True
        if self._delta_template is None:
            self._delta_template = _DeltaTemplate(self._partial_event("", ""))
        writer = self.writer
        return DeltaEntry(
            token=writer.token,
            turn_id=writer.turn_id,
            channel=writer.live_channel,
            events=[self._delta_template.fill(text, thinking)],
        )

    def tick_done(self, reply: TickReply | None, error: Exception | None) -> None:
        """The tick carrying this call's deltas returned: note abort, a lost lease, or failure."""
        with self._ticks:
            if reply is not None and reply.cancel_requested:
                self.cancel_requested = True
                self.writer.cancel_seen = True
            self._fenced = self._fenced or (reply is not None and reply.fenced)
            self._error = self._error or error
            self._in_flight = False
            self._ticks.notify_all()

    def take_pending(self) -> StepEvent | None:
        """The buffered deltas as one partial step event, emptying the buffer."""
        with self._mutex:
            return self._take_locked()

    def _take_locked(self) -> StepEvent | None:
        if not self._thinking and not self._text:
            return None
        event = self._partial_event("".join(self._thinking), "".join(self._text))
        self._thinking.clear()
        self._text.clear()
        return event

    def _partial_event(self, thinking: str, text: str) -> StepEvent:
        step = Step.model_delta(index=self.step_index, thinking_delta=thinking, content_delta=text)
        return StepEvent(
            conversation_id=self.cid,
            turn_id=self.writer.turn_id,
            step_index=self.step_index,
            step=step,
        )


class _DeltaTemplate:
    """A call's partial step event as stored, with its two texts left open: each tick fills
    them in, where building and dumping the event's two models cost about 14 µs a tick for
    every conversation streaming (a delta at each tick, at a real model's pace)."""

    _TEXT, _THINKING = "\ue000text\ue000", "\ue000thinking\ue000"  # no id or JSON holds these

    def __init__(self, empty: StepEvent) -> None:
        step = empty.step.model_copy(
            update={"content_delta": self._TEXT, "thinking_delta": self._THINKING}
        )
        encoded = encode_event(empty.model_copy(update={"step": step}))
        head, rest = encoded.split(json.dumps(self._TEXT, ensure_ascii=False), 1)
        middle, tail = rest.split(json.dumps(self._THINKING, ensure_ascii=False), 1)
        self._parts = (head, middle, tail)

    def fill(self, text: str, thinking: str) -> str:
        head, middle, tail = self._parts
        return f"{head}{_string(text)}{middle}{_string(thinking)}{tail}"


def _writable(text: str) -> str:
    """`text` with U+FFFD for each lone surrogate: a model server's JSON may escape one
    ("\\ud800"), and no UTF-8 write takes it (one such delta failed every call of its tick)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _writable_call(call: ToolCall) -> ToolCall:
    """The call with `_writable` strings throughout its id, name and arguments."""
    dumped = call.model_dump()
    cleaned = _writable_value(dumped)
    return call if cleaned == dumped else ToolCall.model_validate(cleaned)


def _writable_value(value: Any) -> Any:
    if isinstance(value, str):
        return _writable(value)
    if isinstance(value, dict):
        return {_writable(str(k)): _writable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_writable_value(item) for item in value]
    return value


# json.dumps with an option builds an encoder per call; a tick fills one string per delta
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _string(text: str) -> str:
    """`text` as a JSON string, as pydantic writes it (non-ASCII left as it is)."""
    return _ENCODE(text)

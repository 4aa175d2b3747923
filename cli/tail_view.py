"""What `signoff tail` prints for each event: readable lines, sans I/O.

Thinking is streamed dim after a `thinking:` prefix, text plain; the answer is shown once
(streamed, or from the finished step or turn when no delta was seen, as when tailing
starts late); tool calls read `→ tool(args)`; status changes are short lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from shared.models.events import (
    CancelledEvent,
    CompletedEvent,
    EventBase,
    FailedEvent,
    NotificationEvent,
    StatusEvent,
    StepEvent,
    TurnStartedEvent,
)
from shared.models.steps import Step, StepType

__all__ = ["Piece", "TailView", "short"]

_RESULT_CHARS = 200


class Piece(NamedTuple):
    """Some text to print; `style` is "", "dim", "tool", "notice" or "error"."""

    text: str
    style: str = ""


def short(identifier: str) -> str:
    """The first 8 characters of an id, enough to tell ids apart on a screen."""
    return identifier[:8]


@dataclass
class TailView:
    """Turns events into pieces of output, remembering what is streaming and what was shown."""

    mode: str = ""  # "thinking" or "text" while a delta line is open
    answered: set[str] = field(default_factory=set)  # turns whose answer was shown

    def pieces(self, event: EventBase) -> list[Piece]:
        if isinstance(event, StepEvent):
            return self._step(event.turn_id, event.step)
        return self._close() + [piece for piece in self._notice(event) if piece.text]

    def _close(self) -> list[Piece]:
        """Ends an open line of streamed thinking or text."""
        if not self.mode:
            return []
        self.mode = ""
        return [Piece("\n")]

    def _delta(self, mode: str, text: str, style: str, prefix: str) -> list[Piece]:
        opened = [] if self.mode == mode else [*self._close(), Piece(prefix, style)]
        self.mode = mode
        return [*opened, Piece(text, style)]

    def _step(self, turn_id: str, step: Step) -> list[Piece]:
        if step.thinking_delta:
            return self._delta("thinking", step.thinking_delta, "dim", "thinking: ")
        if step.content_delta:
            self.answered.add(turn_id)
            return self._delta("text", step.content_delta, "", "")
        return self._close() + [piece for piece in self._finished(turn_id, step) if piece.text]

    def _finished(self, turn_id: str, step: Step) -> list[Piece]:
        if step.error:
            return [Piece(f"error: {step.error}\n", "error")]
        if step.type is StepType.USER_INPUT:
            return [Piece(f"> {step.content}\n")]
        if step.type is StepType.TOOL_CALL:
            return [
                Piece(f"→ {call.name}({_args(call.args)})\n", "tool") for call in step.tool_calls
            ]
        if step.type is StepType.TOOL_RESULT:
            return [Piece(f"← {_clip(step.content)}\n", "dim")]
        if step.type is StepType.TEXT_RESPONSE and step.content and turn_id not in self.answered:
            self.answered.add(turn_id)
            return [Piece(step.content + "\n")]
        return []

    def _notice(self, event: EventBase) -> list[Piece]:
        turn = f"turn {short(event.turn_id)}"
        if isinstance(event, TurnStartedEvent):
            return [Piece(f"{turn} started\n", "dim")]
        if isinstance(event, StatusEvent):
            return [Piece(f"status: {event.status.value}\n", "dim")]
        if isinstance(event, NotificationEvent):
            # the whole id: it is what `signoff approvals allow` takes
            return [Piece(f"{event.title} ({event.status}): {event.notification_id}\n", "notice")]
        if isinstance(event, CompletedEvent):
            text = event.response.text
            answer = [] if event.turn_id in self.answered or not text else [Piece(text + "\n")]
            self.answered.add(event.turn_id)
            return [*answer, Piece(f"{turn} completed\n", "dim")]
        if isinstance(event, FailedEvent):
            return [Piece(f"{turn} failed: {event.error}\n", "error")]
        if isinstance(event, CancelledEvent):
            return [Piece(f"{turn} cancelled: {event.reason}\n", "notice")]
        return [Piece(f"{event.__class__.__name__}\n", "dim")]


def _args(args: object) -> str:
    if isinstance(args, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return json.dumps(args, ensure_ascii=False)


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _RESULT_CHARS else flat[: _RESULT_CHARS - 1] + "…"

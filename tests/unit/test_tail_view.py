"""`signoff tail`'s lines, from events built by hand."""

from __future__ import annotations

from typing import Any

from cli.tail_view import TailView
from shared.models.events import ChatResponse, CompletedEvent, EventBase, FailedEvent, StepEvent
from shared.models.steps import Step, StepType, ToolCall

CID, TID = "c" * 20, "0123456789abcdef"


def text(view: TailView, *events: EventBase) -> str:
    return "".join(piece.text for event in events for piece in view.pieces(event))


def step(**fields: Any) -> StepEvent:
    return StepEvent(conversation_id=CID, turn_id=TID, step=Step(**fields))


def test_thinking_then_text_on_their_own_lines_and_the_answer_once() -> None:
    out = text(
        TailView(),
        step(thinking_delta="Let me "),
        step(thinking_delta="think."),
        step(content_delta="Hello "),
        step(content_delta="there."),
        step(type=StepType.TEXT_RESPONSE, content="Hello there."),
        CompletedEvent(
            conversation_id=CID, turn_id=TID, response=ChatResponse(text="Hello there.")
        ),
    )
    assert out == "thinking: Let me think.\nHello there.\nturn 01234567 completed\n"


def test_a_late_tail_shows_the_answer_from_the_completed_turn() -> None:
    view = TailView()
    done = CompletedEvent(conversation_id=CID, turn_id=TID, response=ChatResponse(text="42"))
    assert text(view, done) == "42\nturn 01234567 completed\n"


def test_tool_calls_and_failures_read_as_lines() -> None:
    call = ToolCall(name="send_email", args={"to": "a@b.c"})
    out = text(
        TailView(),
        step(type=StepType.TOOL_CALL, tool_calls=[call]),
        FailedEvent(conversation_id=CID, turn_id=TID, error="boom"),
    )
    assert out == '→ send_email(to="a@b.c")\nturn 01234567 failed: boom\n'

"""The three ways a turn ends: completed, failed, cancelled. Each is one flush."""

from __future__ import annotations

from shared.models.events import (
    CancelledEvent,
    ChatResponse,
    CompletedEvent,
    ConversationStatus,
    EventBase,
    FailedEvent,
    StepEvent,
    TurnStatus,
)
from shared.models.notifications import DeliveryEntry, PassiveEvent
from shared.models.steps import Step, StepSource, StepStatus, UsageMetadata
from shared.webhooks import payloads
from worker import observe
from worker.flush import Flush, TurnEnd
from worker.leg import Leg

__all__ = ["cancel_turn", "complete_turn", "error_step", "fail_turn"]


def _position(leg: Leg) -> int:
    return leg.writer.next_position


def _step_event(leg: Leg, step: Step) -> StepEvent:
    return StepEvent(
        conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
    )


def error_step(
    leg: Leg, message: str, *, http_code: int = 0, status: StepStatus = StepStatus.ERROR
) -> Step:
    """A step telling the user what went wrong; it never reaches the model."""
    return Step.error_message(
        message, turn_id=leg.turn_id, index=_position(leg), http_code=http_code, status=status
    )


def complete_turn(
    leg: Leg,
    extra: list[Step] | None = None,
    *,
    leading: list[EventBase] | None = None,
    usage: UsageMetadata | None = None,
) -> ChatResponse:
    """Appends the Finish step and emits the authoritative Completed value.

    `extra` steps (the final answer, say) and `leading` events (its last deltas) go in
    the same flush, so the answer and its Completed value are one atomic write.
    """
    cp = leg.checkpoint
    steps = list(extra or [])
    base = _position(leg)
    for offset, step in enumerate(steps):
        step.step_index = base + offset
    finish = Step.finish(
        turn_id=leg.turn_id,
        index=base + len(steps),
        structured_output=cp.structured_output,
        usage=cp.usage,
    )
    steps.append(finish)
    turn_steps = [*leg.turn_steps(), *steps]
    response = ChatResponse(
        turn_id=leg.turn_id,
        text=cp.final_text,
        thinking="\n".join(
            s.thinking for s in turn_steps if s.source is StepSource.MODEL and s.thinking
        ),
        steps=turn_steps,
        usage_metadata=cp.usage,
        structured_output=cp.structured_output,
    )
    events: list[EventBase] = [*(leading or []), *(_step_event(leg, s) for s in steps)]
    events.append(CompletedEvent(conversation_id=leg.cid, turn_id=leg.turn_id, response=response))
    leg.writer.write(
        Flush(
            steps=steps,
            usage=usage,
            events=events,
            deliveries=[passive(leg, PassiveEvent.TURN_COMPLETED, "Turn completed")],
            webhooks=[payloads.turn_completed(leg.cid, leg.turn_id, response, leg.config.batch_id)],
            turn_status=TurnStatus.COMPLETED,
            end=TurnEnd(response=response),
            conversation_status=ConversationStatus.IDLE,
        )
    )
    observe.turn_ended(leg, TurnStatus.COMPLETED)
    return response


def fail_turn(
    leg: Leg,
    message: str,
    *,
    code: str = "error",
    http_code: int = 0,
    extra: list[Step] | None = None,
) -> None:
    """Appends an error step and emits the Failed terminal."""
    steps = [*(extra or []), error_step(leg, message, http_code=http_code)]
    _renumber(leg, steps)
    events: list[EventBase] = [_step_event(leg, s) for s in steps]
    events.append(
        FailedEvent(conversation_id=leg.cid, turn_id=leg.turn_id, error=message, code=code)
    )
    leg.writer.write(
        Flush(
            deliveries=[passive(leg, PassiveEvent.TURN_FAILED, f"Turn failed: {message[:200]}")],
            webhooks=[payloads.turn_failed(leg.cid, leg.turn_id, message, leg.config.batch_id)],
            steps=steps,
            events=events,
            turn_status=TurnStatus.FAILED,
            end=TurnEnd(error=message),
            conversation_status=ConversationStatus.IDLE,
        )
    )
    observe.turn_ended(leg, TurnStatus.FAILED, code=code, error=message)


def cancel_turn(leg: Leg, *, partial: Step | None = None, reason: str = "aborted") -> None:
    """Ends the turn as cancelled, keeping what the user already saw of a partial answer."""
    steps = [partial] if partial is not None else []
    _renumber(leg, steps)
    events: list[EventBase] = [_step_event(leg, s) for s in steps]
    events.append(CancelledEvent(conversation_id=leg.cid, turn_id=leg.turn_id, reason=reason))
    leg.writer.write(
        Flush(
            steps=steps,
            events=events,
            turn_status=TurnStatus.CANCELLED,
            end=TurnEnd(error=reason),
            conversation_status=ConversationStatus.IDLE,
        )
    )
    observe.turn_ended(leg, TurnStatus.CANCELLED)


def passive(leg: Leg, event: PassiveEvent, title: str) -> DeliveryEntry:
    """The delivery of a passive notification about this turn."""
    return DeliveryEntry.passive(
        f"{leg.cid}.{leg.turn_id}-{event.value}",
        conversation_id=leg.cid,
        turn_id=leg.turn_id,
        event=event,
        title=title,
    )


def _renumber(leg: Leg, steps: list[Step]) -> None:
    base = _position(leg)
    for offset, step in enumerate(steps):
        step.step_index = base + offset

"""Keeping a batch's counts as its conversations park, resume and end.

The writer calls the hook after each flush that changes a conversation's status;
the batch's transition script is idempotent, so a repeated call (a retried leg)
changes nothing, and it dispatches queued items as running ones leave. A park or an end
frees the item's place under the cap, so it is moved once the leg has let its lease go:
the item it makes room for never runs beside it.
"""

from __future__ import annotations

from functools import partial

from shared.models.batches import BatchState
from shared.models.events import TurnStatus
from shared.models.steps import StepStatus, StepType
from shared.store.batches import BatchStore
from worker.flush import Flush
from worker.leg import Leg

__all__ = ["on_batch_flush"]

_STATES = {
    TurnStatus.WAITING_FOR_USER: BatchState.WAITING,
    TurnStatus.COMPLETED: BatchState.DONE,
    TurnStatus.FAILED: BatchState.FAILED,
    TurnStatus.CANCELLED: BatchState.CANCELLED,
}


def on_batch_flush(store: BatchStore, leg: Leg, flush: Flush) -> None:
    """Moves the conversation's batch item when the flush changed the turn's status."""
    batch_id = leg.config.batch_id
    status = flush.turn_status
    if batch_id is None or status is None:
        return
    if flush.resumes:
        store.transition(batch_id, leg.cid, BatchState.RUNNING)
    elif status in _STATES:
        state = _STATES[status]
        usage = leg.checkpoint.usage if state.is_terminal else None
        move = partial(store.transition, batch_id, leg.cid, state, usage, denied=_denied(flush))
        leg.lease.after_release(move)


def _denied(flush: Flush) -> bool:
    """Whether the turn that ends here had a tool call denied (its result says cancelled)."""
    response = flush.end.response if flush.end is not None else None
    return response is not None and any(
        step.type is StepType.TOOL_RESULT and step.status is StepStatus.CANCELED
        for step in response.steps
    )

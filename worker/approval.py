"""Parking on a notification, and continuing with the operator's decision.

A call that needs a person writes the notification, the checkpoint and the status
`waiting_for_user` in one flush, and the leg ends: no worker waits. When the
notification is resolved, a new leg (on any worker) reads the decision: Allow runs
the tool (with edited arguments, if given), Submit answers with the content, Deny
and expiry tell the model why, in a step that records a denial, not a result.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from shared.models.events import ConversationStatus, NotificationEvent, TurnStatus
from shared.models.notifications import (
    Allow,
    DeliveryEntry,
    Deny,
    Notification,
    NotificationKind,
    NotificationStatus,
    ResolutionKind,
    Submit,
)
from shared.models.steps import ToolCall
from shared.webhooks.payloads import approval_needed
from worker.flush import Flush
from worker.leg import Leg
from worker.tools import ToolOutcome, ToolRegistry
from worker.tools.ask_operator import ASK_OPERATOR, answer_schema

__all__ = ["Decision", "decision_for", "park"]


@dataclass(frozen=True)
class Decision:
    """What an operator decided about one call: run it (maybe with new arguments) or an outcome."""

    run_with: ToolCall | None = None
    outcome: ToolOutcome | None = None
    denied: bool = False
    sticky: str | None = None  # "conversation" or "batch": allow this tool from now on


def decision_for(leg: Leg, call: ToolCall) -> Decision | None:
    """The decision on a parked call, or None when the call has not been asked about yet."""
    nid = leg.checkpoint.approvals.get(call.id or call.name)
    if nid is None:
        return None
    claimed = leg.parked_note
    note = claimed if claimed is not None and claimed.id == nid else leg.notifications.get(nid)
    if note.status is NotificationStatus.CANCELLED or note.resolution is None:
        return Decision(
            outcome=ToolOutcome(ok=False, error=f"{call.name} was cancelled"), denied=True
        )
    resolution = note.resolution
    if isinstance(resolution, Deny):
        who = (
            "it expired" if note.status is NotificationStatus.EXPIRED else f"by {note.resolved_by}"
        )
        return Decision(
            outcome=ToolOutcome(ok=False, error=f"denied ({who}): {resolution.reason}"), denied=True
        )
    if isinstance(resolution, Submit):
        return Decision(outcome=ToolOutcome(ok=True, result=resolution.content))
    return _allowed(call, resolution)


def _allowed(call: ToolCall, allow: Allow) -> Decision:
    run_with = (
        call if allow.arguments is None else call.model_copy(update={"args": allow.arguments})
    )
    return Decision(run_with=run_with, sticky=allow.sticky)


def park(leg: Leg, registry: ToolRegistry, call: ToolCall) -> None:
    """Writes the notification and parks the turn, in one flush (plus its global indexes)."""
    note = _notification(leg, registry, call)
    leg.checkpoint.approvals[call.id or call.name] = note.id
    event = NotificationEvent(
        conversation_id=leg.cid,
        turn_id=leg.turn_id,
        notification_id=note.id,
        notification_kind=note.kind.value,
        status="pending",
        title=note.title,
    )
    leg.writer.write(
        Flush(
            turn_status=TurnStatus.WAITING_FOR_USER,
            checkpoint=leg.saved_checkpoint(),
            parked_on=note.id,
            conversation_status=ConversationStatus.WAITING_FOR_USER,
            notification=note,
            events=[event],
            deliveries=[DeliveryEntry.interaction(note)],
            webhooks=[approval_needed(note, leg.settings)],
        )
    )
    # Only now are the indexes and the global delivery (and the batch's count, written after
    # the flush) known to be in Redis; without this mark the reconciler checks them again.
    leg.notifications.index.mark_indexed([note.id])


def _notification(leg: Leg, registry: ToolRegistry, call: ToolCall) -> Notification:
    now = time.time()
    suffix = f"{leg.turn_id[:8]}{len(leg.checkpoint.approvals):03d}{int(now * 1000) % 100_000:05d}"
    base = {
        "id": f"{leg.cid}.{suffix}",
        "conversation_id": leg.cid,
        "turn_id": leg.turn_id,
        "batch_id": leg.config.batch_id,
        "kind": NotificationKind.INTERACTION,
        "tool_call": call,
        "created_at": now,
        "expires_at": now + _timeout_s(leg, registry, call.name),
    }
    if call.name == ASK_OPERATOR:
        question = str(call.args.get("question", "")) if isinstance(call.args, dict) else ""
        return Notification(
            **base,
            title="The agent asks a question",
            body=question,
            question=question,
            allowed=[ResolutionKind.SUBMIT, ResolutionKind.DENY],
            submit_schema=answer_schema(call.args),
        )
    return Notification(
        **base,
        title=f"Allow {call.name}?",
        body=f"The agent wants to run {call.name} with {json.dumps(call.args, ensure_ascii=False)}",
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        arguments_schema=registry.get(call.name).parameters,
    )


def _timeout_s(leg: Leg, registry: ToolRegistry, name: str) -> float:
    tool_timeout = registry.get(name).approval_timeout_s if name in registry.names() else None
    return float(tool_timeout or leg.config.approval_timeout_s or leg.settings.approval_timeout_s)

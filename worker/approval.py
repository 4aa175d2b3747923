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
from dataclasses import dataclass, replace
from typing import Any

from shared.models.events import ConversationStatus, NotificationEvent, TurnStatus
from shared.models.notifications import (
    EXPIRED_DENIAL,
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
from worker import observe
from worker.flush import Flush
from worker.leg import Leg
from worker.tools import ToolOutcome, ToolRegistry
from worker.tools.ask_operator import ASK_OPERATOR, answer_schema
from worker.tools.base import InputNeeded

__all__ = [
    "Decision",
    "decision_for",
    "file_notification",
    "park",
    "park_for_input",
    "question_note",
]


@dataclass(frozen=True)
class Decision:
    """What an operator decided about one call: run it (maybe with new arguments) or an outcome."""

    run_with: ToolCall | None = None
    outcome: ToolOutcome | None = None
    denied: bool = False
    sticky: str | None = None  # "conversation" or "batch": allow this tool from now on
    resumes: bool = False  # the call asked for input (InputNeeded): run it again with `answer`
    answer: dict[str, Any] | None = None  # the person's content; None: declined
    # for the metrics: allowed, allowed_with_edits, answered, denied, expired or cancelled,
    # and how long the request waited for it
    label: str = ""
    waited_s: float = 0.0
    approver: str = ""  # who decided ("system:expiry" for an expiry)
    requested_at: float = 0.0  # when the request was filed


def decision_for(leg: Leg, call: ToolCall) -> Decision | None:
    """The decision on a parked call, or None when the call has not been asked about yet."""
    nid = leg.checkpoint.approvals.get(call.id or call.name)
    if nid is None:
        return None
    claimed = leg.parked_note
    note = claimed if claimed is not None and claimed.id == nid else leg.notifications.get(nid)
    decision = _decision(note, call, input_call=call.id in leg.checkpoint.input_calls)
    waited_s = (note.resolved_at or time.time()) - note.created_at
    return replace(
        decision,
        waited_s=waited_s,
        approver=note.resolved_by or "",
        requested_at=note.created_at,
    )


def _decision(note: Notification, call: ToolCall, *, input_call: bool) -> Decision:
    if note.status is NotificationStatus.CANCELLED or note.resolution is None:
        return Decision(
            outcome=ToolOutcome(ok=False, error=f"{call.name} was cancelled"),
            denied=True,
            label="cancelled",
        )
    resolution = note.resolution
    expired = note.status is NotificationStatus.EXPIRED
    if input_call:
        content = resolution.content if isinstance(resolution, Submit) else None
        answer = content if isinstance(content, dict) else None
        label = "answered" if isinstance(resolution, Submit) else "expired" if expired else "denied"
        return Decision(run_with=call, resumes=True, answer=answer, label=label)
    if isinstance(resolution, Deny):
        how = EXPIRED_DENIAL if expired else f"denied (by {note.resolved_by})"
        return Decision(
            outcome=ToolOutcome(ok=False, error=f"{how}: {resolution.reason}"),
            denied=True,
            label="expired" if expired else "denied",
        )
    if isinstance(resolution, Submit):
        return Decision(outcome=ToolOutcome(ok=True, result=resolution.content), label="answered")
    return _allowed(call, resolution)


def _allowed(call: ToolCall, allow: Allow) -> Decision:
    if allow.arguments is None or allow.arguments == call.args:
        return Decision(run_with=call, sticky=allow.sticky, label="allowed")
    edited = call.model_copy(update={"args": allow.arguments})
    return Decision(run_with=edited, sticky=allow.sticky, label="allowed_with_edits")


def park_for_input(leg: Leg, call: ToolCall, need: InputNeeded) -> None:
    """Parks the call on its tool's question; the call is held for input in the ledger."""
    leg.tool_calls.hold_for_input(call.id, need.state)
    wait_s = float(leg.config.approval_timeout_s or leg.settings.approval_timeout_s)
    title = f"{call.name} asks for input"
    note = question_note(leg, call, title=title, question=need.question, schema=need.schema,
                         wait_s=wait_s, suffix=_suffix(leg, time.time()))  # fmt: skip
    leg.checkpoint.approvals[call.id] = note.id
    if call.id not in leg.checkpoint.input_calls:
        leg.checkpoint.input_calls.append(call.id)
    _park_on(leg, note)


def question_note(
    leg: Leg,
    call: ToolCall,
    *,
    title: str,
    question: str,
    schema: dict[str, Any],
    wait_s: float,
    suffix: str,
) -> Notification:
    """A question about a running call (Submit against `schema`, or Deny), open `wait_s`."""
    now = time.time()
    return Notification(
        id=f"{leg.cid}.{suffix}",
        conversation_id=leg.cid,
        turn_id=leg.turn_id,
        batch_id=leg.config.batch_id,
        kind=NotificationKind.INTERACTION,
        tool_call=call,
        created_at=now,
        expires_at=now + wait_s,
        title=title,
        body=question,
        question=question,
        allowed=[ResolutionKind.SUBMIT, ResolutionKind.DENY],
        submit_schema=schema,
    )


def park(leg: Leg, registry: ToolRegistry, call: ToolCall) -> None:
    """Writes the notification and parks the turn, in one flush (plus its global indexes)."""
    note = _notification(leg, registry, call)
    leg.checkpoint.approvals[call.id or call.name] = note.id
    _park_on(leg, note)


def _park_on(leg: Leg, note: Notification) -> None:
    """The turn waits on `note`: status, checkpoint and notification in one flush."""
    file_notification(
        leg,
        note,
        turn_status=TurnStatus.WAITING_FOR_USER,
        checkpoint=leg.saved_checkpoint(),
        parked_on=note.id,
        conversation_status=ConversationStatus.WAITING_FOR_USER,
    )
    observe.approval_requested(note.tool_name)


def file_notification(leg: Leg, note: Notification, **park: Any) -> None:
    """Files a new notification in the inbox: its record, event, deliveries and webhook in
    one fenced flush (with `park`'s fields, when the turn parks on it)."""
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
            notification=note,
            events=[event],
            deliveries=[DeliveryEntry.interaction(note)],
            webhooks=[approval_needed(note, leg.settings)],
            **park,
        )
    )
    # Only now are the indexes and the global delivery (and the batch's count, written after
    # the flush) known to be in Redis; without this mark the reconciler checks them again.
    leg.notifications.index.mark_indexed([note.id])


def _notification(leg: Leg, registry: ToolRegistry, call: ToolCall) -> Notification:
    now = time.time()
    base = {
        "id": f"{leg.cid}.{_suffix(leg, now)}",
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


def _suffix(leg: Leg, now: float) -> str:
    """A notification id's suffix: unique in the turn (one more for each park)."""
    return f"{leg.turn_id[:8]}{len(leg.checkpoint.approvals):03d}{int(now * 1000) % 100_000:05d}"


def _timeout_s(leg: Leg, registry: ToolRegistry, name: str) -> float:
    tool_timeout = registry.get(name).approval_timeout_s if name in registry.names() else None
    return float(tool_timeout or leg.config.approval_timeout_s or leg.settings.approval_timeout_s)

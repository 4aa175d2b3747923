"""What each webhook event says: one builder per kind, from the record that changed. Pure.

Every payload carries ids to look things up and a one-line `text` a chat tool shows as it
is; the approval-needed one links to the approval page under `SIGNOFF_PUBLIC_URL`.
Model output is cut to `TEXT_CHARS`: a payload is a notice, the API has the rest.
"""

from __future__ import annotations

from typing import Any

from shared.models.events import ChatResponse
from shared.models.notifications import Notification, NotificationStatus
from shared.models.webhooks import WebhookEvent, WebhookEventKind
from shared.settings import Settings

__all__ = [
    "approval_needed",
    "approval_settled",
    "batch_finished",
    "public_base",
    "turn_completed",
    "turn_failed",
]

TEXT_CHARS = 2_000


def public_base(settings: Settings) -> str:
    """Where people reach the web UI, without a trailing slash."""
    configured = settings.public_url.rstrip("/")
    return configured or f"http://{settings.web_host}:{settings.web_port}"


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def approval_needed(note: Notification, settings: Settings) -> WebhookEvent:
    url = f"{public_base(settings)}/approvals/{note.id}"
    return WebhookEvent(
        event_id=f"approval.needed:{note.id}",
        kind=WebhookEventKind.APPROVAL_NEEDED,
        data={
            "notification_id": note.id,
            "conversation_id": note.conversation_id,
            "turn_id": note.turn_id,
            "batch_id": note.batch_id,
            "tool": note.tool_name,
            "title": note.title,
            "body": _cut(note.body),
            "expires_at": note.expires_at,
            "url": url,
            "text": f"Approval needed: {note.title} {url}",
        },
    )


def approval_settled(
    note: Notification, status: NotificationStatus, actor: str, at: float, resolution: str
) -> WebhookEvent | None:
    """approval.resolved or approval.expired; None for a cancelled one (its turn ended)."""
    if status is NotificationStatus.EXPIRED:
        kind, verb = WebhookEventKind.APPROVAL_EXPIRED, "expired"
    elif status is NotificationStatus.RESOLVED:
        kind, verb = WebhookEventKind.APPROVAL_RESOLVED, f"{resolution or 'resolved'} by {actor}"
    else:
        return None
    return WebhookEvent(
        event_id=f"{kind.value}:{note.id}",
        kind=kind,
        data={
            "notification_id": note.id,
            "conversation_id": note.conversation_id,
            "turn_id": note.turn_id,
            "batch_id": note.batch_id,
            "tool": note.tool_name,
            "status": status.value,
            "resolution": resolution or None,
            "resolved_by": actor,
            "resolved_at": at,
            "text": f"{note.title}: {verb}",
        },
    )


def turn_completed(
    cid: str, turn_id: str, response: ChatResponse, batch_id: str | None
) -> WebhookEvent:
    usage = response.usage_metadata
    return WebhookEvent(
        event_id=f"turn.completed:{cid}:{turn_id}",
        kind=WebhookEventKind.TURN_COMPLETED,
        data={
            "conversation_id": cid,
            "turn_id": turn_id,
            "batch_id": batch_id,
            "response": _cut(response.text),
            "structured_output": response.structured_output,
            "usage": usage.model_dump(mode="json") if usage is not None else None,
            "text": f"Turn completed in {cid}: {_cut(response.text)[:200]}",
        },
    )


def turn_failed(cid: str, turn_id: str, error: str, batch_id: str | None) -> WebhookEvent:
    return WebhookEvent(
        event_id=f"turn.failed:{cid}:{turn_id}",
        kind=WebhookEventKind.TURN_FAILED,
        data={
            "conversation_id": cid,
            "turn_id": turn_id,
            "batch_id": batch_id,
            "error": _cut(error),
            "text": f"Turn failed in {cid}: {error[:200]}",
        },
    )


def batch_finished(
    batch_id: str, status: str, counts: dict[str, Any], *, retries: int = 0
) -> WebhookEvent:
    """A batch whose items all ended: `status` is `done`, or `cancelled`. A batch retried
    `retries` times finishes once more after each: each end is its own event."""
    how = "was cancelled" if status == "cancelled" else "finished"
    after = f":retry-{retries}" if retries else ""
    return WebhookEvent(
        event_id=f"batch.finished:{batch_id}{after}",
        kind=WebhookEventKind.BATCH_FINISHED,
        data={
            "batch_id": batch_id,
            "status": status,
            "counts": counts,
            "retries": retries,
            "text": f"Batch {batch_id} {how}" + (f" (after retry {retries})" if retries else ""),
        },
    )

"""The audit log of resolutions, newest first, a page at a time (``before`` an entry id)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from shared.errors import CorruptRecord
from shared.notifications import NotificationStore
from webui.api.models import AuditEntry, AuditList

__all__ = ["read_audit"]


def _json(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # shown as it was written rather than hidden


def _entry(raw: dict[str, Any]) -> AuditEntry:
    try:
        return AuditEntry(
            id=raw["id"],
            notification_id=raw.get("notification_id", ""),
            conversation_id=raw.get("conversation_id", ""),
            status=raw.get("status", "resolved"),
            actor=raw.get("actor", ""),
            at=float(raw.get("at") or 0),
            kind=raw.get("kind") or None,
            tool=raw.get("tool") or None,
            arguments_before=_json(raw.get("arguments_before")),
            arguments_after=_json(raw.get("arguments_after")),
            reason=raw.get("reason") or None,
        )
    except (KeyError, ValueError, ValidationError) as exc:
        raise CorruptRecord(f"audit entry {raw.get('id')} does not parse") from exc


def read_audit(store: NotificationStore, *, before: str | None, limit: int) -> AuditList:
    """Up to `limit` entries older than `before` (an entry id; None: from the newest)."""
    found = store.audit(count=limit + 1, before="+" if before is None else f"({before}")
    entries = [_entry(raw) for raw in found[:limit]]
    more = len(found) > limit
    return AuditList(items=entries, next_before=entries[-1].id if more and entries else None)

"""The audit log of resolutions, newest first, a page at a time (``before`` an entry id)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from shared.errors import CorruptRecord
from shared.store.notifications import NotificationStore
from webui.api.models import AuditEntry, AuditList
from webui.stream_ids import parse_stream_id
from webui.unreadable import skip_unreadable

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


def _entries(found: list[dict[str, Any]]) -> list[AuditEntry]:
    entries = []
    for raw in found:
        try:
            entries.append(_entry(raw))
        except CorruptRecord as exc:
            skip_unreadable(exc)
    return entries


def read_audit(store: NotificationStore, *, before: str | None, limit: int) -> AuditList:
    """Up to `limit` entries older than `before` (an entry id; None: from the newest).

    Nothing is older than ``0-0`` (Redis refuses the range ``(0-0``), so that page is empty.
    An entry that does not parse is left out (and logged); paging goes on past it.
    """
    if before is not None and parse_stream_id(before) == (0, 0):
        return AuditList(items=[], next_before=None)
    found = store.audit(count=limit + 1, before="+" if before is None else f"({before}")
    more = len(found) > limit
    return AuditList(
        items=_entries(found[:limit]), next_before=found[limit - 1]["id"] if more else None
    )

"""The audit log of resolutions, newest first, a page at a time (``before`` an entry id)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

from shared.errors import CorruptRecord
from shared.store.notifications import NotificationStore
from webui.api.models import AuditEntry, AuditList
from webui.stream_ids import parse_stream_id
from webui.unreadable import skip_unreadable

__all__ = ["SCAN_LIMIT", "AuditDecision", "AuditFilter", "arguments_diff", "read_audit"]

SCAN_LIMIT = 10_000  # entries a filtered page reads at most
_CHUNK = 200


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
            batch_id=raw.get("batch_id") or None,
            status=raw.get("status", "resolved"),
            actor=raw.get("actor", ""),
            at=float(raw.get("at") or 0),
            kind=raw.get("kind") or None,
            tool=raw.get("tool") or None,
            arguments_before=_json(raw.get("arguments_before")),
            arguments_after=_json(raw.get("arguments_after")),
            reason=raw.get("reason") or None,
            scope=raw.get("scope") or None,
            claim=raw.get("claim") or None,
            claimed_by=raw.get("claimed_by") or None,
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


class AuditDecision(str, Enum):
    """What an audit entry records: a decision, or how a request ended without one."""

    ALLOW = "allow"
    DENY = "deny"
    SUBMIT = "submit"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CLAIM = "claim"
    RELEASE = "release"


@dataclass(frozen=True)
class AuditFilter:
    """Entries by who resolved, which tool, which batch, and the decision (or outcome)."""

    actor: str | None = None
    tool: str | None = None
    batch_id: str | None = None
    decision: str | None = None  # allow, deny, submit; or expired, cancelled; claim, release

    @property
    def empty(self) -> bool:
        return not (self.actor or self.tool or self.batch_id or self.decision)

    def matches(self, entry: AuditEntry) -> bool:
        decision = (entry.claim or entry.kind or entry.status).value
        return (
            (not self.actor or entry.actor == self.actor)
            and (not self.tool or entry.tool == self.tool)
            and (not self.batch_id or entry.batch_id == self.batch_id)
            and (not self.decision or decision == self.decision)
        )


def read_audit(
    store: NotificationStore,
    *,
    before: str | None,
    limit: int,
    where: AuditFilter | None = None,
) -> AuditList:
    """Up to `limit` entries older than `before` (an entry id; None: from the newest).

    Nothing is older than ``0-0`` (Redis refuses the range ``(0-0``), so that page is empty.
    An entry that does not parse is left out (and logged); paging goes on past it. With a
    filter, at most `SCAN_LIMIT` entries are read for one page; `next_before` then says
    where the next page goes on.
    """
    where = where or AuditFilter()
    if before is not None and parse_stream_id(before) == (0, 0):
        return AuditList(items=[], next_before=None)
    if where.empty:
        found = store.audit(count=limit + 1, before="+" if before is None else f"({before}")
        more = len(found) > limit
        return AuditList(
            items=_entries(found[:limit]), next_before=found[limit - 1]["id"] if more else None
        )
    return _filtered(store, before, limit, where)


def _filtered(
    store: NotificationStore, before: str | None, limit: int, where: AuditFilter
) -> AuditList:
    items: list[AuditEntry] = []
    cursor, scanned = "+" if before is None else f"({before}", 0
    while scanned < SCAN_LIMIT:
        found = store.audit(count=_CHUNK, before=cursor)
        for raw in found:
            scanned += 1
            items += [e for e in _entries([raw]) if where.matches(e)]
            if len(items) == limit:
                return AuditList(items=items, next_before=raw["id"])
        if len(found) < _CHUNK:
            return AuditList(items=items, next_before=None)
        cursor = f"({found[-1]['id']}"
    return AuditList(items=items, next_before=cursor[1:])


def arguments_diff(before: Any, after: Any) -> list[tuple[str, str]]:
    """The edited arguments as lines of pretty JSON, each marked ``-``, ``+`` or `` ``."""
    old, new = (json.dumps(v, indent=2, sort_keys=True).splitlines() for v in (before, after))
    return [(line[0], line[2:]) for line in difflib.ndiff(old, new) if line[0] in "-+ "]

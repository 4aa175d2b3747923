"""Listing conversations a page at a time, newest first, optionally by status.

A record that does not parse is left out of its page (and logged), not allowed to fail it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models.events import ConversationStatus
from shared.store.conversations import ConversationRecord, ConversationStore
from webui.unreadable import skip_unreadable

__all__ = ["ConversationPage", "list_conversations"]


@dataclass(frozen=True)
class ConversationPage:
    records: list[ConversationRecord]
    offset: int
    limit: int
    total: int | None  # known without a filter only
    next_offset: int | None


def list_conversations(
    store: ConversationStore, *, offset: int, limit: int, status: ConversationStatus | None
) -> ConversationPage:
    if status is None:
        total: int | None = store.count()
        ids = store.ids(offset=offset, limit=limit)
        more = offset + limit < (total or 0)
    else:
        total = None
        ids, more = store.ids_by_status(
            status, offset=offset, limit=limit, on_corrupt=skip_unreadable
        )
    return ConversationPage(
        records=store.records(ids, on_corrupt=skip_unreadable),
        offset=offset,
        limit=limit,
        total=total,
        next_offset=offset + limit if more else None,
    )

"""The inbox's rows: each notification with a one-line summary and its batch item.

The item id lives in the item conversation's metadata (`batch_item`), read for a whole page
in one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models.notifications import Notification
from shared.store.conversations import ConversationStore
from webui.summaries import summarize_request
from webui.unreadable import skip_unreadable

__all__ = ["InboxRow", "inbox_rows"]


@dataclass(frozen=True)
class InboxRow:
    note: Notification
    summary: str
    item_id: str | None  # the batch item it belongs to, when it is one


def inbox_rows(store: ConversationStore, notes: list[Notification]) -> list[InboxRow]:
    batched = sorted({note.conversation_id for note in notes if note.batch_id})
    items = {
        record.conversation_id: record.config.metadata.get("batch_item")
        for record in store.records(batched, on_corrupt=skip_unreadable)
    }
    return [
        InboxRow(note, summarize_request(note), items.get(note.conversation_id)) for note in notes
    ]

"""The inbox's rows: each notification with its title, a one-line summary and its batch item.

The item id lives in the item conversation's metadata (`batch_item`), read for a whole page
in one round trip; the title arguments chosen per tool are read once per request (`titles`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.models.notifications import Notification
from shared.request_titles import default_title_arguments
from shared.store.conversations import ConversationStore
from webui.approvals.titles import chosen_titles, place, title
from webui.summaries import summarize_request
from webui.unreadable import skip_unreadable

__all__ = ["InboxRow", "inbox_rows"]


@dataclass(frozen=True)
class InboxRow:
    note: Notification
    title: str  # what it would do: the tool and its telling arguments
    summary: str
    item_id: str | None  # the batch item it belongs to, when it is one
    target: str  # the value of its first title argument (a recipient, a path), or ""

    @property
    def place(self) -> str:
        """Where it sits: "item 17 of batch ab12cd34", or its conversation."""
        return place(self.note, self.item_id)


def _target(note: Notification, chosen: Mapping[str, Sequence[str]]) -> str:
    call = note.tool_call
    if call is None or note.question is not None:
        return ""
    names = [n for n in chosen.get(call.name, ()) if n in call.args] or default_title_arguments(
        call.args
    )
    value = call.args.get(names[0]) if names else None
    return f"{names[0]}: {value}"[:80] if isinstance(value, str) else ""


def inbox_rows(store: ConversationStore, notes: list[Notification]) -> list[InboxRow]:
    batched = sorted({note.conversation_id for note in notes if note.batch_id})
    items = {
        record.conversation_id: record.config.metadata.get("batch_item")
        for record in store.records(batched, on_corrupt=skip_unreadable)
    }
    chosen = chosen_titles()
    return [
        InboxRow(
            note,
            title(note),
            summarize_request(note),
            items.get(note.conversation_id),
            _target(note, chosen),
        )
        for note in notes
    ]

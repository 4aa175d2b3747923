"""Listing conversations a page at a time, newest first, by listed status and by search text.

A conversation is listed as `failed` when its last turn failed and nothing runs since; the
other listed statuses are its stored ones. A filtered page walks the index newest first, a
chunk of records at a time, and stops after `SCAN_LIMIT` records so that no query can make a
page read the whole index. A record that does not parse is left out (and logged), not
allowed to fail its page.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from shared.store.conversations import ConversationRecord, ConversationStore
from webui.unreadable import skip_unreadable

__all__ = [
    "SCAN_LIMIT",
    "ConversationFilter",
    "ConversationPage",
    "ListedStatus",
    "list_conversations",
    "scan",
]

SCAN_LIMIT = 20_000  # records a filtered page reads at most
_CHUNK = 200


class IdPage(Protocol):
    """A page of an index of conversation ids (`ConversationStore.ids`, `failed_ids`)."""

    def __call__(self, *, offset: int, limit: int) -> list[str]: ...


class ListedStatus(str, Enum):
    """What a list shows and filters by: the stored status, or `failed`."""

    IDLE = "idle"
    RUNNING = "running"
    WAITING_FOR_USER = "waiting_for_user"
    CLOSED = "closed"
    FAILED = "failed"

    @classmethod
    def of(cls, record: ConversationRecord) -> ListedStatus:
        return cls.FAILED if record.failed else cls(record.status.value)


@dataclass(frozen=True)
class ConversationFilter:
    """A listed status and a search text (in the title, the id, the metadata values)."""

    status: ListedStatus | None = None
    search: str = ""

    @property
    def empty(self) -> bool:
        return self.status is None and not self.search

    def matches(self, record: ConversationRecord) -> bool:
        if self.status is not None and ListedStatus.of(record) is not self.status:
            return False
        if not self.search:
            return True
        needle = self.search.casefold()
        haystack = [record.title, record.conversation_id, *record.config.metadata.values()]
        return any(needle in text.casefold() for text in haystack)


@dataclass(frozen=True)
class ConversationPage:
    records: list[ConversationRecord]
    offset: int
    limit: int
    total: int | None  # known without a filter only
    next_offset: int | None
    truncated: bool = False  # the filter stopped after SCAN_LIMIT records


def list_conversations(
    store: ConversationStore,
    *,
    offset: int,
    limit: int,
    where: ConversationFilter | None = None,
    scan_limit: int = SCAN_LIMIT,
) -> ConversationPage:
    where = where or ConversationFilter()
    if where.empty:
        total = store.count()
        ids = store.ids(offset=offset, limit=limit)
        return ConversationPage(
            records=store.records(ids, on_corrupt=skip_unreadable),
            offset=offset,
            limit=limit,
            total=total,
            next_offset=offset + limit if offset + limit < total else None,
        )
    matched, truncated = scan(store, where, wanted=offset + limit + 1, scan_limit=scan_limit)
    return ConversationPage(
        records=matched[offset : offset + limit],
        offset=offset,
        limit=limit,
        total=None,
        next_offset=offset + limit if len(matched) > offset + limit else None,
        truncated=truncated,
    )


def scan(
    store: ConversationStore,
    where: ConversationFilter,
    *,
    wanted: int,
    scan_limit: int = SCAN_LIMIT,
    ids: IdPage | None = None,
) -> tuple[list[ConversationRecord], bool]:
    """Records matching `where`, in the order of `ids` (by default the conversations index,
    newest first), until `wanted` matched or `scan_limit` were read; and whether it stopped
    at the limit."""
    page = ids or store.ids
    matched: list[ConversationRecord] = []
    position = 0
    while len(matched) < wanted:
        if position >= scan_limit:
            return matched, True
        chunk = page(offset=position, limit=min(_CHUNK, scan_limit - position))
        if not chunk:
            break
        matched += [r for r in store.records(chunk, on_corrupt=skip_unreadable) if where.matches(r)]
        position += len(chunk)
    return matched, False

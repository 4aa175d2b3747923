"""Listing conversations a page at a time, newest first, optionally by status."""

from __future__ import annotations

from dataclasses import dataclass

from shared.conversations import ConversationRecord, ConversationStore
from shared.errors import NotFound
from shared.events import ConversationStatus
from shared.redis_client import storage_errors

__all__ = ["ConversationPage", "list_conversations"]

_SCAN_CHUNK = 500


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
        total = store.count()
        ids = store.ids(offset=offset, limit=limit)
        more = offset + limit < total
    else:
        total = None
        ids, more = _filtered_ids(store, status, offset=offset, limit=limit)
    return ConversationPage(
        records=_records(store, ids),
        offset=offset,
        limit=limit,
        total=total,
        next_offset=offset + limit if more else None,
    )


def _filtered_ids(
    store: ConversationStore, status: ConversationStatus, *, offset: int, limit: int
) -> tuple[list[str], bool]:
    """Walks ids newest first, reading statuses a chunk at a time (one round trip each)."""
    matched: list[str] = []
    position = 0
    while len(matched) <= offset + limit:
        chunk = store.ids(offset=position, limit=_SCAN_CHUNK)
        if not chunk:
            break
        matched += [
            cid for cid, s in zip(chunk, _statuses(store, chunk), strict=True) if s == status.value
        ]
        position += len(chunk)
    return matched[offset : offset + limit], len(matched) > offset + limit


def _statuses(store: ConversationStore, ids: list[str]) -> list[str | None]:
    # Only the status field of each conversation hash, pipelined (the store reads whole records).
    with storage_errors("listing conversations"), store.client.pipeline(transaction=False) as pipe:
        for cid in ids:
            pipe.hget(store.keys.conversation(cid), "status")
        return [None if s is None else str(s) for s in pipe.execute()]


def _records(store: ConversationStore, ids: list[str]) -> list[ConversationRecord]:
    records = []
    for cid in ids:
        try:
            records.append(store.get(cid))
        except NotFound:
            continue  # removed since the ids were read
    return records

"""The inbox indexes: where a pending notification is filed, and taking it out again.

A parked notification is filed in the inbox (`pending`), its filters (tool, batch,
conversation), the deadlines and `all`, and delivered on the global stream. Those keys
are outside its conversation's slot, so the park writes them after its script, in the
same round trip; when a Redis failure cuts that round trip short, the reconciler files
it again. A settled notification is taken out of every pending index, the inbox's own
entry last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from shared.models.notifications import Notification
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = ["INDEXED_FIELD", "InboxIndex", "index_commands"]

# A field of the notification's hash, set once the park's writes outside its
# conversation's slot (indexes, global delivery, batch count) are known to be in Redis.
INDEXED_FIELD = "indexed"

IndexEntries = list[tuple[str, dict[str, float]]]


def index_commands(keys: KeySpace, note: Notification) -> IndexEntries:
    """The global index entries of a pending notification: (zset key, {id: score})."""
    entries = [
        (keys.notifications_pending(), {note.id: note.created_at}),
        (keys.notifications_all(), {note.id: note.created_at}),
    ]
    if note.tool_name:
        entries.append(
            (keys.notifications_pending_by("tool", note.tool_name), {note.id: note.created_at})
        )
    if note.batch_id:
        entries.append(
            (keys.notifications_pending_by("batch", note.batch_id), {note.id: note.created_at})
        )
    entries.append(
        (
            keys.notifications_pending_by("conversation", note.conversation_id),
            {note.id: note.created_at},
        )
    )
    if note.expires_at is not None:
        entries.append((keys.notification_deadlines(), {note.id: note.expires_at}))
    return entries


def facets(keys: KeySpace, note: Notification) -> list[str]:
    """The inbox's filter indexes that hold `note` while it is pending."""
    whole = {keys.notifications_pending(), keys.notifications_all(), keys.notification_deadlines()}
    return [key for key, _ in index_commands(keys, note) if key not in whole]


def queue_unindex(pipe: Any, keys: KeySpace, nid: str, facet_keys: list[str]) -> None:
    """Queues the removal of `nid` from its filters, the deadlines, then the inbox itself.

    The inbox's own entry goes last: Redis applies a round trip's commands in order, so
    an id still in the inbox is how the reconciler finds a clean-up that was cut short.
    """
    for key in facet_keys:
        pipe.zrem(key, nid)
    pipe.zrem(keys.notification_deadlines(), nid)
    pipe.zrem(keys.notifications_pending(), nid)


class InboxIndex:
    """Checks, restores and removes the index entries of notifications."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def missing(self, notes: list[Notification]) -> dict[str, IndexEntries]:
        """For each of `notes`, the index entries it lacks (none: not in the result)."""
        wanted = [(note.id, entry) for note in notes for entry in index_commands(self.keys, note)]
        with (
            storage_errors("checking the inbox indexes"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for nid, (key, _) in wanted:
                pipe.zscore(key, nid)
            scores = pipe.execute()
        lacking: dict[str, IndexEntries] = {}
        for (nid, entry), score in zip(wanted, scores, strict=True):
            if score is None:
                lacking.setdefault(nid, []).append(entry)
        return lacking

    def restore(self, entries: IndexEntries) -> None:
        """Writes index entries again (ZADD of a member already there changes nothing)."""
        with (
            storage_errors("restoring the inbox indexes"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for key, members in entries:
                pipe.zadd(key, members)
            pipe.execute()

    def unindex(self, notes: list[Notification], *, missing: Sequence[str] = ()) -> list[str]:
        """Drops settled notifications (and ids without a record) from every pending index.

        Returns the ids that were in at least one of them.
        """
        if not notes and not missing:
            return []
        queued: list[tuple[str, int]] = []  # (id, how many commands)
        with (
            storage_errors("dropping settled notifications from the inbox"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for note in notes:
                note_facets = facets(self.keys, note)
                queue_unindex(pipe, self.keys, note.id, note_facets)
                queued.append((note.id, len(note_facets) + 2))
            for nid in missing:
                cid = nid.rpartition(".")[0]
                by_conversation = self.keys.notifications_pending_by("conversation", cid)
                queue_unindex(pipe, self.keys, nid, [by_conversation])
                queued.append((nid, 3))
            removed = pipe.execute()
        dropped, at = [], 0
        for nid, count in queued:
            if any(removed[at : at + count]):
                dropped.append(nid)
            at += count
        return dropped

    def mark_indexed(self, nids: Sequence[str]) -> None:
        """Records that these parked notifications have all their entries and deliveries."""
        with (
            storage_errors("marking notifications indexed"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for nid in nids:
                pipe.hset(self.keys.notification(nid), INDEXED_FIELD, "1")
            pipe.execute()

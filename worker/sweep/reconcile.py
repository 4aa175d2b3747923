"""The reconciler: the inbox and the delivery streams agree with the notification records.

A park writes the conversation's status, `parked_on` and the notification in one script;
the inbox indexes, the global delivery and the batch's count follow outside it (they are
not in the conversation's slot), and a Redis failure between the two loses them: an
approval no one sees and nothing expires. So each sweep reads one page of the
conversations index (a cursor in Redis carries it through the whole index, pass after
pass) and files again what a parked conversation's pending notification lacks. A park
marks its notification once all its writes returned; an unmarked one, or one with an
index entry missing, also has its deliveries checked, and added where they are missing.

A settled notification is dropped from the pending indexes, and a conversation still
parked on one gets its `advance`. A second walk, over the inbox itself, drops the entries
of notifications that are no longer pending: a resolver that died before its clean-up,
whose audit entry is written then if it is missing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.errors import InvalidInput
from shared.models.batches import BatchState
from shared.models.events import ConversationStatus
from shared.models.notifications import DeliveryEntry, Notification, NotificationStatus
from shared.settings import Settings
from shared.store.batches import BatchStore
from shared.store.connection import storage_errors
from shared.store.inbox_index import InboxIndex
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from shared.store.notifications import AUDIT_MAXLEN, NotificationStore, audit_entry
from worker.cursor import ZsetCursor

__all__ = ["Reconciled", "Reconciler"]

log = logging.getLogger(__name__)

PAGE = 2_000  # conversations read per pass: one HMGET each, in one round trip
INBOX_PAGE = 1_000  # inbox entries read per pass: one HGET each
GRACE_S = 10.0  # a park younger than this may still have its writes in flight
LOCK_MS = 120_000  # how long a sweep that died holding the lock keeps others from reconciling
STREAM_PAGE = 500  # delivery entries read per round trip when looking for one
CLOCK_SLACK_MS = 60_000  # how far a process's clock (created_at) may be from Redis's (entry ids)
# A field of the notification's hash: its lost audit entry was written again (by one sweep).
REAUDITED_FIELD = "reaudited"

_UNLOCK = LuaScript("worker", "sweep_unlock.lua", keys=["lock"], args=["token"])


@dataclass
class Reconciled:
    """What one pass repaired, by notification or conversation id."""

    restored: list[str] = field(default_factory=list)  # filed again: indexes, batch count
    redelivered: list[str] = field(default_factory=list)  # delivery added to a stream again
    dropped: list[str] = field(default_factory=list)  # settled: out of the pending indexes
    reaudited: list[str] = field(default_factory=list)  # settled: lost audit entry written
    advanced: list[str] = field(default_factory=list)  # parked on a settled one: `advance` sent


class Reconciler:
    """One bounded pass per sweep over parked conversations and over the inbox."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        *,
        batches: BatchStore,
        send_advance: Callable[[str], None],
        page: int = PAGE,
        inbox_page: int = INBOX_PAGE,
        grace_s: float = GRACE_S,
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.notifications = NotificationStore(client, keys, settings)
        self.index = InboxIndex(client, keys)
        self.batches = batches
        self.send_advance = send_advance
        self.page = page
        self.inbox_page = inbox_page
        self.grace_s = grace_s

    def run(self) -> Reconciled:
        """One pass, unless another sweep is reconciling right now."""
        report = Reconciled()
        token = uuid.uuid4().hex
        with storage_errors("taking the reconciler's lock"):
            if not self.client.set(self.keys.reconcile_lock(), token, nx=True, px=LOCK_MS):
                return report
        try:
            self._parked(report)
            self._inbox(report)
        finally:
            with storage_errors("releasing the reconciler's lock"):
                _UNLOCK(self.client, [self.keys.reconcile_lock()], [token])
        return report

    # Parked conversations

    def _parked(self, report: Reconciled) -> None:
        waiting: dict[str, bool] = {}
        for index in self.keys.every_shard(self.keys.conversations):  # a page of each shard
            waiting |= self._waiting(ZsetCursor(self.client, self.keys, index).next_page(self.page))
        found = self.notifications.records(list(waiting))
        settled = [n for n in found.notes if n.status is not NotificationStatus.PENDING]
        self.finish(settled, [], report)
        for note in settled:
            if not waiting[note.id]:  # no worker holds the conversation
                self.send_advance(note.conversation_id)
                report.advanced.append(note.conversation_id)
        young = time.time() - self.grace_s
        pending = [
            n
            for n in found.notes
            if n.status is NotificationStatus.PENDING and n.created_at <= young
        ]
        self._restore(pending, found.indexed, report)

    def _waiting(self, cids: list[str]) -> dict[str, bool]:
        """Notification id -> whether its conversation is leased, for parked conversations."""
        with (
            storage_errors("reading parked conversations"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in cids:
                pipe.hmget(self.keys.conversation(cid), ["status", "parked_on"])
                pipe.exists(self.keys.lease(cid))
            replies = pipe.execute()
        parked: dict[str, bool] = {}
        for (status, nid), leased in zip(replies[0::2], replies[1::2], strict=True):
            if status == ConversationStatus.WAITING_FOR_USER.value and nid:
                parked[str(nid)] = bool(leased)
        return parked

    def _restore(self, notes: list[Notification], indexed: set[str], report: Reconciled) -> None:
        """Files again what pending notes lack; checks deliveries of the unsure ones."""
        lacking = self.index.missing(notes)
        unsure = [n for n in notes if n.id in lacking or n.id not in indexed]
        if not unsure:
            return
        self.index.restore([entry for entries in lacking.values() for entry in entries])
        report.redelivered += self._redeliver(unsure)
        # A resolution between our read and our writes may have cleaned up before them.
        again = self.notifications.records([n.id for n in unsure])
        still = [n for n in again.notes if n.status is NotificationStatus.PENDING]
        self.index.unindex([n for n in again.notes if n.status is not NotificationStatus.PENDING])
        for note in still:
            if note.batch_id:
                self.batches.transition(note.batch_id, note.conversation_id, BatchState.WAITING)
        self.index.mark_indexed([n.id for n in still])
        report.restored += [n.id for n in unsure if n.id in lacking]
        for nid in set(report.restored) | set(report.redelivered):
            log.warning("notification %s: filed in the inbox or delivered again", nid)

    # Deliveries

    def _redeliver(self, notes: list[Notification]) -> list[str]:
        """Adds each note's delivery to the streams that lack it; returns the ids added."""
        by_conversation: dict[str, list[Notification]] = defaultdict(list)
        by_shard: dict[int, list[Notification]] = defaultdict(list)
        for note in notes:
            by_conversation[note.conversation_id].append(note)
            by_shard[self.keys.shard_of(note.conversation_id)].append(note)
        missing = []
        for shard, group in by_shard.items():
            stream = self.keys.notification_stream(shard)
            missing += [(stream, n) for n in self._lacking(group, stream)]
        for cid, group in by_conversation.items():
            stream = self.keys.conversation_notifications(cid)
            missing += [(stream, n) for n in self._lacking(group, stream)]
        with (
            storage_errors("adding notification deliveries"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for stream, note in missing:
                pipe.xadd(
                    stream,
                    DeliveryEntry.interaction(note).fields(),  # type: ignore[arg-type]
                    maxlen=self.settings.stream_maxlen,
                    approximate=True,
                )
            pipe.execute()
        return [note.id for _, note in missing]

    def _lacking(self, notes: list[Notification], stream: str) -> list[Notification]:
        """Those of `notes` with no delivery on `stream`."""
        since = min(n.created_at for n in notes)
        seen = self._seen(stream, {n.id for n in notes}, since, event="interaction")
        return [n for n in notes if n.id not in seen]

    def _seen(
        self, stream: str, wanted: set[str], since: float, *, event: str = "", settled: bool = False
    ) -> set[str]:
        """Those of `wanted` that have an entry on `stream` (of `event`, if given; with
        `settled`, not one of a request still pending: a claim, an allow short of a quorum)
        since then."""
        start = f"{max(int(since * 1000) - CLOCK_SLACK_MS, 0)}-0"
        seen: set[str] = set()
        with storage_errors(f"reading {stream}"):
            while wanted - seen:
                entries: Any = self.client.xrange(stream, min=start, max="+", count=STREAM_PAGE)
                for _, fields in entries:
                    if (
                        fields.get("notification_id") in wanted
                        and (not event or fields.get("event") == event)
                        and not (settled and fields.get("status") == "pending")
                    ):
                        seen.add(fields["notification_id"])
                if len(entries) < STREAM_PAGE:
                    break
                start = f"({entries[-1][0]}"
        return seen

    # Settled notifications

    def finish(
        self, settled: list[Notification], missing: list[str], report: Reconciled | None = None
    ) -> None:
        """Completes clean-ups a resolver left undone: its lost audit entry, then the indexes.

        A clean-up takes the inbox entry out last, so a notification settled longer than
        the grace ago and still in the inbox was cut short: its audit entry may be lost.
        One settled within the grace is left in the inbox: its entry there is the only
        sign, for a later pass, that its resolver may have died before auditing it.
        """
        report = report if report is not None else Reconciled()
        old = [n for n in settled if not self._young(n)]
        self._reaudit(self._interrupted(old), report)
        report.dropped += self.index.unindex(old, missing=missing)

    def _young(self, note: Notification) -> bool:
        """Settled within the grace: its resolver may still be writing its clean-up."""
        return note.resolved_at is not None and note.resolved_at > time.time() - self.grace_s

    def _interrupted(self, settled: list[Notification]) -> list[Notification]:
        notes = [n for n in settled if n.resolved_at is not None]
        with (
            storage_errors("reading the inbox"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for note in notes:
                pipe.zscore(self.keys.notifications_pending(), note.id)
            scores = pipe.execute()
        return [note for note, score in zip(notes, scores, strict=True) if score is not None]

    def _reaudit(self, notes: list[Notification], report: Reconciled) -> None:
        """Writes the audit entry of each of `notes` that has none, once across sweeps."""
        if not notes:
            return
        since = min(n.resolved_at or 0.0 for n in notes)
        audited = self._seen(self.keys.audit(), {n.id for n in notes}, since, settled=True)
        for note in (n for n in notes if n.id not in audited):
            with storage_errors(f"writing the audit entry of {note.id}"):
                if not self.client.hsetnx(self.keys.notification(note.id), REAUDITED_FIELD, "1"):
                    continue
                self.client.xadd(
                    self.keys.audit(),
                    _audit_entry(note),  # type: ignore[arg-type]
                    maxlen=AUDIT_MAXLEN,
                    approximate=True,
                )
            report.reaudited.append(note.id)
            log.warning("notification %s: its lost audit entry was written again", note.id)

    # The inbox

    def _inbox(self, report: Reconciled) -> None:
        """Drops inbox entries whose notification is settled or gone."""
        cursor = ZsetCursor(self.client, self.keys, self.keys.notifications_pending())
        stale = self._not_pending(cursor.next_page(self.inbox_page))
        if not stale:
            return
        found = self.notifications.records(stale)
        settled = [n for n in found.notes if n.status is not NotificationStatus.PENDING]
        self.finish(settled, found.missing, report)

    def _not_pending(self, ids: list[str]) -> list[str]:
        named, unnamed = [], []
        with (
            storage_errors("reading the status of inbox entries"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for nid in ids:
                try:
                    pipe.hget(self.keys.notification(nid), "status")
                except InvalidInput:
                    unnamed.append(nid)
                    continue
                named.append(nid)
            statuses = pipe.execute()
        return unnamed + [
            nid
            for nid, status in zip(named, statuses, strict=True)
            if status != NotificationStatus.PENDING.value
        ]


def _audit_entry(note: Notification) -> dict[str, str | float]:
    """The audit entry `note`'s resolver would have written, from what its record holds."""
    by, at = note.resolved_by or "", note.resolved_at or 0.0
    return audit_entry(note, note.status, note.resolution, by, at)

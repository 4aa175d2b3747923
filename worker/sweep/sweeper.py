"""The sweep: what `signoff beat` runs every `SIGNOFF_SWEEP_INTERVAL_S`, in its own process.

It expires overdue approvals, reconciles the inbox with the notification records, and
re-sends `advance` where work has no worker: a worker that died mid-turn (its lease
expired), or a resolution whose `advance` was lost (its process died between the two).
Everything it sends waits in the queue for a worker; the sweep itself needs none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from shared.errors import NotFound
from shared.models.batches import BatchState
from shared.models.events import ConversationStatus, TurnStatus
from shared.models.notifications import NotificationStatus
from shared.settings import Settings
from shared.store.batches import BatchStore
from shared.store.connection import storage_errors
from shared.store.history import last_turn_usage
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore
from worker.sweep.reconcile import Reconciled, Reconciler

__all__ = ["Sweeper", "Swept"]

log = logging.getLogger(__name__)

BATCH_PAGE = 200  # the newest batches, checked each sweep for items left held
_ENDED = {
    TurnStatus.COMPLETED.value: BatchState.DONE,
    TurnStatus.FAILED.value: BatchState.FAILED,
    TurnStatus.CANCELLED.value: BatchState.CANCELLED,
}


@dataclass
class Swept:
    """What one sweep did."""

    expired: list[str] = field(default_factory=list)  # notification ids
    reconciled: Reconciled = field(default_factory=Reconciled)
    resent: list[str] = field(default_factory=list)  # conversations sent `advance` for work
    dispatched: list[str] = field(default_factory=list)  # batch items released by the sweep


class Sweeper:
    """Runs sweeps; needs Redis and a way to send `advance`, not a worker."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        *,
        batches: BatchStore,
        send_advance: Callable[[str], None],
        reconciler: Reconciler | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.send_advance = send_advance
        self.batches = batches
        self.notifications = NotificationStore(client, keys, settings)
        self.reconciler = reconciler or Reconciler(
            client, keys, settings, batches=batches, send_advance=send_advance
        )

    def sweep(self) -> Swept:
        """One sweep: expiry, then the reconciler, then conversations whose work stalled."""
        self._heartbeat()
        swept = Swept(expired=self.notifications.expire_due(on_settled=self.reconciler.finish))
        for nid in swept.expired:
            self.send_advance(nid.rpartition(".")[0])
        swept.reconciled = self.reconciler.run()
        swept.dispatched = self._dispatch_batches()
        advanced = {nid.rpartition(".")[0] for nid in swept.expired}
        advanced.update(swept.reconciled.advanced)
        for cid in self._active():
            if cid not in advanced and self._needs_leg(cid):
                self.send_advance(cid)
                swept.resent.append(cid)
        return swept

    def _heartbeat(self) -> None:
        """Tells `signoff doctor` the scheduler is alive."""
        beat_ttl_s = max(int(self.settings.sweep_interval_s * 4), 30)
        with storage_errors("writing the scheduler's heartbeat"):
            self.client.set(self.keys.heartbeat("beat"), f"{time.time():.3f}", ex=beat_ttl_s)

    def _dispatch_batches(self) -> list[str]:
        """Lets each recent running batch dispatch what its cap allows and finish releases.

        A dispatcher that died between marking items running and releasing them leaves them
        held; with nobody following the batch, this is what releases them.
        """
        released: list[str] = []
        for bid in self._running_batches():
            try:
                released += self._end_finished_items(bid)
                released += self.batches.dispatch(bid)
            except NotFound:
                continue
        return released

    def _end_finished_items(self, bid: str) -> list[str]:
        """Moves items whose turn ended long ago, yet still counted running, to their end.

        A worker that died (or lost Redis) between a turn's end flush and the batch's
        transition left them so, holding a place under the cap for ever. "Long ago": twice
        the lease's TTL, so that a worker about to transition is seldom raced; the repair
        carries the turn's usage as the worker's transition would, and the transition counts
        an item's usage only on its first move to an end, so whichever comes first counts
        it once. Returns the items the freed places released.
        """
        with storage_errors(f"sweeping batch {bid}"):
            states: dict[str, str] = self.client.hgetall(self.keys.batch_states(bid))  # type: ignore[assignment]
        live = [cid for cid, state in states.items() if state == BatchState.RUNNING.value]
        if not live:
            return []
        with (
            storage_errors(f"sweeping batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in live:
                pipe.hmget(self.keys.conversation(cid), "active_turn", "last_turn_status")
                pipe.hget(self.keys.conversation(cid), "updated_at")
                pipe.llen(self.keys.inbox(cid))
            replies = pipe.execute()
        released: list[str] = []
        before = time.time() - 2 * self.settings.lease_ttl_ms / 1000
        for i, cid in enumerate(live):
            (active, last), updated, queued = replies[3 * i : 3 * i + 3]
            ended = _ENDED.get(last or "")
            if ended and not active and not queued and float(updated or 0) < before:
                log.warning(
                    "batch %s: item %s ended without its transition; now %s", bid, cid, ended.value
                )
                with storage_errors(f"sweeping batch {bid}"):
                    usage: dict[str, str] = self.client.hgetall(self.keys.usage(cid))  # type: ignore[assignment]
                released += self.batches.transition(bid, cid, ended, last_turn_usage(usage))
        return released

    def _running_batches(self) -> list[str]:
        with (
            storage_errors("sweeping batches"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            ids = [str(b) for b in self.client.zrevrange(self.keys.batches(), 0, BATCH_PAGE - 1)]
            for bid in ids:
                pipe.hget(self.keys.batch(bid), "status")
            statuses = pipe.execute()
        return [bid for bid, status in zip(ids, statuses, strict=True) if status == "running"]

    def _active(self) -> list[str]:
        with (
            storage_errors("sweeping active conversations"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for index in self.keys.every_shard(self.keys.active):
                pipe.zrange(index, 0, -1)
            return [str(cid) for found in pipe.execute() for cid in found]

    def _needs_leg(self, cid: str) -> bool:
        with (
            storage_errors(f"sweeping conversation {cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.exists(self.keys.lease(cid))
            pipe.hmget(self.keys.conversation(cid), "active_turn", "status", "parked_on")
            pipe.llen(self.keys.inbox(cid))
            leased, (active, status, parked_on), queued = pipe.execute()
        if leased:
            return False
        if active and status == ConversationStatus.WAITING_FOR_USER.value:
            return self._settled(parked_on or "")
        if active or queued:
            return True
        with storage_errors(f"sweeping conversation {cid}"):
            self.client.zrem(self.keys.active(self.keys.shard_of(cid)), cid)
        return False

    def _settled(self, nid: str) -> bool:
        """Whether the notification a conversation is parked on no longer waits for anyone."""
        if not nid:
            return True
        try:
            return self.notifications.get(nid).status is not NotificationStatus.PENDING
        except NotFound:
            log.warning("notification %s, which a conversation is parked on, is missing", nid)
            return False

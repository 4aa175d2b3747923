"""A conversation's lease: one worker at a time, with a fencing token, renewed while it runs.

The runtime's claim script takes it (SET PX with a token from INCR) together with
the work; one background thread per worker process renews every held lease every
third of its TTL while the token still matches (a thread per leg cost more than a
one-turn leg's flushes: it was started and joined for every `advance`). Leases
falling due within a sixth of the TTL are renewed together, in one pipeline, so a
thousand held leases cost a round trip every few seconds, not a hundred a second. Releasing
tells the caller whether work remains, in the same script, so a prompt queued
during the release is never stranded.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

import redis
from redis.client import Pipeline

from shared.errors import Conflict
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from worker.process_thread import ProcessThread

__all__ = ["Lease", "LeaseLost"]

_RENEW = LuaScript("worker", "lease_renew.lua", keys=["lease"], args=["token", "ttl_ms"])
_RELEASE = LuaScript(
    "worker",
    "lease_release.lua",
    keys=["lease", "conversation", "inbox"],
    args=["token", "note_prefix", "cid"],
)


class LeaseLost(Conflict):
    """Raised when another worker took over the conversation; this leg must stop writing."""


class Lease:
    """A held lease; `lost` is set when a renewal finds the token replaced."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        cid: str,
        token: str,
        ttl_ms: int,
        *,
        renew_client: redis.Redis | None = None,
    ) -> None:
        self.client = client
        # the renewer's own connection: a renewal never waits behind the legs for the pool
        self.renew_client = renew_client or client
        self.cid = cid
        self.token = token
        self.ttl_ms = ttl_ms
        self.lost = threading.Event()
        self._keys = keys
        self._stopped = False
        self._after: list[Callable[[], object]] = []

    def start_renewing(self) -> None:
        _RENEWER.add(self)

    def after_release(self, action: Callable[[], object]) -> None:
        """Runs `action` once the lease is let go (a batch item's place is freed only then)."""
        self._after.append(action)

    def run_after_release(self) -> None:
        """The actions queued by `after_release`, in order; called once the lease is gone."""
        actions, self._after = self._after, []
        for action in actions:
            action()

    def renew(self) -> bool:
        """One renewal; False once the lease is lost (or stopped). Redis errors are retried."""
        return _renew_all([self])[0]

    def queue_renewal(self, pipe: Pipeline) -> None:
        _RENEW.queue(pipe, [self._keys.lease(self.cid)], [self.token, self.ttl_ms])

    def renewed(self, reply: object) -> bool:
        """Takes a renewal's reply; False once the lease is lost."""
        if isinstance(reply, Exception):
            return True  # Redis blipped; the next tick tries again before the TTL runs out
        if not reply:
            self.lost.set()
            return False
        return True

    def stop(self) -> bool:
        """Stops renewing a lease that was let go elsewhere; no work remains (False)."""
        self._stopped = True
        return False

    def release(self) -> bool:
        """Stops renewing and lets go; returns True when work remains for another leg."""
        self.stop()
        keys = _RELEASE.keys_from(
            {
                "lease": self._keys.lease(self.cid),
                "conversation": self._keys.conversation(self.cid),
                "inbox": self._keys.inbox(self.cid),
            }
        )
        args = [self.token, self._keys.notification_prefix(self.cid), self.cid]
        with storage_errors(f"releasing the lease of conversation {self.cid}"):
            return bool(_RELEASE(self.client, keys, args))


class _Renewer:
    """Renews every lease of this process from one thread, each every third of its TTL."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Lease]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._renewer = ProcessThread("lease-renewer", self._renew_forever, self._wake)

    def add(self, lease: Lease) -> None:
        with self._wake:
            self._schedule(lease)
            # The thread is woken only when this lease is due before every other.
            if not self._renewer.ensure_running() and self._due[0][2] is lease:
                self._wake.notify()

    def _schedule(self, lease: Lease) -> None:
        due = time.monotonic() + lease.ttl_ms / 3000
        heapq.heappush(self._due, (due, next(self._order), lease))

    def _renew_forever(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    if self._due and self._due[0][2]._stopped:
                        heapq.heappop(self._due)  # stopped: forget it now
                        continue
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                leases = self._take_due()
            by_client: dict[int, list[Lease]] = {}
            for lease in leases:
                by_client.setdefault(id(lease.renew_client), []).append(lease)
            kept = [
                lease
                for group in by_client.values()
                for lease, ok in zip(group, _renew_all(group), strict=True)
                if ok
            ]
            with self._wake:  # outside the lock above: the renewals are a round trip
                for lease in kept:
                    self._schedule(lease)

    def _take_due(self) -> list[Lease]:
        """The leases due now, with those due within a sixth of their TTL: one pipeline."""
        now, leases = time.monotonic(), []
        while self._due and self._due[0][0] <= now + self._due[0][2].ttl_ms / 6000:
            lease = heapq.heappop(self._due)[2]
            if not lease._stopped:
                leases.append(lease)
        return leases


def _renew_all(leases: list[Lease]) -> list[bool]:
    """Renews `leases` (of one renewing client) in one pipeline; which are still held."""
    live = [lease for lease in leases if not lease._stopped]
    if not live:
        return [False] * len(leases)
    try:
        with live[0].renew_client.pipeline(transaction=False) as pipe:
            for lease in live:
                lease.queue_renewal(pipe)
            replies: list[object] = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        replies = [exc] * len(live)
    held = dict(zip(map(id, live), replies, strict=True))
    return [id(lease) in held and lease.renewed(held[id(lease)]) for lease in leases]


_RENEWER = _Renewer()

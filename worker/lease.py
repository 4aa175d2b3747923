"""A conversation's lease: one worker at a time, with a fencing token, renewed while it runs.

The runtime's claim script takes it (SET PX with a token from INCR) together with
the work; one background thread per worker process renews every held lease every
third of its TTL while the token still matches (a thread per leg cost more than a
one-turn leg's flushes: it was started and joined for every `advance`). Releasing
tells the caller whether work remains, in the same script, so a prompt queued
during the release is never stranded.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time

import redis

from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["Lease"]

# KEYS: lease   ARGV: token, ttl_ms
_RENEW = LuaScript(
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
)
# KEYS: lease, conv, inbox   ARGV: token
_RELEASE = LuaScript(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local active = redis.call('HGET', KEYS[2], 'active_turn') or ''
local status = redis.call('HGET', KEYS[2], 'status') or ''
if active ~= '' and status ~= 'waiting_for_user' then return 1 end
if active == '' and redis.call('LLEN', KEYS[3]) > 0 then return 1 end
return 0
"""
)


class Lease:
    """A held lease; `lost` is set when a renewal finds the token replaced."""

    def __init__(
        self, client: redis.Redis, keys: KeySpace, cid: str, token: str, ttl_ms: int
    ) -> None:
        self.client = client
        self.cid = cid
        self.token = token
        self.ttl_ms = ttl_ms
        self.lost = threading.Event()
        self._keys = keys
        self._stopped = False

    def start_renewing(self) -> None:
        _RENEWER.add(self)

    def renew(self) -> bool:
        """One renewal; False once the lease is lost (or stopped). Redis errors are retried."""
        if self._stopped:
            return False
        try:
            renewed = _RENEW(self.client, [self._keys.lease(self.cid)], [self.token, self.ttl_ms])
        except redis.RedisError:
            return True  # Redis blipped; the next tick tries again before the TTL runs out
        if not renewed:
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
        keys = [
            self._keys.lease(self.cid),
            self._keys.conversation(self.cid),
            self._keys.inbox(self.cid),
        ]
        with storage_errors(f"releasing the lease of conversation {self.cid}"):
            return bool(_RELEASE(self.client, keys, [self.token]))


class _Renewer:
    """Renews every lease of this process from one thread, each every third of its TTL."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Lease]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._wake:
            self._schedule(lease)
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _schedule(self, lease: Lease) -> None:
        due = time.monotonic() + lease.ttl_ms / 3000
        heapq.heappush(self._due, (due, next(self._order), lease))

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    if self._due and self._due[0][2]._stopped:
                        heapq.heappop(self._due)  # stopped: forget it now
                        continue
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                _, _, lease = heapq.heappop(self._due)
            if lease.renew():  # outside the lock: a round trip
                with self._wake:
                    self._schedule(lease)


_RENEWER = _Renewer()

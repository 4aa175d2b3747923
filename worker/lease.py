"""A conversation's lease: one worker at a time, with a fencing token, renewed while it runs.

The runtime's claim script takes it (SET PX with a token from INCR) together with
the work; a background thread renews it every third of its TTL while the token
still matches. Releasing tells the caller whether work remains, in the same
script, so a prompt queued during the release is never stranded.
"""

from __future__ import annotations

import threading

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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{cid}", daemon=True)

    def start_renewing(self) -> None:
        self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                renewed = _RENEW(
                    self.client, [self._keys.lease(self.cid)], [self.token, self.ttl_ms]
                )
            except redis.RedisError:
                continue  # Redis blipped; the next tick tries again before the TTL runs out
            if not renewed:
                self.lost.set()
                return

    def stop(self) -> bool:
        """Stops renewing a lease that was let go elsewhere; no work remains (False)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1)
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

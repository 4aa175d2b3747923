"""The task outbox's relay side: entries taken under one lease, dropped once published.

State scripts LPUSH `OutboxTask` entries (`shared.client.outbox`) when the broker is apart
from the state Redis. One relay at a time publishes them (the lease, renewed by every take):
a take moves a batch to the `relaying` list, the relay publishes it, and an acknowledgement
drops it. A relay that dies between leaves its batch in `relaying`; whoever holds the lease
next publishes it again before anything new. Only the lease holder takes or acknowledges,
so a relay that lost the lease while it published cannot drop another's batch.
"""

from __future__ import annotations

from typing import Any

import redis

from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["TaskOutbox"]

_TAKE = LuaScript(
    "shared.store",
    "outbox_take.lua",
    keys=("lease", "outbox", "relaying"),
    args=("token", "lease_ms", "limit"),
)
_ACK = LuaScript(
    "shared.store",
    "outbox_ack.lua",
    keys=("lease", "relaying"),
    args=("token", "count", "release"),
)


class TaskOutbox:
    """The outbox of one state shard of a key space, as its relay reads it."""

    def __init__(self, client: redis.Redis, keys: KeySpace, shard: int, *, lease_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.shard = shard
        self.lease_ms = lease_ms

    def take(self, token: str, limit: int) -> list[str] | None:
        """Entries to publish, oldest first; None while another relay holds the lease."""
        named = {
            "lease": self.keys.task_relay_lease(self.shard),
            "outbox": self.keys.task_outbox(self.shard),
            "relaying": self.keys.task_outbox_relaying(self.shard),
        }
        args = {"token": token, "lease_ms": self.lease_ms, "limit": limit}
        with storage_errors("taking tasks from the outbox"):
            reply: list[Any] = _TAKE(self.client, _TAKE.keys_from(named), _TAKE.args_from(args))
        if reply[0] == "held":
            return None
        return [str(entry) for entry in reply[1:]]

    def done(self, token: str, count: int, *, release: bool = False) -> bool:
        """Drops the `count` oldest entries taken; False when the lease has passed on."""
        named = {
            "lease": self.keys.task_relay_lease(self.shard),
            "relaying": self.keys.task_outbox_relaying(self.shard),
        }
        args = {"token": token, "count": count, "release": "1" if release else "0"}
        with storage_errors("acknowledging published outbox tasks"):
            return bool(_ACK(self.client, _ACK.keys_from(named), _ACK.args_from(args)))

    def wait(self, timeout_s: float) -> None:
        """Returns once the outbox holds an entry, or after `timeout_s`.

        BLMOVE from the list's right end to its right end blocks like any pop but moves
        the entry back where it was: a wait that consumes nothing.
        """
        key = self.keys.task_outbox(self.shard)
        with storage_errors("waiting for outbox tasks"):
            self.client.blmove(key, key, timeout_s, "RIGHT", "RIGHT")  # type: ignore[arg-type]

    def waiting(self) -> int:
        """Entries not yet taken by a relay."""
        with storage_errors("reading the outbox"):
            return int(self.client.llen(self.keys.task_outbox(self.shard)))

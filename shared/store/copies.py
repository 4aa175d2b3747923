"""Small, read-mostly hashes copied into every state shard.

A script may touch one Cluster slot, and a conversation's scripts read the operator's tool
rules, the model prices and the webhook endpoints. On a cluster each of these is kept whole
in a slot of its own (its authority, which admins read and write) and copied into every
shard, whose scripts read their own copy. On one Redis the copy is the authority itself and
nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["copy_hash"]

_ROUNDS = 5  # a copy outrun by a concurrent change is rewritten; more rounds than races


def copy_hash(client: Any, authority: str, copies: Sequence[str]) -> None:
    """Rewrites every copy from the authority, after a change to it.

    Two admins changing it at once may copy out of order; each checks, after its copies, that
    the authority still reads as what it copied, and copies again if not, so the last to
    finish leaves the copies as the authority ends. A process that dies between its change
    and its copies leaves them stale until the next change or the sweep's `refresh`.
    """
    targets = [key for key in copies if key != authority]
    if not targets:
        return
    for _ in range(_ROUNDS):
        snapshot = client.hgetall(authority)
        for key in targets:
            with client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                if snapshot:
                    pipe.hset(key, mapping=snapshot)
                pipe.execute()
        if client.hgetall(authority) == snapshot:
            return

"""Walking a sorted set a page at a time across processes, the position kept in Redis.

The cursor is the last (score, member) read, so it survives restarts and is shared by
every sweeper. A member added behind it is read on the next round; one removed before it
shifts nothing, since the next page starts from the cursor's own rank or score.
"""

from __future__ import annotations

import redis

from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["ZsetCursor"]

_PAGE = LuaScript("worker", "cursor_page.lua", keys=["index"], args=["score", "member", "size"])


class ZsetCursor:
    """One sorted set, walked a page per call from where the last call stopped, wrapping."""

    def __init__(self, client: redis.Redis, keys: KeySpace, index: str) -> None:
        self.client = client
        self.keys = keys
        self.index = index

    def next_page(self, size: int) -> list[str]:
        """The next `size` members; a short page is the end, and the next call starts over."""
        with storage_errors(f"walking {self.index}"):
            raw = self.client.hget(self.keys.reconcile_cursors(), self.index)
            score, _, member = str(raw or "").partition(" ")
            flat = [str(item) for item in _PAGE(self.client, [self.index], [score, member, size])]
            members, scores = flat[0::2], flat[1::2]
            if len(members) < size:
                self.client.hdel(self.keys.reconcile_cursors(), self.index)
            else:
                self.client.hset(
                    self.keys.reconcile_cursors(), self.index, f"{scores[-1]} {members[-1]}"
                )
        return members

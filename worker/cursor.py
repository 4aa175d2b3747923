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

# KEYS: the sorted set   ARGV: the cursor's score ('' = from the start), its member, page size
# The page after the cursor: from the member's rank when it is still there with that score,
# else from the first entry at that score (re-reading a few, never skipping one).
_PAGE = LuaScript(
    """
local start = 0
if ARGV[1] ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
  if score and tonumber(score) == tonumber(ARGV[1]) then
    start = redis.call('ZRANK', KEYS[1], ARGV[2]) + 1
  else
    start = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])
  end
end
return redis.call('ZRANGE', KEYS[1], start, start + tonumber(ARGV[3]) - 1, 'WITHSCORES')
"""
)


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

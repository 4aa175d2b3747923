"""Reading a structure that has one copy per state shard as if it were one.

On one Redis there is one shard and each reader is the single command it always was; on a
cluster the shards' copies live on different nodes, so a reader sends one command per shard
in a non-transactional pipeline (which a cluster client splits by node) and merges.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

__all__ = ["zset_count", "zset_page", "zset_total"]


def zset_page(
    client: Any, keys: Sequence[str], offset: int, limit: int, *, newest: bool = True
) -> list[tuple[str, float]]:
    """Members of the sorted sets `keys` together, by score (highest first when `newest`),
    from `offset`, at most `limit`, with their scores.

    Each shard gives its first `offset + limit`, so a deep page costs the shards that much
    each: the pages a reader walks are shallow (the web's lists) or walked by score instead.
    """
    if limit <= 0:
        return []
    end = offset + limit - 1
    if len(keys) == 1:
        found = _range(client, keys[0], offset, end, newest)
        return [(str(member), float(score)) for member, score in found]
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            _range(pipe, key, 0, end, newest)
        pages = pipe.execute()
    sign = -1.0 if newest else 1.0
    merged = heapq.merge(
        *[[(sign * float(score), str(member)) for member, score in page] for page in pages]
    )
    return [(member, sign * score) for score, member in list(merged)[offset : offset + limit]]


def zset_total(client: Any, keys: Sequence[str]) -> int:
    """How many members the sorted sets `keys` hold together."""
    if len(keys) == 1:
        return int(client.zcard(keys[0]))
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.zcard(key)
        return sum(int(n) for n in pipe.execute())


def zset_count(client: Any, keys: Sequence[str], low: float, high: float) -> int:
    """How many members of the sorted sets `keys` score from `low` to `high`."""
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.zcount(key, low, high)
        return sum(int(n) for n in pipe.execute())


def _range(client: Any, key: str, start: int, end: int, newest: bool) -> Any:
    if newest:
        return client.zrevrange(key, start, end, withscores=True)
    return client.zrange(key, start, end, withscores=True)

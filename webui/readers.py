"""Read-side views of a conversation's history that the shared stores do not offer yet.

`HistoryStore.snapshot` reads every retained step; a page of history and the usage
counters need far less. Both are one MULTI/EXEC on the keys `HistoryStore` writes,
so their parts agree. (Candidates for `shared/history.py`.)
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from pydantic import ValidationError

from shared.errors import CorruptRecord
from shared.keys import KeySpace
from shared.redis_client import storage_errors
from shared.steps import USAGE_FIELDS, Step, UsageMetadata

__all__ = ["ConversationUsage", "HistoryPage", "read_history_page", "read_usage"]

_TURN = "turn:"


@dataclass(frozen=True)
class HistoryPage:
    """Retained steps `offset`..`offset + len(steps)`; indices are relative to retained steps."""

    steps: list[Step]
    offset: int
    total: int
    trimmed: int
    turn_start_indices: list[int]
    compaction_indices: list[int]


@dataclass(frozen=True)
class ConversationUsage:
    total: UsageMetadata
    last_turn: UsageMetadata | None
    turn_count: int


def read_history_page(
    client: redis.Redis, keys: KeySpace, cid: str, *, offset: int | None, limit: int
) -> HistoryPage:
    """A page of retained steps from `offset`, or the last `limit` steps when it is None."""
    start, stop = (-limit, -1) if offset is None else (offset, offset + limit - 1)
    with (
        storage_errors(f"reading history of conversation {cid}"),
        client.pipeline(transaction=True) as pipe,
    ):
        pipe.hget(keys.history_meta(cid), "trimmed")
        pipe.llen(keys.steps(cid))
        pipe.lrange(keys.steps(cid), start, stop)
        pipe.lrange(keys.turn_starts(cid), 0, -1)
        pipe.lrange(keys.compactions(cid), 0, -1)
        trimmed_raw, total, raw_steps, turns, compactions = pipe.execute()
    trimmed, total = int(trimmed_raw or 0), int(total)
    first = max(total - limit, 0) if offset is None else offset
    return HistoryPage(
        steps=[
            _parse_step(keys.steps(cid), raw, trimmed + first + i)
            for i, raw in enumerate(raw_steps)
        ],
        offset=first,
        total=total,
        trimmed=trimmed,
        turn_start_indices=[int(p) - trimmed for p in turns],
        compaction_indices=[int(p) - trimmed for p in compactions],
    )


def read_usage(client: redis.Redis, keys: KeySpace, cid: str) -> ConversationUsage:
    """Cumulative usage, the last turn's usage (None before any), and the turn count."""
    with (
        storage_errors(f"reading usage of conversation {cid}"),
        client.pipeline(transaction=True) as pipe,
    ):
        pipe.hgetall(keys.usage(cid))
        pipe.llen(keys.turn_starts(cid))
        raw, turns = pipe.execute()
    last_turn = _usage(raw, _TURN) if f"{_TURN}total_token_count" in raw else None
    return ConversationUsage(_usage(raw, ""), last_turn, int(turns))


def _usage(raw: dict[str, str], prefix: str) -> UsageMetadata:
    return UsageMetadata(**{name: int(raw.get(prefix + name, 0)) for name in USAGE_FIELDS})


def _parse_step(key: str, raw: str, position: int) -> Step:
    try:
        return Step.model_validate_json(raw)
    except ValidationError as exc:
        raise CorruptRecord(f"step at position {position} of {key} does not parse") from exc

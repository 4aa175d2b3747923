"""Pending notifications written as the worker's `park` writes them: the record and its index
entries, without a conversation behind them, for tests of what reads the inbox."""

from __future__ import annotations

import time
from typing import Any

import redis

from shared.models.notifications import Notification, ResolutionKind
from shared.models.steps import ToolCall
from shared.store.keys import KeySpace
from shared.store.notifications import index_commands


def put(
    client: redis.Redis,
    keys: KeySpace,
    n: int,
    *,
    tool: str,
    batch: str | None,
    args: dict[str, Any] | None = None,
    created_at: float | None = None,
) -> Notification:
    note = Notification(
        id=f"conv{n}.s{n}",
        conversation_id=f"conv{n}",
        turn_id="t",
        batch_id=batch,
        title=f"Allow {tool}?",
        tool_call=ToolCall(id=f"c{n}", name=tool, args=args or {}),
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=time.time() + n if created_at is None else created_at,
    )
    client.hset(
        keys.notification(note.id), mapping={"doc": note.model_dump_json(), "status": "pending"}
    )
    for key, members in index_commands(keys, note):
        client.zadd(key, members)
    return note

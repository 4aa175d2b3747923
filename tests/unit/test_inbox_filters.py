"""Inbox filters on a real redis-server: every filter applies, to the page and to the count."""

from __future__ import annotations

import time

import redis

from shared.models.notifications import Notification, ResolutionKind
from shared.models.steps import ToolCall
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore, index_commands


def put(
    client: redis.Redis, keys: KeySpace, n: int, *, tool: str, batch: str | None
) -> Notification:
    note = Notification(
        id=f"conv{n}.s{n}",
        conversation_id=f"conv{n}",
        turn_id="t",
        batch_id=batch,
        title=f"Allow {tool}?",
        tool_call=ToolCall(id=f"c{n}", name=tool, args={}),
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=time.time() + n,
    )
    client.hset(
        keys.notification(note.id), mapping={"doc": note.model_dump_json(), "status": "pending"}
    )
    for key, members in index_commands(keys, note):
        client.zadd(key, members)
    return note


def test_tool_and_batch_together_narrow_both_page_and_count(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = NotificationStore(real_redis, keys, Settings())
    wanted = [put(real_redis, keys, n, tool="send_email", batch="b1") for n in range(0, 12, 3)]
    put(real_redis, keys, 1, tool="send_email", batch="b2")
    put(real_redis, keys, 2, tool="write_file", batch="b1")
    put(real_redis, keys, 4, tool="send_email", batch=None)
    assert store.count_pending(tool="send_email", batch_id="b1") == 4
    assert [n.id for n in store.pending(tool="send_email", batch_id="b1")] == [n.id for n in wanted]
    assert [n.id for n in store.pending(tool="send_email", batch_id="b1", offset=1, limit=2)] == [
        n.id for n in wanted[1:3]
    ]
    assert store.count_pending(tool="send_email") == 6 and store.count_pending(batch_id="b1") == 5
    assert store.count_pending() == 7
    assert store.count_pending(tool="write_file", batch_id="b2") == 0

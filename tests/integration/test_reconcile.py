"""The reconciler on a real stack: no approval stays stranded, no stale entry blocks expiry.

Each fault is made by hand, deterministically: the index writes a Redis failure would
lose are deleted, a resolver dies between its compare-and-set and its clean-up, stale
deadline entries pile up ahead of a due one. Then one sweep (the one `signoff beat`
runs) must put things right, and a second must change nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from shared.client import Client, Conversation
from shared.client.tasks import Advancer, TaskSender
from shared.models.batches import BatchConfig, BatchState
from shared.models.config import ConversationConfig
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow, Notification, NotificationStatus, ResolutionKind
from shared.models.steps import ToolCall
from shared.store.batches import BatchStore, parse_line
from shared.store.inbox_index import INDEXED_FIELD, index_commands
from shared.store.notifications import NotificationStore
from tests.stack import effect_prompt, parked
from worker.sweep.reconcile import Reconciled, Reconciler
from worker.sweep.sweeper import Sweeper, Swept

EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {
    "SIGNOFF_LEASE_TTL_MS": "1500",
}


def batches(client: Client) -> BatchStore:
    return BatchStore(client.redis, client.keys, client.settings, client.tasks)


def sweeper(client: Client, *, grace_s: float = 0.0, page: int = 2_000) -> Sweeper:
    """The sweep `signoff beat` runs, here in the test's process (with no grace by default)."""
    reconciler = Reconciler(
        client.redis,
        client.keys,
        client.settings,
        batches=batches(client),
        send_advance=client.tasks.advance,
        grace_s=grace_s,
        page=page,
    )
    return Sweeper(
        client.redis,
        client.keys,
        client.settings,
        batches=batches(client),
        send_advance=client.tasks.advance,
        reconciler=reconciler,
    )


def deliveries(client: Client, stream: str, nid: str) -> list[str]:
    """Ids of the interaction deliveries of `nid` on `stream`."""
    entries: Any = client.redis.xrange(stream)
    return [
        entry_id
        for entry_id, fields in entries
        if fields.get("notification_id") == nid and fields.get("event") == "interaction"
    ]


def streams(client: Client, note: Notification) -> list[str]:
    return [
        client.keys.notification_stream(client.keys.shard_of(note.conversation_id)),
        client.keys.conversation_notifications(note.conversation_id),
    ]


def lose_the_global_writes(client: Client, note: Notification) -> None:
    """What a Redis failure right after the park script leaves: only the records."""
    for key, _ in index_commands(client.keys, note):
        client.redis.zrem(key, note.id)
    for stream in streams(client, note):
        for entry_id in deliveries(client, stream, note.id):
            client.redis.xdel(stream, entry_id)
    client.redis.hdel(client.keys.notification(note.id), INDEXED_FIELD)


def assert_filed(client: Client, note: Notification) -> None:
    """In the inbox, under every filter, in the deadlines and on each stream exactly once."""
    store = client.notifications
    assert [n.id for n in store.pending(limit=1000)].count(note.id) == 1
    assert note.tool_name is not None and note.batch_id is not None
    assert note.id in store.pending_ids(tool=note.tool_name, limit=1000)
    assert store.pending_ids(batch_id=note.batch_id) == [note.id]
    assert store.count_pending(batch_id=note.batch_id) == 1
    assert store.pending_ids(conversation_id=note.conversation_id) == [note.id]
    assert client.redis.zscore(client.keys.notification_deadlines(), note.id) == note.expires_at
    assert client.redis.zscore(client.keys.notifications_all(), note.id) == note.created_at
    for stream in streams(client, note):
        assert len(deliveries(client, stream, note.id)) == 1, stream


def filed(client: Client, conversation: Conversation) -> Notification:
    """The conversation's parked notification once its global writes are in (the park writes
    the notification first and its inbox index and deliveries after, marked `indexed`)."""
    note = parked(conversation)[0]
    deadline = time.monotonic() + 10
    while client.redis.hget(client.keys.notification(note.id), INDEXED_FIELD) != "1":
        assert time.monotonic() < deadline, f"notification {note.id} was never indexed"
        time.sleep(0.02)
    return note


def park_a_batch_item(client: Client, note_text: str) -> tuple[str, Conversation]:
    store = batches(client)
    config = ConversationConfig.from_settings(client.settings, tools={"record_effect": "ask"})
    bid = store.create(BatchConfig(conversation=config))
    line = parse_line(
        1, json.dumps({"id": "one", "prompt": effect_prompt(note_text)}), client.settings
    )
    assert line is not None
    store.submit(bid, [line])
    store.finish_submission(bid)
    return bid, client.conversation(store.conversation_id(bid, "one"))


def test_a_stranded_approval_is_filed_and_delivered_again_exactly_once(
    client: Client, effects: Path
) -> None:
    bid, conversation = park_a_batch_item(client, "stranded")
    note = filed(client, conversation)
    # the item's move to waiting is the leg's next write after the park that filed the note
    deadline = time.monotonic() + 10
    while batches(client).info(bid).counts[BatchState.WAITING] != 1:
        assert time.monotonic() < deadline, "the parked item was not counted waiting"
        time.sleep(0.02)
    lose_the_global_writes(client, note)
    batches(client).transition(bid, conversation.conversation_id, BatchState.RUNNING)
    assert client.notifications.count_pending(batch_id=bid) == 0

    young = sweeper(client, grace_s=60).sweep()  # a park this young may still be writing
    assert note.id not in young.reconciled.restored + young.reconciled.redelivered
    assert client.notifications.count_pending(batch_id=bid) == 0

    swept = sweeper(client).sweep()
    assert note.id in swept.reconciled.restored
    assert swept.reconciled.redelivered.count(note.id) == 2  # the global stream and its own
    assert_filed(client, note)
    assert client.redis.hget(client.keys.notification(note.id), INDEXED_FIELD) == "1"
    assert batches(client).info(bid).counts[BatchState.WAITING] == 1
    assert batches(client).info(bid).counts[BatchState.RUNNING] == 0

    again = sweeper(client).sweep()
    assert note.id not in again.reconciled.restored + again.reconciled.redelivered
    assert_filed(client, note)

    client.resolve_notification(note.id, Allow(), actor="ops")
    deadline = time.monotonic() + 30
    while batches(client).info(bid).counts[BatchState.DONE] != 1:
        assert time.monotonic() < deadline, "the batch item did not finish"
        time.sleep(0.05)
    assert effects.read_text().count(" stranded\n") == 1


def test_only_a_missing_global_delivery_is_added_again(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    conversation.send(effect_prompt("half-lost"))
    note = filed(client, conversation)
    assert client.redis.hget(client.keys.notification(note.id), INDEXED_FIELD) == "1"
    assert sweeper(client).sweep().reconciled == Reconciled()  # nothing to repair
    global_stream, own_stream = streams(client, note)
    for entry_id in deliveries(client, global_stream, note.id):
        client.redis.xdel(global_stream, entry_id)
    client.redis.hdel(client.keys.notification(note.id), INDEXED_FIELD)  # the mark came later

    swept = sweeper(client).sweep()
    assert swept.reconciled.redelivered == [note.id] and swept.reconciled.restored == []
    assert len(deliveries(client, global_stream, note.id)) == 1
    assert len(deliveries(client, own_stream, note.id)) == 1
    assert sweeper(client).sweep().reconciled.redelivered == []
    client.resolve_notification(note.id, Allow(), actor="ops")


class ResolverDied(Exception):
    """Stands for a resolving process that died right after its compare-and-set."""


class DiesAfterTheCompareAndSet(NotificationStore):
    def _settled(self, *args: Any, **kwargs: Any) -> None:
        raise ResolverDied


class SendsAdvanceAfterTheWrite:
    """An advancer whose `advance` no script can queue (as the worker's own stores have)."""

    def __init__(self, tasks: TaskSender) -> None:
        self.tasks = tasks

    def advance(self, conversation_id: str) -> None:
        self.tasks.advance(conversation_id)


def allowed_by_a_dying_resolver(
    client: Client, tasks: Advancer, note_text: str
) -> tuple[Conversation, str, Notification]:
    """A parked conversation whose notification a resolver allowed, then died at once."""
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt(note_text))
    note = filed(client, conversation)
    dying = DiesAfterTheCompareAndSet(client.redis, client.keys, client.settings, tasks)
    with pytest.raises(ResolverDied):
        dying.resolve(note.id, Allow(), actor="ops")
    return conversation, turn, note


def test_a_resolution_whose_continuation_is_queued_by_its_write_survives_the_resolver(
    client: Client, effects: Path
) -> None:
    conversation, turn, note = allowed_by_a_dying_resolver(client, client.tasks, "by-the-write")
    conversation.wait_for_turn(turn, timeout=30)  # no sweep needed: the write queued `advance`
    assert effects.read_text().count(" by-the-write\n") == 1
    assert audit_of(client, note.id) == []
    swept = sweeper(client).sweep()
    assert note.id in swept.reconciled.dropped and swept.reconciled.advanced == []
    assert swept.reconciled.reaudited == [note.id]
    assert_unindexed(client, note)


def test_a_resolution_whose_clean_up_was_lost_is_cleaned_and_resumed(
    client: Client, effects: Path
) -> None:
    by_celery = SendsAdvanceAfterTheWrite(client.tasks)
    conversation, turn, note = allowed_by_a_dying_resolver(client, by_celery, "half-resolved")
    assert client.notifications.get(note.id).status is NotificationStatus.RESOLVED
    assert client.notifications.pending_ids(conversation_id=conversation.conversation_id) == [
        note.id
    ]
    assert conversation.status is ConversationStatus.WAITING_FOR_USER  # no `advance` was sent
    assert audit_of(client, note.id) == []

    swept = sweeper(client).sweep()
    assert note.id in swept.reconciled.dropped
    assert conversation.conversation_id in swept.reconciled.advanced
    assert swept.reconciled.reaudited == [note.id]
    [entry] = audit_of(client, note.id)
    assert (entry["actor"], entry["status"], entry["kind"]) == ("ops", "resolved", "allow")
    assert_unindexed(client, note)
    conversation.wait_for_turn(turn, timeout=30)
    assert effects.read_text().count(" half-resolved\n") == 1

    # The same entries left behind once the conversation moved on: the inbox walk drops them.
    for key, members in index_commands(client.keys, note):
        client.redis.zadd(key, members)
    swept = sweeper(client).sweep()
    assert note.id in swept.reconciled.dropped and swept.reconciled.advanced == []
    assert swept.reconciled.reaudited == [] and len(audit_of(client, note.id)) == 1
    assert_unindexed(client, note)


def test_a_resolution_settled_within_the_grace_keeps_its_inbox_entry_until_audited(
    client: Client, effects: Path
) -> None:
    by_celery = SendsAdvanceAfterTheWrite(client.tasks)
    conversation, turn, note = allowed_by_a_dying_resolver(client, by_celery, "young")

    # Its resolver may still be writing: the sweep neither drops nor audits it, since the
    # inbox entry is what tells a later pass that the audit entry may be lost.
    young = sweeper(client, grace_s=60).sweep()
    assert young.reconciled.dropped == [] and young.reconciled.reaudited == []
    assert client.notifications.pending_ids(conversation_id=conversation.conversation_id) == [
        note.id
    ]
    assert conversation.conversation_id in young.reconciled.advanced
    conversation.wait_for_turn(turn, timeout=30)

    swept = sweeper(client).sweep()  # the grace is over
    assert swept.reconciled.dropped == [note.id] and swept.reconciled.reaudited == [note.id]
    assert len(audit_of(client, note.id)) == 1
    assert_unindexed(client, note)


def audit_of(client: Client, nid: str) -> list[dict[str, Any]]:
    return [e for e in client.notifications.audit(count=10_000) if e["notification_id"] == nid]


def assert_unindexed(client: Client, note: Notification) -> None:
    store = client.notifications
    assert note.id not in store.pending_ids(limit=1000)
    assert note.tool_name is not None
    assert note.id not in store.pending_ids(tool=note.tool_name, limit=1000)
    assert store.pending_ids(conversation_id=note.conversation_id) == []
    assert client.redis.zscore(client.keys.notification_deadlines(), note.id) is None
    assert client.redis.zscore(client.keys.notifications_all(), note.id) is not None


def stale(client: Client, n: int, expires_at: float, *, record: bool) -> str:
    """An overdue deadline entry whose notification was resolved (or has no record)."""
    note = Notification(
        id=f"gone{n}.s{n}",
        conversation_id=f"gone{n}",
        turn_id="t",
        title="Allow record_effect?",
        tool_call=ToolCall(id=f"c{n}", name="record_effect", args={"note": "old"}),
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=expires_at - 60,
        expires_at=expires_at,
    )
    if record:
        client.redis.hset(
            client.keys.notification(note.id),
            mapping={"doc": note.model_dump_json(), "status": NotificationStatus.RESOLVED.value},
        )
    with client.redis.pipeline(transaction=False) as pipe:
        for key, members in index_commands(client.keys, note):
            pipe.zadd(key, members)
        pipe.execute()
    return note.id


def test_six_hundred_stale_deadlines_do_not_hold_back_a_due_one(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"}, approval_timeout_s=1)
    turn = conversation.send(effect_prompt("due"))
    note = filed(client, conversation)
    assert note.expires_at is not None
    stale_ids = [stale(client, n, note.expires_at - 100 - n, record=n % 2 == 0) for n in range(600)]
    while client.notifications.clock() < note.expires_at:
        time.sleep(0.05)

    swept = sweeper(client).sweep()
    assert swept.expired == [note.id]
    assert client.notifications.get(note.id).status is NotificationStatus.EXPIRED
    left = client.redis.zmscore(client.keys.notification_deadlines(), stale_ids)
    assert left == [None] * len(stale_ids)
    assert set(stale_ids).isdisjoint(client.notifications.pending_ids(limit=10_000))
    assert "expired" in conversation.wait_for_turn(turn, timeout=30).text


def test_the_cursor_walks_every_conversation_a_page_per_pass(client: Client) -> None:
    target = f"far-{uuid.uuid4().hex[:8]}"
    shard = client.keys.shard_of(target)  # its shard's index: the one its cursor walks
    ahead = 0
    while ahead < 7:  # ahead of it in the index, which is ordered by creation
        cid = f"ahead-{uuid.uuid4().hex[:8]}"
        if client.keys.shard_of(cid) == shard:
            client.new_conversation(conversation_id=cid)
            ahead += 1
    conversation = client.new_conversation(conversation_id=target, tools={"record_effect": "ask"})
    conversation.send(effect_prompt("far-down"))
    note = filed(client, conversation)
    lose_the_global_writes(client, note)
    index = client.keys.conversations(client.keys.shard_of(conversation.conversation_id))
    client.redis.hdel(client.keys.reconcile_cursors(), index)
    page = 3
    found = client.redis.zrank(index, conversation.conversation_id)
    assert isinstance(found, int) and client.redis.zcard(index) > page
    rank = found
    assert rank // page >= 2
    passes: list[Swept] = [sweeper(client, page=page).sweep() for _ in range(rank // page + 1)]
    restored_at = [i for i, s in enumerate(passes) if note.id in s.reconciled.restored]
    assert restored_at == [rank // page]  # reached on its page's pass, not before
    assert client.notifications.pending_ids(conversation_id=conversation.conversation_id) == [
        note.id
    ]
    client.resolve_notification(note.id, Allow(), actor="ops")

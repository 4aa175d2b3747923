"""Approvals end to end: park without a worker, resolve once, resume exactly once."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.errors import Cancelled, Conflict, InvalidInput, NotFound
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow, Deny, NotificationKind, NotificationStatus, Submit
from shared.models.steps import StepStatus, StepType
from shared.settings import Settings
from tests.stack import WorkerProcess, effect_prompt, parked

EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Report", "body": "All good."}'


EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {
    "SIGNOFF_LEASE_TTL_MS": "1500",
}


def test_park_releases_the_worker_and_allow_resumes_once(client: Client, effects: Path) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("approved-once"))
    [note] = parked(conversation)
    assert note.kind is NotificationKind.INTERACTION and note.tool_call is not None
    assert note.tool_call.args == {"note": "approved-once"}
    lease = client.keys.lease(conversation.conversation_id)
    deadline = time.monotonic() + 5  # let go right after the park's flush, which we saw
    while client.redis.exists(lease):
        assert time.monotonic() < deadline, "the parked conversation still holds its lease"
        time.sleep(0.01)
    assert not effects.exists() or "approved-once" not in effects.read_text()
    client.resolve_notification(note.id, Allow(), actor="alice")
    response = conversation.wait_for_turn(turn, timeout=30)
    assert "record_effect returned" in response.text
    assert effects.read_text().count(" approved-once\n") == 1
    assert [s.type for s in response.steps].count(StepType.TOOL_RESULT) == 1
    resolved = client.notifications.get(note.id)
    assert resolved.status is NotificationStatus.RESOLVED and resolved.resolved_by == "alice"
    audit = client.notifications.audit(count=20)
    assert any(e["notification_id"] == note.id and e["actor"] == "alice" for e in audit)


def test_allow_with_edited_arguments_is_validated_then_used(client: Client, effects: Path) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("original"))
    [note] = parked(conversation)
    with pytest.raises(InvalidInput, match=r"edited arguments are invalid: .*'note' is a required"):
        client.resolve_notification(note.id, Allow(arguments={"nope": 1}), actor="bob")
    assert client.notifications.get(note.id).status is NotificationStatus.PENDING
    client.resolve_notification(note.id, Allow(arguments={"note": "edited"}), actor="bob")
    response = conversation.wait_for_turn(turn, timeout=30)
    assert " edited\n" in effects.read_text() and " original\n" not in effects.read_text()
    call = next(s for s in response.steps if s.type is StepType.TOOL_RESULT).tool_calls[0]
    assert call.args == {"note": "edited"}
    entry = next(e for e in client.notifications.audit(count=50) if e["notification_id"] == note.id)
    assert entry["arguments_before"] == '{"note": "original"}'
    assert entry["arguments_after"] == '{"note": "edited"}'


def test_deny_with_reason_tells_the_model_and_records_a_denial(
    client: Client, effects: Path
) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("never"))
    [note] = parked(conversation)
    with pytest.raises(InvalidInput, match="reason"):
        client.resolve_notification(note.id, {"kind": "deny", "reason": "  "}, actor="carol")
    client.resolve_notification(note.id, Deny(reason="not on a Friday"), actor="carol")
    response = conversation.wait_for_turn(turn, timeout=30)
    denial = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert denial.status is StepStatus.CANCELED
    assert "not on a Friday" in denial.error and '"denied"' in denial.content
    assert "denied" in response.text
    assert not effects.exists() or " never\n" not in effects.read_text()


def test_fifty_concurrent_resolutions_one_wins(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("race"))
    [note] = parked(conversation)
    outcomes: list[str] = []
    barrier = threading.Barrier(50)

    def resolve(i: int) -> None:
        barrier.wait()
        try:
            client.resolve_notification(
                note.id, Allow() if i % 2 else Deny(reason=f"r{i}"), actor=f"op{i}"
            )
            outcomes.append("won")
        except Conflict as exc:
            outcomes.append("conflict" if "already resolved" in str(exc) else str(exc))

    threads = [threading.Thread(target=resolve, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(set(outcomes)) == ["conflict", "won"] and outcomes.count("won") == 1
    conversation.wait_for_turn(turn, timeout=30)
    winners = [e for e in client.notifications.audit(count=200) if e["notification_id"] == note.id]
    assert len(winners) == 1


def test_submit_is_validated_against_the_schema(client: Client) -> None:
    conversation = client.new_conversation()
    schema = json.dumps(
        {
            "type": "object",
            "properties": {
                "budget": {"type": "integer", "minimum": 1},
                "owner": {"type": "string"},
            },
            "required": ["budget", "owner"],
        }
    )
    turn = conversation.send(
        f'call ask_operator {{"question": "What budget?", "schema": {schema}}}'
    )
    [note] = parked(conversation)
    assert note.question == "What budget?" and note.submit_schema is not None
    with pytest.raises(InvalidInput) as problem:
        client.resolve_notification(note.id, Submit(content={"budget": 0}), actor="dana")
    assert "$.budget: 0 is less than the minimum of 1" in str(problem.value)
    assert "'owner' is a required property" in str(problem.value)
    with pytest.raises(InvalidInput, match="accepts submit, deny; not allow"):
        client.resolve_notification(note.id, Allow(), actor="dana")
    client.resolve_notification(
        note.id, Submit(content={"budget": 5, "owner": "dana"}), actor="dana"
    )
    response = conversation.wait_for_turn(turn, timeout=30)
    assert '"budget": 5' in response.text or "'budget': 5" in response.text


def test_unknown_cancelled_and_expired_ids(client: Client) -> None:
    with pytest.raises(NotFound):
        client.resolve_notification("nosuch.thing", Allow(), actor="x")
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("aborted"))
    [note] = parked(conversation)
    conversation.abort()
    with pytest.raises(Cancelled):
        conversation.wait_for_turn(turn, timeout=30)
    assert client.notifications.get(note.id).status is NotificationStatus.CANCELLED
    with pytest.raises(Conflict, match="cancelled"):
        client.resolve_notification(note.id, Allow(), actor="late")
    assert conversation.is_idle and not conversation.pending_notifications()


def test_expiry_denies_with_reason_expired(client: Client, effects: Path) -> None:
    expiring = client.new_conversation(tools={"record_effect": "ask"}, approval_timeout_s=1)
    turn = expiring.send(effect_prompt("expires"))
    [note] = parked(expiring)
    assert note.expires_at is not None and note.expires_at - note.created_at == pytest.approx(
        1, abs=0.01
    )
    time.sleep(1.1)
    client.tasks.sweep()
    response = expiring.wait_for_turn(turn, timeout=30)
    assert "expired" in response.text
    assert client.notifications.get(note.id).status is NotificationStatus.EXPIRED
    with pytest.raises(Conflict, match="expired"):
        client.resolve_notification(note.id, Allow(), actor="late")
    assert not effects.exists() or " expires\n" not in effects.read_text()
    assert expiring.is_idle


def test_sticky_allow_covers_the_rest_of_the_conversation(client: Client, effects: Path) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("sticky-1"))
    [note] = parked(conversation)
    client.resolve_notification(note.id, Allow(sticky="conversation"), actor="erin")
    conversation.wait_for_turn(turn, timeout=30)
    second = conversation.chat_to_completion(effect_prompt("sticky-2"))
    assert "record_effect returned" in second.text
    assert " sticky-2\n" in effects.read_text()


@pytest.fixture
def own_stack(stack_env: dict[str, str]) -> Iterator[tuple[dict[str, str], Client]]:
    env = {**stack_env, "SIGNOFF_KEY_PREFIX": f"ap1{uuid.uuid4().hex[:6]}"}
    settings = Settings(
        redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"], lease_ttl_ms=1500
    )
    with Client(settings) as client:
        yield env, client


def test_parked_conversations_hold_no_worker(own_stack: tuple[dict[str, str], Client]) -> None:
    env, client = own_stack
    worker = WorkerProcess(env, concurrency=1, name="single").start()
    try:
        waiting = [client.new_conversation(tools={"record_effect": "ask"}) for _ in range(20)]
        for conversation in waiting:
            conversation.send(effect_prompt("parked"))
        for conversation in waiting:
            parked(conversation)
        others = [client.new_conversation() for _ in range(5)]
        answers = [c.chat_to_completion(f"still served {i}") for i, c in enumerate(others)]
        assert all("still served" in a.text for a in answers)
        assert client.notifications.count_pending() == 20
    finally:
        worker.stop()


def test_worker_killed_right_after_the_resolution(
    own_stack: tuple[dict[str, str], Client], effects: Path
) -> None:
    env, client = own_stack
    first = WorkerProcess(env, concurrency=1, name="victim").start()
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("after-kill"))
    [note] = parked(conversation)
    # Frozen first, so that it dies before the continuation starts whatever the timing: the
    # `advance` the resolution queues is taken by its pending BRPOP (or left in the queue) and
    # never acknowledged; the sweep sends it again. Killed while the tool runs is test_recovery's.
    first.freeze()
    client.resolve_notification(note.id, Allow(), actor="frank")
    first.kill()
    second = WorkerProcess(env, concurrency=1, name="heir").start()
    try:
        deadline = time.monotonic() + 30
        while not conversation.is_idle and time.monotonic() < deadline:
            client.tasks.sweep()
            time.sleep(0.5)
        response = conversation.wait_for_turn(turn, timeout=5)
    finally:
        second.stop()
    assert effects.read_text().count(" after-kill\n") == 1
    assert [s.type for s in conversation.history].count(StepType.TOOL_RESULT) == 1
    assert "record_effect" in response.text


def test_delivery_is_exclusive_at_least_once_and_reclaimed(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    first = conversation.notification_stream(group="ui", consumer="a", min_idle_ms=300)
    second = conversation.notification_stream(group="ui", consumer="b", min_idle_ms=300)
    turn = conversation.send(effect_prompt("delivered"))
    delivery = first.recv(timeout_s=20)
    assert delivery is not None and delivery.kind is NotificationKind.INTERACTION
    assert first.notification(delivery).tool_call is not None
    assert second.recv(timeout_s=0.1) is None  # exclusive within the group
    del first  # dropped without acknowledging
    time.sleep(0.4)
    again = second.recv(timeout_s=1)
    assert again is not None and again.entry_id == delivery.entry_id and again.delivery_count == 2
    second.resolve(again, Allow(), actor="grace")
    conversation.wait_for_turn(turn, timeout=30)
    done = second.recv(timeout_s=5)
    assert (
        done is not None
        and done.kind is NotificationKind.PASSIVE
        and done.event == "turn_completed"
    )
    assert second.recv(timeout_s=0.1) is None  # advancing acknowledged the passive one
    pending = client.redis.xpending(
        client.keys.conversation_notifications(conversation.conversation_id), "ui"
    )
    assert pending["pending"] == 0


@pytest.mark.one_redis  # reads Celery's queue on the state Redis
def test_the_resolution_queues_its_own_continuation_and_the_turn_runs_with_the_call(
    own_stack: tuple[dict[str, str], Client], effects: Path
) -> None:
    """The compare-and-set pushes `advance` itself, as Celery would; `running` while it runs."""
    env, client = own_stack
    parker = WorkerProcess(env, concurrency=1, name="parker").start()
    try:
        conversation = client.new_conversation(tools={"record_effect": "ask"})
        turn = conversation.send(effect_prompt("slow-call"))
        [note] = parked(conversation)
    finally:
        parker.stop()
    queue = client.tasks.messages.key
    events_key = client.keys.events(conversation.conversation_id)
    [(parked_at, _)] = client.redis.xrevrange(events_key, count=1)
    assert client.redis.llen(queue) == 0
    client.resolve_notification(note.id, Allow(), actor="gina")
    with pytest.raises(Conflict):
        client.resolve_notification(note.id, Deny(reason="too late"), actor="hal")
    [ours] = client.redis.lrange(queue, 0, -1)
    client.tasks.advance(conversation.conversation_id)  # what Celery's own send_task queues
    celerys = client.redis.lpop(queue)
    assert celerys is not None
    mine, theirs = json.loads(ours), json.loads(celerys)
    assert mine.keys() == theirs.keys()
    assert mine["headers"].keys() == theirs["headers"].keys()
    assert mine["properties"].keys() == theirs["properties"].keys()
    for same in ("content-type", "content-encoding", "body"):
        assert mine[same] == theirs[same]
    assert mine["headers"]["task"] == theirs["headers"]["task"] == "signoff.advance"
    assert mine["properties"]["delivery_info"] == theirs["properties"]["delivery_info"]
    assert mine["headers"]["id"] != theirs["headers"]["id"]

    slow = {**env, "SIGNOFF_TEST_EFFECT_DELAY_S": "3"}
    runner = WorkerProcess(slow, concurrency=1, name="runner").start()
    try:
        deadline = time.monotonic() + 20
        while " slow-call\n" not in (effects.read_text() if effects.exists() else ""):
            assert time.monotonic() < deadline, "the allowed call never ran"
            time.sleep(0.02)
        assert conversation.status is ConversationStatus.RUNNING  # while the call still runs
        assert not conversation.is_idle
        conversation.wait_for_turn(turn, timeout=30)
    finally:
        runner.stop()
    after = client.redis.xrange(events_key, min=f"({parked_at}")
    statuses = [json.loads(f["e"])["status"] for _, f in after if '"kind":"status"' in f["e"]]
    assert statuses.count("running") == 1, statuses
    assert statuses[-1] == "idle"

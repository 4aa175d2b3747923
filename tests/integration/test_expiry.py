"""The deadline is the deadline: a late resolution is refused, and expiry needs no worker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.client.tasks import queue_name
from shared.errors import Conflict
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow, Deny, NotificationStatus
from shared.settings import Settings
from tests.stack import BeatProcess, WorkerProcess, effect_prompt, parked

# one Redis: reads Celery's queue on the state Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

SWEEP_INTERVAL_S = 0.5


EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {
    "SIGNOFF_LEASE_TTL_MS": "1500",
    "SIGNOFF_SWEEP_INTERVAL_S": str(SWEEP_INTERVAL_S),
}


def expiry_audit(client: Client, nid: str) -> list[dict[str, str]]:
    return [e for e in client.notifications.audit(count=1000) if e["notification_id"] == nid]


def test_a_resolution_just_after_the_deadline_is_refused_and_expires_it(
    client: Client, effects: Path
) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"}, approval_timeout_s=1)
    turn = conversation.send(effect_prompt("too-late"))
    note = parked(conversation)[0]
    assert note.expires_at is not None
    while client.notifications.clock() < note.expires_at + 0.03:  # Redis's clock decides
        time.sleep(0.005)

    with pytest.raises(Conflict, match=r"expired at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC") as late:
        client.resolve_notification(note.id, Allow(), actor="late-operator")
    assert "denied with reason 'expired'" in str(late.value)

    expired = client.notifications.get(note.id)
    assert expired.status is NotificationStatus.EXPIRED
    assert expired.resolution == Deny(reason="expired") and expired.resolved_by == "system:expiry"
    assert expired.resolved_at is not None and expired.resolved_at >= note.expires_at
    [entry] = expiry_audit(client, note.id)
    assert entry["actor"] == "system:expiry" and entry["status"] == "expired"
    assert entry["reason"] == "expired"
    assert note.id not in client.notifications.pending_ids(limit=1000)

    response = conversation.wait_for_turn(turn, timeout=30)  # the resolver sent `advance`
    assert "expired" in response.text
    assert not effects.exists() or " too-late\n" not in effects.read_text()
    with pytest.raises(Conflict, match="expired at"):
        client.resolve_notification(note.id, Allow(), actor="later-still")
    assert len(expiry_audit(client, note.id)) == 1


def test_an_expiry_before_the_deadline_changes_nothing(client: Client) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"}, approval_timeout_s=60)
    turn = conversation.send(effect_prompt("in-time"))
    note = parked(conversation)[0]
    assert note.expires_at is not None
    # A sweeper whose clock runs a minute ahead of Redis's finds it due; Redis says no.
    assert client.notifications.expire_due(now=note.expires_at + 1) == []
    assert client.notifications.get(note.id).status is NotificationStatus.PENDING
    client.resolve_notification(note.id, Allow(), actor="ops")
    conversation.wait_for_turn(turn, timeout=30)


@pytest.fixture
def no_worker_stack(stack_env: dict[str, str]) -> Iterator[tuple[dict[str, str], Client]]:
    """Its own key prefix: no worker of this module ever reads its queue."""
    env = {**stack_env, "SIGNOFF_KEY_PREFIX": f"ex1{uuid.uuid4().hex[:6]}"}
    settings = Settings(
        redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"], lease_ttl_ms=1500
    )
    with Client(settings) as client:
        yield env, client


def test_beat_expires_on_time_with_no_worker_and_the_advance_waits_for_one(
    no_worker_stack: tuple[dict[str, str], Client], effects: Path
) -> None:
    env, client = no_worker_stack
    beat = BeatProcess(env).start()  # first: its start-up does not eat into the deadline
    try:
        parker = WorkerProcess(env, concurrency=1, name="parker").start()
        conversation = client.new_conversation(tools={"record_effect": "ask"}, approval_timeout_s=6)
        turn = conversation.send(effect_prompt("no-worker"))
        note = parked(conversation)[0]
        parker.stop()
        assert note.expires_at is not None
        assert client.notifications.clock() < note.expires_at, "parking and stopping took too long"
        assert client.notifications.get(note.id).status is NotificationStatus.PENDING
        deadline = time.monotonic() + (note.expires_at - time.time()) + 10
        while client.notifications.get(note.id).status is NotificationStatus.PENDING:
            assert time.monotonic() < deadline, f"not expired by beat:\n{beat.log()}"
            time.sleep(0.02)
    finally:
        beat.stop()
    expired = client.notifications.get(note.id)
    assert expired.status is NotificationStatus.EXPIRED and expired.resolved_by == "system:expiry"
    assert expired.resolved_at is not None
    assert 0 <= expired.resolved_at - note.expires_at <= SWEEP_INTERVAL_S + 0.5
    assert [e["actor"] for e in expiry_audit(client, note.id)] == ["system:expiry"]

    queue = f"{env['SIGNOFF_KEY_PREFIX']}:celery:{queue_name(client.settings)}"
    assert client.redis.llen(queue) >= 1  # the `advance` beat sent, waiting for a worker
    assert conversation.status is ConversationStatus.WAITING_FOR_USER
    heir = WorkerProcess(env, concurrency=1, name="heir").start()
    try:
        response = conversation.wait_for_turn(turn, timeout=30)
    finally:
        heir.stop()
    assert "expired" in response.text
    assert not effects.exists() or " no-worker\n" not in effects.read_text()

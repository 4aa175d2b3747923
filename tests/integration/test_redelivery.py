"""A leg Celery redelivers after its turn went on without it does nothing.

A worker SIGKILLed mid-leg leaves its `advance` in Celery's unacknowledged hash; the sweep
resumes the turn long before the visibility timeout, so when the message comes back
(kombu restores it once it is older than the timeout) the turn has completed or parked.
Here the redelivery is the real one: the messages a killed worker left are aged past the
timeout and a new worker's own restore puts them back on the queue.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.client import Client, Conversation
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow, NotificationStatus
from shared.models.steps import Step, StepType
from shared.settings import Settings
from tests.stack import WorkerProcess

# one Redis: reads Celery's unacknowledged tasks on the state Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

TOKEN_DELAY_MS = "150"  # the doomed worker's model is slow, so the kill lands mid-leg


EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {
    "SIGNOFF_LEASE_TTL_MS": "1500",
}


@pytest.fixture
def signoff(stack_env: dict[str, str]) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"],
        key_prefix=stack_env["SIGNOFF_KEY_PREFIX"],
        lease_ttl_ms=1500,
    )
    with Client(settings) as client:
        yield client


def wait_until(
    condition: Callable[[], bool], timeout_s: float = 30.0, why: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"condition not met in time {why()}"
        time.sleep(0.05)


def unacked(client: Client) -> dict[str, str]:
    """Celery's unacknowledged messages: delivery tag -> the conversation its `advance` names."""
    raw = client.redis.hgetall(f"{client.keys.prefix}:celery:unacked")
    found = {}
    for tag, value in raw.items():
        body = json.loads(value)[0]["body"]  # [message, exchange, routing key]; body in base64
        found[str(tag)] = json.loads(base64.b64decode(body))[0][0]  # [args, kwargs, embed]
    return found


def first_step(conversation: Conversation, turn_id: str, matches: Callable[[Step], bool]) -> None:
    """Follows the turn live until a step matches."""
    for step in conversation.receive_steps(turn_id):
        if matches(step):
            return
    raise AssertionError(f"turn {turn_id} ended before the step looked for")


def snapshot(client: Client, conversation: Conversation) -> tuple[int, int, int]:
    """Steps in history, events on the stream, notifications of the conversation."""
    cid = conversation.conversation_id
    notes = client.redis.zcard(client.keys.notifications_all())
    return len(conversation.history), client.redis.xlen(client.keys.events(cid)), notes


def test_a_redelivered_leg_after_its_turn_completed_or_parked_does_nothing(
    signoff: Client, stack_env: dict[str, str]
) -> None:
    effects = Path(stack_env["SIGNOFF_TEST_EFFECTS"])
    slow = {**stack_env, "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": TOKEN_DELAY_MS}
    doomed = WorkerProcess(slow, concurrency=2, name="doomed").start()
    done = signoff.new_conversation(allow_all=True)
    done_turn = done.send('call record_effect {"note": "completed-once"}')
    first_step(done, done_turn, lambda step: step.type is StepType.TOOL_RESULT)
    parked = signoff.new_conversation(tools={"record_effect": "ask"})
    parked_turn = parked.send('call record_effect {"note": "parked-once"}')
    first_step(parked, parked_turn, lambda step: bool(step.thinking_delta))
    doomed.kill()  # both legs mid-flight: `done` in its second model call, `parked` in its first

    left = unacked(signoff)
    assert sorted(left.values()) == sorted([done.conversation_id, parked.conversation_id])
    for conversation in (done, parked):
        wait_until(
            lambda c=conversation: not signoff.redis.exists(signoff.keys.lease(c.conversation_id))
        )
    rescuer = WorkerProcess(stack_env, concurrency=2, name="rescuer").start()
    try:
        signoff.tasks.sweep()
        response = done.wait_for_turn(done_turn, timeout=30)
        wait_until(lambda: parked.status is ConversationStatus.WAITING_FOR_USER)
    finally:
        rescuer.stop()
    before = (snapshot(signoff, done), snapshot(signoff, parked), effects.read_text())
    [note] = parked.pending_notifications()

    # The killed worker's messages, older than the visibility timeout: a new worker restores them.
    assert set(unacked(signoff)) == set(left)
    for tag in left:
        signoff.redis.zadd(f"{signoff.keys.prefix}:celery:unacked_index", {tag: 0})
    heir = WorkerProcess(stack_env, concurrency=2, name="heir").start()
    try:
        # a bound for a loaded machine: the heir starts, restores, then runs both legs
        wait_until(
            lambda: not unacked(signoff) and heir.log().count("advance ") >= 2,
            timeout_s=90,
            why=lambda: (
                f"unacked: {unacked(signoff)}; restore mutex held for "
                f"{signoff.redis.pttl(f'{signoff.keys.prefix}:celery:unacked_mutex')} ms; "
                f"the heir's log:\n{heir.log()[-6000:]}"
            ),
        )
        assert f"advance {done.conversation_id}: idle" in heir.log()
        assert f"advance {parked.conversation_id}: parked" in heir.log()
        after = (snapshot(signoff, done), snapshot(signoff, parked), effects.read_text())
        assert after == before  # no step, event, notification or tool run more
        assert signoff.notifications.get(note.id).status is NotificationStatus.PENDING

        signoff.resolve_notification(note.id, Allow(), actor="ops")
        resumed = parked.wait_for_turn(parked_turn, timeout=30)
    finally:
        heir.stop()
    assert effects.read_text().count(" completed-once\n") == 1
    assert effects.read_text().count(" parked-once\n") == 1
    for conversation in (done, parked):
        types = [s.type for s in conversation.history]
        assert types.count(StepType.TOOL_RESULT) == 1 and types.count(StepType.FINISH) == 1
    assert "record_effect returned" in response.text and "record_effect returned" in resumed.text

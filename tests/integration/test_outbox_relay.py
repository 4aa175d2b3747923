"""A relay that dies between a state write and the broker loses no task and doubles no effect.

RabbitMQ is the broker, so a prompt's `advance` waits in the task outbox (written by the submit
script with the turn) until a relay publishes it. Here a relay dies after taking the entry and
before publishing it, or after publishing it and before acknowledging it; a real worker started
afterwards must run the turn, and its tool, exactly once in effect. And `signoff beat` relays
too: a schedule's fire reaches RabbitMQ with no worker up.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from shared.client import Client
from shared.client.outbox import OutboxTask
from shared.client.tasks import TaskSender, queue_name
from shared.models.agents import NewAgent
from shared.models.events import ConversationStatus
from shared.models.schedules import NewSchedule
from shared.models.steps import StepType
from shared.store.task_outbox import TaskOutbox
from tests.integration.test_expiry import BeatProcess
from tests.rabbitmq import WORKER_START_S, VHost, env_settings, ready
from tests.stack import WorkerProcess, effect_prompt, lengths_of
from tests.web.conftest import wait_for
from worker.relay import LEASE_MS, Relay, app_publisher

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]

EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], rabbitmq: VHost) -> dict[str, str]:
    return {**stack_env, "SIGNOFF_BROKER_URL": rabbitmq.url}


class RelayDied(Exception):
    """The relay's process ending where the test says."""


def die(task: OutboxTask) -> None:
    raise RelayDied(task.args[0])


def outbox_of(client: Client) -> TaskOutbox:
    return TaskOutbox(client.redis, client.keys, 0, lease_ms=LEASE_MS)


def lengths(client: Client) -> tuple[int, int]:
    """Entries (waiting in the outbox, taken by a relay and not acknowledged)."""
    keys = client.keys
    return lengths_of(client, keys.task_outbox), lengths_of(client, keys.task_outbox_relaying)


def test_a_relay_dying_before_it_publishes_leaves_the_task_to_the_next(
    stack_env: dict[str, str], effects: Path
) -> None:
    with Client(env_settings(stack_env)) as client:
        conversation = client.new_conversation()
        turn = conversation.send(effect_prompt("published-late"))
        assert lengths(client) == (1, 0)  # no worker: the task waits with its turn
        with pytest.raises(RelayDied):
            Relay(outbox_of(client), die, token="dead").step()
        assert lengths(client) == (0, 1)  # taken, never published, its lease still running
        worker = WorkerProcess(stack_env).start(WORKER_START_S)
        try:
            response = conversation.wait_for_turn(turn, timeout=30)
        finally:
            worker.stop()
        assert "record_effect returned" in response.text
        assert effects.read_text().count(" published-late\n") == 1
        assert lengths(client) == (0, 0)


def test_a_relay_dying_after_it_publishes_has_it_published_again_and_it_runs_once(
    stack_env: dict[str, str], effects: Path
) -> None:
    with Client(env_settings(stack_env)) as client:
        conversation = client.new_conversation()
        cid = conversation.conversation_id
        turn = conversation.send(effect_prompt("published-twice"))
        sender = TaskSender(client.settings)
        try:
            [raw] = taken(outbox_of(client), "dead")
            app_publisher(sender.app)(OutboxTask.model_validate_json(raw))  # no acknowledgement
        finally:
            sender.close()
        worker = WorkerProcess(stack_env).start(WORKER_START_S)
        try:
            response = conversation.wait_for_turn(turn, timeout=30)
            deadline = time.monotonic() + 20  # the dead relay's lease lapses; it is sent again
            while worker.log().count(f"advance {cid}:") < 2 or lengths(client) != (0, 0):
                assert time.monotonic() < deadline, worker.log()[-3000:]
                time.sleep(0.1)
        finally:
            worker.stop()
        assert "record_effect returned" in response.text
        assert effects.read_text().count(" published-twice\n") == 1
        assert [s.type for s in response.steps].count(StepType.TOOL_RESULT) == 1
        assert conversation.turn_count == 1


def taken(outbox: TaskOutbox, token: str) -> list[str]:
    """What `token` takes once the lease is free (a relay of an earlier test may hold it)."""
    deadline = time.monotonic() + LEASE_MS / 1000 + 2
    while (entries := outbox.take(token, 10)) is None:
        assert time.monotonic() < deadline, "the relay lease was never free"
        time.sleep(0.1)
    return entries


def test_a_schedule_fire_leaves_through_beats_relay_with_no_worker_up(
    stack_env: dict[str, str],
) -> None:
    with Client(env_settings(stack_env)) as client:
        stores = client.stores
        stores.agents.create(NewAgent(name="ticker", system_prompt="Be brief."), actor="test")
        beat = BeatProcess({**stack_env, "SIGNOFF_SCHEDULE_POLL_S": "0.2"}).start()
        sender = TaskSender(client.settings)
        try:
            stores.schedules.create(
                NewSchedule(name="every2", agent="ticker", prompt="tick", cron="*/2 * * * * *"),
                actor="test",
            )
            wait_for(lambda: bool(stores.schedules.runs("every2")), "a fire", timeout_s=10)
            stores.schedules.pause("every2")
            turns = queue_name(client.settings)
            wait_for(  # no worker runs: beat's relay took the fire's `advance` to RabbitMQ
                lambda: lengths(client) == (0, 0) and ready(sender, turns) >= 1,
                "the fire's advance on RabbitMQ's turns queue",
            )
        finally:
            sender.close()
            beat.stop()
        worker = WorkerProcess(stack_env).start(WORKER_START_S)
        try:
            for run in stores.schedules.runs("every2"):
                assert run.conversation_id is not None
                conversation = client.conversation(run.conversation_id)
                wait_for(
                    lambda c=conversation: (
                        c.status is ConversationStatus.IDLE and c.turn_count == 1
                    ),
                    "the fired turn to complete",
                )
        finally:
            worker.stop()


def test_a_killed_workers_relay_is_taken_over_by_the_next_worker(
    stack_env: dict[str, str], effects: Path
) -> None:
    with Client(env_settings(stack_env)) as client:
        lease = client.keys.task_relay_lease(0)
        first = WorkerProcess(stack_env, name="w1").start(WORKER_START_S)
        try:
            wait_for(lambda: client.redis.exists(lease) == 1, "the first worker's relay lease")
        finally:
            first.kill()  # SIGKILL: its lease stays until it lapses
        conversation = client.new_conversation()
        turn = conversation.send(effect_prompt("after-a-kill"))
        second = WorkerProcess(stack_env, name="w2").start(WORKER_START_S)
        try:
            response = conversation.wait_for_turn(turn, timeout=30)
        finally:
            second.stop()
        assert "record_effect returned" in response.text
        assert effects.read_text().count(" after-a-kill\n") == 1
        assert lengths(client) == (0, 0)

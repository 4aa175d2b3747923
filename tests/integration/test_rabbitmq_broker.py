"""RabbitMQ as the broker, state in Redis: prompts, approvals and batches run end to end.

A real redis-server (the session's), a real RabbitMQ on a vhost of this module's own, and a
real worker. The queues must be quorum queues, the tasks of state writes must travel through
the outbox and leave nothing in Redis's Celery lists, and a countdown must wait in
RabbitMQ's delay queues.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.client.tasks import ADVANCE, TaskSender, queue_name, webhook_queue_name
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow
from shared.models.steps import StepType
from shared.validation import validate_prompt
from tests.integration.test_cli_approvals import doctor_lines
from tests.rabbitmq import WORKER_START_S as WORKER_START_S  # the module worker's start
from tests.rabbitmq import VHost, env_settings, ready
from tests.stack import WorkerProcess, effect_prompt, lengths_of, parked, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]

EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)


@pytest.fixture(scope="module")
def vhost(rabbitmq: VHost) -> VHost:
    return rabbitmq


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], vhost: VHost) -> dict[str, str]:
    return {**stack_env, "SIGNOFF_BROKER_URL": vhost.url}


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    with Client(env_settings(stack_env)) as signoff:
        yield signoff


def test_a_prompt_runs_to_completion_on_quorum_queues(
    client: Client, vhost: VHost, worker: WorkerProcess
) -> None:
    # both Celery workers bound every queue for delayed delivery on this fresh vhost (each
    # declares them first: the other's queue was not there yet, and binding it failed)
    assert "Failed to bind" not in worker.log()
    assert "delayed delivery will not be available" not in worker.log()
    conversation = client.new_conversation()
    response = conversation.chat_to_completion("hello over rabbitmq")
    assert response.text
    queues = vhost.queues()
    for name in (queue_name(client.settings), webhook_queue_name(client.settings)):
        assert queues[name]["type"] == "quorum", queues
    # the prompt's `advance` went through the outbox, not into Redis's Celery list
    assert not client.redis.exists(client.keys.celery_queue(queue_name(client.settings)))
    assert lengths_of(client, client.keys.task_outbox) == 0
    assert lengths_of(client, client.keys.task_outbox_relaying) == 0


def test_an_approval_parks_and_resumes_after_its_resolution(client: Client, effects: Path) -> None:
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("rabbit-approved"))
    [note] = parked(conversation)
    assert not effects.exists() or "rabbit-approved" not in effects.read_text()
    client.resolve_notification(note.id, Allow(), actor="alice")
    response = conversation.wait_for_turn(turn, timeout=30)
    assert "record_effect returned" in response.text
    assert effects.read_text().count(" rabbit-approved\n") == 1
    assert [s.type for s in response.steps].count(StepType.TOOL_RESULT) == 1


def test_a_batch_finishes(tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess) -> None:
    source = tmp_path / "items.jsonl"
    rows = [{"id": f"i{n}", "prompt": f"item {n}"} for n in range(6)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out.jsonl"
    result = run_cli(
        stack_env, "batch", "run", str(source), "--out", str(out), "--max-concurrency", "2"
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == [f"i{n}" for n in range(6)]
    assert {line["status"] for line in lines} == {"done"}


def test_a_countdown_waits_in_rabbitmq_delay_queues(client: Client, vhost: VHost) -> None:
    """A task sent with a countdown sits in a `celery_delayed_*` quorum queue until due."""
    conversation = client.new_conversation()
    prompt = validate_prompt("later, please", client.settings)
    turn = client.store.submit(conversation.conversation_id, prompt).turn_id  # no `advance`
    sender = TaskSender(client.settings)
    try:
        sent = time.monotonic()
        sender.app.send_task(ADVANCE, args=[conversation.conversation_id], countdown=3)
        # 3 s = 0b11: two seconds in level 1's queue, one in level 0's, then the turns queue
        assert ready(sender, "celery_delayed_1") == 1
        response = conversation.wait_for_turn(turn, timeout=30)
    finally:
        sender.close()
    assert response.text
    assert time.monotonic() - sent >= 2.5  # not delivered before its countdown
    assert conversation.status is ConversationStatus.IDLE
    assert vhost.queues()["celery_delayed_1"]["type"] == "quorum"


def test_doctor_says_which_broker_is_used(
    stack_env: dict[str, str], client: Client, vhost: VHost
) -> None:
    lines = doctor_lines(run_cli(stack_env, "doctor"))
    assert lines["broker"] == (
        f"ok RabbitMQ, quorum queues at amqp://guest:***@127.0.0.1:5672/{vhost.name} (tasks of "
        "state writes relayed from the outbox); 0 in the outbox"
    )
    assert re.fullmatch(r"ok 2 answered: w1-webhooks@\S+, w1@\S+", lines["workers"])
    away = {**stack_env, "SIGNOFF_BROKER_URL": "amqp://guest:guest@127.0.0.1:1/none"}
    result = run_cli(away, "doctor")
    assert result.returncode == 1
    assert doctor_lines(result)["broker"].startswith("FAIL RabbitMQ, quorum queues at amqp://")
    # a CLI not told of the broker pings through the state Redis, where no worker listens
    untold = {k: v for k, v in stack_env.items() if k != "SIGNOFF_BROKER_URL"}
    workers = doctor_lines(run_cli({**untold, "SIGNOFF_BROKER_URL": ""}, "doctor"))["workers"]
    assert workers.startswith("warn no worker answered") and "through the state Redis" in workers
    assert "SIGNOFF_BROKER_URL must be the same" in workers

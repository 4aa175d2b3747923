"""Redis restarted under a running system (AOF on, as in production): nothing lost, work goes on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.steps import StepType
from shared.settings import Settings
from tests.stack import WorkerProcess

# one Redis: restarts the one Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]


@pytest.fixture
def durable_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("aof"), appendonly=True).start()
    yield server
    server.stop()


def test_history_survives_and_turns_continue_after_a_redis_restart(
    durable_redis: EmbeddedRedis,
) -> None:
    env = {
        "SIGNOFF_REDIS_URL": durable_redis.url,
        "SIGNOFF_KEY_PREFIX": f"rr{uuid.uuid4().hex[:6]}",
    }
    worker = WorkerProcess(env, concurrency=2, name="survivor").start()
    settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"])
    try:
        with Client(settings) as client:
            conversation = client.new_conversation()
            first = conversation.chat_to_completion("before the restart")
            durable_redis.restart()
            second = conversation.chat_to_completion("after the restart")
            history = conversation.history
    finally:
        worker.stop()
    assert "before the restart" in first.text and "after the restart" in second.text
    assert [s.content for s in history if s.type is StepType.USER_INPUT] == [
        "before the restart",
        "after the restart",
    ]
    assert conversation.turn_count == 2

"""A worker SIGKILLed mid-turn: the turn completes afterwards, exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.models.steps import StepType
from shared.settings import Settings
from tests.stack import WorkerProcess

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


def wait_until(condition, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_sigkill_mid_turn_completes_exactly_once(
    signoff: Client, stack_env: dict[str, str]
) -> None:
    effects = Path(stack_env["SIGNOFF_TEST_EFFECTS"])
    first = WorkerProcess(stack_env, concurrency=1, name="doomed").start()
    conversation = signoff.new_conversation(allow_all=True)
    turn = conversation.send('call record_effect {"note": "once"} #slow')
    steps = conversation.receive_steps(turn)
    seen_result = False
    for step in steps:
        seen_result = seen_result or step.type is StepType.TOOL_RESULT
        if seen_result and step.thinking_delta:  # the second model call is streaming
            break
    first.kill()
    cid = conversation.conversation_id
    wait_until(lambda: not signoff.redis.exists(signoff.keys.lease(cid)))
    second = WorkerProcess(stack_env, concurrency=1, name="rescuer").start()
    try:
        signoff.tasks.sweep()
        response = conversation.wait_for_turn(turn, timeout=30)
    finally:
        second.stop()
    assert effects.read_text().count(" once\n") == 1
    history = conversation.history
    assert [s.type for s in history].count(StepType.USER_INPUT) == 1
    assert [s.type for s in history].count(StepType.TOOL_RESULT) == 1
    assert [s.type for s in history].count(StepType.FINISH) == 1
    assert [s.step_index for s in history] == list(range(len(history)))
    model_usage = [
        s.usage_metadata for s in history if s.usage_metadata and s.type is not StepType.FINISH
    ]
    total = model_usage[0]
    for usage in model_usage[1:]:
        total = total + usage
    assert conversation.total_usage == total
    assert response.usage_metadata == total
    assert "record_effect returned" in response.text


def test_sigkill_while_a_tool_runs_never_runs_it_twice(
    signoff: Client, stack_env: dict[str, str]
) -> None:
    effects = Path(stack_env["SIGNOFF_TEST_EFFECTS"])
    slow_tool = {**stack_env, "SIGNOFF_TEST_EFFECT_DELAY_S": "30"}
    first = WorkerProcess(slow_tool, concurrency=1, name="doomed2").start()
    conversation = signoff.new_conversation(allow_all=True)
    turn = conversation.send('call record_effect {"note": "in-flight"}')
    wait_until(lambda: effects.exists() and " in-flight\n" in effects.read_text())
    first.kill()
    cid = conversation.conversation_id
    wait_until(lambda: not signoff.redis.exists(signoff.keys.lease(cid)))
    second = WorkerProcess(stack_env, concurrency=1, name="rescuer2").start()
    try:
        signoff.tasks.sweep()
        response = conversation.wait_for_turn(turn, timeout=30)
    finally:
        second.stop()
    assert effects.read_text().count(" in-flight\n") == 1
    results = [s for s in conversation.history if s.type is StepType.TOOL_RESULT]
    assert len(results) == 1
    assert "it was not run again" in results[0].error
    assert "record_effect failed" in response.text

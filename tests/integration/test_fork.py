"""Forking end to end: a real Redis, a real worker, the scripted model, the CLI in process."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.models.steps import StepType


def test_a_fork_keeps_the_first_steps_and_goes_on_from_there(client: Client) -> None:
    original = client.new_conversation(allow_all=True)
    first = original.chat_to_completion('call calculator {"expression": "6*7"}')
    original.chat_to_completion("a second turn")
    before = original.snapshot()
    k = before.turn_start_indices[1]  # the whole first turn, its tool call and result
    assert k > 3 and before.steps[k - 1].type is StepType.FINISH

    fork = original.fork(k)
    assert fork.is_idle and fork.history == before.steps[:k]
    assert fork.turn_count == 1 and fork.total_usage == first.usage_metadata
    assert first.usage_metadata is not None and first.usage_metadata.total_token_count > 0
    response = fork.chat_to_completion("a different second turn")
    assert response.text.startswith("[demo model]")
    after = fork.snapshot()
    assert after.steps[:k] == before.steps[:k]
    assert after.steps[k].type is StepType.USER_INPUT
    assert after.steps[k].content == "a different second turn"
    assert after.turn_start_indices == [0, k] and after.last_response == response.text
    assert original.snapshot() == before


def test_signoff_conversation_fork(client: Client, stack_env: dict[str, str]) -> None:
    original = client.new_conversation()
    original.chat_to_completion("hello")
    runner = CliRunner(env=stack_env)
    made = runner.invoke(cli, ["conversation", "fork", original.conversation_id, "--at-step", "1"])
    assert made.exit_code == 0, made.stderr
    new = json.loads(made.stdout)["conversation_id"]
    assert client.conversation(new).history == original.history[:1]
    beyond = runner.invoke(
        cli, ["conversation", "fork", original.conversation_id, "--at-step", "99"]
    )
    assert beyond.exit_code == 1 and "at_step" in beyond.stderr

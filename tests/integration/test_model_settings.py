"""Model settings, end to end: a real worker sends them to stand-in OpenAI and Ollama servers
(a prompt's win for its turn, an agent's under a conversation's, the defaults of settings),
and a setting the provider cannot honour is refused at every edge before anything is queued."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.errors import InvalidInput
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.model_settings import ModelSettings
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.stack import WorkerProcess
from tests.wire_servers import WireServer, chat_chunk, ndjson, ollama_line, sse, usage_chunk

__all__ = ["model_server"]  # a fixture of this module


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    return stand_in_env(redis_server, model_server, SIGNOFF_MAX_OUTPUT_TOKENS="321")


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    with stack_client(stack_env, worker, max_output_tokens=321) as signoff:
        yield signoff


def openai_answer(text: str = "ok") -> object:
    return sse(chat_chunk(content=text), chat_chunk(finish_reason="stop"), usage_chunk(10, 2))


def ollama_answer(text: str = "ok") -> object:
    final = {"done_reason": "stop", "prompt_eval_count": 10, "eval_count": 2}
    return ndjson(ollama_line(content=text), ollama_line(done=True, **final))


def test_openai_wire_carries_settings_and_the_prompt_wins_for_its_turn(
    client: Client, model_server: WireServer
) -> None:
    model_server.script(openai_answer(), openai_answer(), openai_answer())
    conversation = client.new_conversation(
        provider="openai",
        model="m",
        model_settings={
            "max_output_tokens": 40,
            "temperature": 0.3,
            "top_p": 0.9,
            "stop": ["END"],
            "seed": 7,
            "reasoning_effort": "low",
            "extra": {"top_k": 5},
        },
    )
    conversation.chat_to_completion("first")
    conversation.chat_to_completion(
        "second", model_settings={"max_output_tokens": 3, "extra": {"min_p": 0.1}}
    )
    conversation.chat_to_completion("third")
    first, second, third = model_server.bodies()[-3:]
    assert first["max_tokens"] == 40
    assert (first["temperature"], first["top_p"], first["stop"], first["seed"]) == (
        0.3,
        0.9,
        ["END"],
        7,
    )
    assert first["reasoning_effort"] == "low" and first["top_k"] == 5
    assert "parallel_tool_calls" not in first and "min_p" not in first
    assert second["max_tokens"] == 3 and second["temperature"] == 0.3
    assert (second["top_k"], second["min_p"]) == (5, 0.1)
    assert third["max_tokens"] == 40 and "min_p" not in third
    shown = conversation.record().config.model_settings
    assert shown.max_output_tokens == 40 and shown.extra == {"top_k": 5}


def test_default_max_output_tokens_comes_from_settings(
    client: Client, model_server: WireServer
) -> None:
    model_server.script(openai_answer())
    conversation = client.new_conversation(provider="openai", model="m")
    conversation.chat_to_completion("hello")
    assert model_server.bodies()[-1]["max_tokens"] == 321
    assert conversation.record().config.model_settings == ModelSettings(max_output_tokens=321)


def test_ollama_native_options_and_think_level(client: Client, model_server: WireServer) -> None:
    model_server.script(ollama_answer())
    agent = NewAgent(
        name=f"o{uuid.uuid4().hex[:6]}",
        provider="ollama",
        model="qwen",
        model_settings=ModelSettings(temperature=0.1, seed=3, reasoning_effort="high"),
    )
    client.stores.agents.create(agent, actor="test")
    conversation = client.new_conversation(
        agent=agent.name, model_settings={"max_output_tokens": 25, "stop": ["\n\n"]}
    )
    conversation.chat_to_completion("hello")
    body = model_server.bodies()[-1]
    assert body["options"] == {"num_predict": 25, "temperature": 0.1, "seed": 3, "stop": ["\n\n"]}
    assert body["think"] == "high"


def _queued(client: Client) -> int:
    prefix = client.settings.key_prefix
    return sum(1 for _ in client.redis.scan_iter(f"{prefix}:*", count=1000))


def test_a_setting_ollama_cannot_honour_is_refused_at_every_edge(
    client: Client, stack_env: dict[str, str], model_server: WireServer
) -> None:
    requests_before = len(model_server.requests)
    keys_before = _queued(client)
    with pytest.raises(InvalidInput, match=r"parallel_tool_calls: provider 'ollama' cannot"):
        client.new_conversation(
            provider="ollama", model="qwen", model_settings={"parallel_tool_calls": False}
        )
    with pytest.raises(InvalidInput, match=r"extra: num_predict for provider 'ollama'"):
        client.new_conversation(
            provider="ollama", model="qwen", model_settings={"extra": {"num_predict": 5}}
        )
    assert _queued(client) == keys_before

    # the CLI: a message naming the setting and the provider, a non-zero exit
    runner = CliRunner(env=stack_env)
    refused = runner.invoke(
        cli, ["agent", "create", "fast", "--provider", "ollama", "--no-parallel-tool-calls"]
    )
    assert refused.exit_code != 0
    assert "parallel_tool_calls" in refused.output and "'ollama'" in refused.output

    assert len(model_server.requests) == requests_before

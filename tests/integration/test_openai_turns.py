"""A real worker driving the openai provider against a local server speaking its wire format:
structured output with its one repair, thinking, parallel tool calls, and HTTP failures."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from shared.models.steps import StepStatus, StepType
from tests.stack import WorkerProcess
from tests.wire_servers import WireServer, chat_chunk, openai_error, sse, tool_fragment, usage_chunk

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0}},
    "required": ["score"],
}


@pytest.fixture(scope="module")
def model_server() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


STACK_ENV: dict[str, str] = {}  # the model server is a fixture: added below


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], model_server: WireServer) -> dict[str, str]:
    return stack_env | {
        "SIGNOFF_OPENAI_BASE_URL": f"{model_server.url}/v1",
        "SIGNOFF_OPENAI_API_KEY": "sk-test-secret",
        "SIGNOFF_PROVIDER_MAX_RETRIES": "1",
    }


def answer(text: str, *, thinking: str | None = None, usage: tuple[int, int] = (10, 5)) -> object:
    chunks = [chat_chunk(role="assistant", reasoning_content=thinking)] if thinking else []
    return sse(
        *chunks, chat_chunk(content=text), chat_chunk(finish_reason="stop"), usage_chunk(*usage)
    )


def test_invalid_structured_output_gets_one_repair(
    client: Client, model_server: WireServer
) -> None:
    model_server.script(answer('{"score": -1}'), answer('```json\n{"score": 7}\n```'))
    conversation = client.new_conversation(
        provider="openai", model="exact-model", response_schema=SCHEMA
    )
    response = conversation.chat_to_completion("rate it")
    assert response.structured_output == {"score": 7}
    repair = next(s for s in response.steps if s.type is StepType.SYSTEM_MESSAGE)
    assert "$.score: -1 is less than the minimum of 0" in repair.content
    second_request = model_server.bodies()[-1]
    assert second_request["model"] == "exact-model"
    assert "-1 is less than the minimum" in second_request["messages"][-1]["content"]
    assert second_request["response_format"]["json_schema"]["schema"] == SCHEMA


def test_structured_output_still_invalid_after_the_repair_fails(
    client: Client, model_server: WireServer
) -> None:
    model_server.script(answer("not json at all"), answer('{"points": 3}'))
    conversation = client.new_conversation(provider="openai", model="m", response_schema=SCHEMA)
    with pytest.raises(
        TurnFailed, match=r"invalid against the response schema: \$: 'score' is a required"
    ):
        conversation.chat_to_completion("rate it")
    assert conversation.history[-1].status is StepStatus.ERROR


def test_a_lone_surrogate_in_the_stream_is_replaced_and_the_turn_completes(
    client: Client, model_server: WireServer
) -> None:
    # JSON may escape half of a surrogate pair ("\\ud800"): no UTF-8 write takes it
    model_server.script(answer("broken \ud800 pair"))
    conversation = client.new_conversation(provider="openai", model="exact-model")
    response = conversation.chat_to_completion("say something")
    assert response.text == "broken \ufffd pair"
    assert conversation.last_response == "broken \ufffd pair"


def test_thinking_parallel_tool_calls_and_usage(client: Client, model_server: WireServer) -> None:
    calls = sse(
        chat_chunk(role="assistant", reasoning_content="Two sums at once."),
        chat_chunk(tool_calls=[tool_fragment(0, id="c1", name="calculator", arguments='{"expr')]),
        chat_chunk(
            tool_calls=[
                tool_fragment(1, id="c2", name="calculator", arguments='{"expression": "2+2"}')
            ]
        ),
        chat_chunk(tool_calls=[tool_fragment(0, arguments='ession": "1+1"}')]),
        chat_chunk(finish_reason="tool_calls"),
        usage_chunk(20, 8),
    )
    model_server.script(calls, answer("Both done: 2 and 4.", usage=(40, 6)))
    conversation = client.new_conversation(provider="openai", model="m", allow_all=True)
    response = conversation.chat_to_completion("add things")
    results = [s for s in response.steps if s.type is StepType.TOOL_RESULT]
    assert [json.loads(r.content)["result"]["result"] for r in results] == [2, 4]
    assert response.thinking == "Two sums at once."
    assert (
        response.usage_metadata is not None and response.usage_metadata.total_token_count == 28 + 46
    )
    tool_messages = [m for m in model_server.bodies()[-1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2"]


def test_http_failures_end_the_turn_with_the_status_code(
    client: Client, model_server: WireServer
) -> None:
    model_server.script(openai_error(500, "boom"), openai_error(500, "boom again"))
    conversation = client.new_conversation(provider="openai", model="m")
    with pytest.raises(TurnFailed, match="model call failed"):
        conversation.chat_to_completion("hello")
    assert conversation.history[-1].http_code == 500
    model_server.script(
        openai_error(429, "slow down", headers={"Retry-After": "0"}), answer("recovered")
    )
    assert (
        client.new_conversation(provider="openai", model="m").chat_to_completion("again").text
        == "recovered"
    )


def test_the_api_key_never_reaches_the_logs(
    client: Client, model_server: WireServer, worker: WorkerProcess
) -> None:
    model_server.script(answer("fine"))
    client.new_conversation(provider="openai", model="m").chat_to_completion("hi")
    assert model_server.requests[-1].headers["authorization"] == "Bearer sk-test-secret"
    assert "sk-test-secret" not in worker.log()


def test_the_worker_leaves_its_start_up_heap_out_of_garbage_collection(
    worker: WorkerProcess,
) -> None:
    frozen = re.findall(r"garbage collection: (\d+) start-up objects frozen", worker.log())
    assert len(frozen) == 2  # the turns worker and the deliveries worker
    assert all(int(count) > 100_000 for count in frozen)  # Celery, the SDKs, pydantic

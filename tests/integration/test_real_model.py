"""The OpenAI-compatible provider against a real model: Gemma 3 270M on llama-cpp-python's server.

Every request goes through a recording relay (a `WireServer` whose replies are
fetched from the real server), so a test can hold what the provider sent and the
raw SSE the server answered next to the events the provider made of it. The
model is tiny and base-trained: tests assert the shape of what comes back, never
its wording. See docs/real-model.md for the server's quirks shown here.

The tool round trip runs twice: through the provider with a hand-built history,
and as a whole turn in a real worker (Redis, Celery) whose model calls go
through a relay as well.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from shared.models.config import ToolSelection
from shared.models.steps import StepSource, StepType
from tests.real_model import MODEL_ALIAS, llama_server
from tests.wire_servers import RecordedRequest, Reply, WireServer
from worker.providers.base import (
    FinishEvent,
    Message,
    ModelRequest,
    ProviderEvent,
    Role,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
    UsageEvent,
)
from worker.providers.openai_provider import OpenAIProvider, parse_arguments, raw_arguments

pytestmark = pytest.mark.integration

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
ASK_WEATHER = (Message(Role.USER, "What is the weather in Paris?"),)
GREEDY = {"temperature": 0, "seed": 1}
# llama-cpp-python ignores tool_choice "required"; naming the function is what it honours.
NAMED_WEATHER = {"type": "function", "function": {"name": WEATHER.name}}


class Relay:
    """A responder that forwards each request to the real server and keeps the raw answer.

    `max_tokens` caps the answers of requests that set no cap of their own, so the base
    model's rambling stays within the test's time.
    """

    def __init__(self, upstream_base_url: str, *, max_tokens: int | None = None) -> None:
        parts = urlsplit(upstream_base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._max_tokens = max_tokens
        self._lock = threading.Lock()
        self.answers: list[bytes] = []
        self.statuses: list[int] = []
        self.content_types: list[str] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=60)
        try:
            headers = {
                name: value
                for name, value in request.headers.items()
                if name in ("content-type", "accept", "authorization")
            }
            connection.request(request.method, request.path, self._body(request), headers)
            response = connection.getresponse()
            body = response.read()
            content_type = response.getheader("Content-Type") or "application/octet-stream"
        finally:
            connection.close()
        with self._lock:
            self.answers.append(body)
            self.statuses.append(response.status)
            self.content_types.append(content_type)
        streamed = content_type.startswith("text/event-stream")
        return Reply(response.status, {"Content-Type": content_type}, (body,), streamed=streamed)

    def _body(self, request: RecordedRequest) -> bytes | None:
        if self._max_tokens is None or not request.body:
            return request.body or None
        body = request.json()
        body.setdefault("max_tokens", self._max_tokens)
        return json.dumps(body).encode()

    def chunks(self, answer: int = -1) -> list[dict[str, Any]]:
        """The JSON chunks of one recorded SSE answer (``[DONE]`` left out)."""
        events = []
        for line in self.answers[answer].decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line.removeprefix("data: ")))
        return events


@pytest.fixture(scope="module")
def llama_base_url() -> Iterator[str]:
    """The real server for this module: started once, stopped after the last test."""
    with llama_server(threads=2, n_ctx=1024) as base_url:
        yield base_url


@pytest.fixture
def relay(llama_base_url: str) -> Iterator[tuple[WireServer, Relay]]:
    forward = Relay(llama_base_url)
    with WireServer() as wire:
        wire.script(*[forward] * 4)
        yield wire, forward


@pytest.fixture
def provider(relay: tuple[WireServer, Relay]) -> Iterator[OpenAIProvider]:
    wire, _ = relay
    client = OpenAIProvider(base_url=f"{wire.url}/v1", api_key="", timeout_s=60, max_retries=0)
    yield client
    client.close()


def request_for(**fields: Any) -> ModelRequest:
    return ModelRequest(model=MODEL_ALIAS, messages=ASK_WEATHER, **fields)


def run(provider: OpenAIProvider, request: ModelRequest) -> list[ProviderEvent]:
    return list(provider.stream(request))


def tool_fragments(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fragments: list[dict[str, Any]] = []
    for chunk in chunks:
        for choice in chunk.get("choices") or ():
            fragments.extend((choice.get("delta") or {}).get("tool_calls") or ())
    return fragments


def test_plain_prompt_streams_text_and_tolerates_missing_usage(
    provider: OpenAIProvider, relay: tuple[WireServer, Relay]
) -> None:
    wire, forward = relay
    events = run(provider, request_for(options={**GREEDY, "max_tokens": 24}))

    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert text.strip(), events
    assert isinstance(events[-1], FinishEvent)
    assert events[-1].reason in ("stop", "length")
    assert all(isinstance(event, TextDelta | UsageEvent) for event in events[:-1]), events
    # The provider asked for usage; llama-cpp-python accepts the option and sends none.
    assert wire.bodies()[-1]["stream_options"] == {"include_usage": True}
    server_sent_usage = any(chunk.get("usage") for chunk in forward.chunks())
    assert any(isinstance(event, UsageEvent) for event in events) is server_sent_usage


def test_required_tool_selection_yields_a_tool_call(provider: OpenAIProvider) -> None:
    events = run(
        provider,
        request_for(
            tools=(WEATHER,),
            tool_selection=ToolSelection.REQUIRED,
            options={**GREEDY, "max_tokens": 64},
        ),
    )

    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert calls, (
        "tool_selection REQUIRED produced no tool call: llama-cpp-python's chat handlers ignore "
        'tool_choice "required" (the gemma format answers in text; chatml-function-calling fails '
        "with an AssertionError) and honour only a named function. The provider must send "
        '{"type": "function", "function": {"name": ...}} when REQUIRED comes with exactly one '
        "tool. See docs/real-model.md. Events: " + repr(events)[:500]
    )
    assert calls[0].name == WEATHER.name
    assert isinstance(calls[0].args, dict)
    assert isinstance(events[-1], FinishEvent)


def test_named_tool_fragments_join_into_one_call(
    provider: OpenAIProvider, relay: tuple[WireServer, Relay]
) -> None:
    _, forward = relay
    options = {**GREEDY, "max_tokens": 64, "tool_choice": NAMED_WEATHER}
    events = run(provider, request_for(tools=(WEATHER,), options=options))

    fragments = tool_fragments(forward.chunks())
    # The server's quirk: every fragment repeats the same id and the whole name.
    assert len(fragments) > 1
    assert {fragment["id"] for fragment in fragments} == {fragments[0]["id"]}
    assert {fragment["function"]["name"] for fragment in fragments} == {WEATHER.name}

    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert len(calls) == 1, events
    assert calls[0].id == fragments[0]["id"]
    assert calls[0].name == WEATHER.name
    joined = "".join(fragment["function"]["arguments"] for fragment in fragments)
    assert calls[0].args == parse_arguments(joined)
    if raw_arguments(calls[0].args) is None:  # complete JSON: the grammar kept to the schema
        assert isinstance(calls[0].args.get("city"), str)
    assert events[-1] == FinishEvent("tool_calls")


def test_truncated_tool_arguments_follow_the_raw_convention(
    provider: OpenAIProvider, relay: tuple[WireServer, Relay]
) -> None:
    _, forward = relay
    options = {**GREEDY, "max_tokens": 3, "tool_choice": NAMED_WEATHER}
    events = run(provider, request_for(tools=(WEATHER,), options=options))

    joined = "".join(f["function"]["arguments"] for f in tool_fragments(forward.chunks()))
    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert len(calls) == 1, events
    assert calls[0].name == WEATHER.name
    # Three tokens cannot close the object; the server still says "tool_calls", not "length".
    assert raw_arguments(calls[0].args) == joined
    assert events[-1] == FinishEvent("tool_calls")


def test_exact_model_name_is_sent(
    provider: OpenAIProvider, relay: tuple[WireServer, Relay], llama_base_url: str
) -> None:
    wire, forward = relay
    run(provider, request_for(options={**GREEDY, "max_tokens": 4}))

    sent = wire.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.json()["model"] == MODEL_ALIAS
    with urllib.request.urlopen(f"{llama_base_url}/models", timeout=10) as response:
        served = [entry["id"] for entry in json.load(response)["data"]]
    assert served == [MODEL_ALIAS]
    # The server echoes the requested name (it would echo an unknown one too, see the doc).
    assert {chunk["model"] for chunk in forward.chunks()} == {MODEL_ALIAS}


def test_tool_result_goes_back_to_the_server_in_a_second_call(
    provider: OpenAIProvider, relay: tuple[WireServer, Relay]
) -> None:
    wire, forward = relay
    first = run(
        provider,
        request_for(
            tools=(WEATHER,),
            tool_selection=ToolSelection.REQUIRED,
            options={**GREEDY, "max_tokens": 64},
        ),
    )
    calls = [event.call for event in first if isinstance(event, ToolCallEvent)]
    assert len(calls) == 1, first
    history = (
        *ASK_WEATHER,
        Message(Role.ASSISTANT, tool_calls=(calls[0],)),
        Message(Role.TOOL, '{"sky": "sunny"}', tool_call_id=calls[0].id, name=WEATHER.name),
    )
    # As a turn's next call: the same tools, now AUTO (llama.cpp's gemma format answers in text).
    second = run(
        provider,
        ModelRequest(
            model=MODEL_ALIAS,
            messages=history,
            tools=(WEATHER,),
            options={**GREEDY, "max_tokens": 16},
        ),
    )

    assert forward.statuses == [200, 200], forward.answers[-1][:500]
    assert forward.content_types[-1].startswith("text/event-stream")
    assert isinstance(second[-1], FinishEvent), second
    sent = wire.bodies()[-1]["messages"]
    assert [message["role"] for message in sent] == ["user", "assistant", "tool"]
    # An assistant message carrying tool calls has "" as its content: llama.cpp refuses null.
    assert sent[1]["content"] == ""
    assert [call["id"] for call in sent[1]["tool_calls"]] == [calls[0].id]
    assert sent[2] == {"role": "tool", "tool_call_id": calls[0].id, "content": '{"sky": "sunny"}'}


# A whole turn in a real worker


@pytest.fixture(scope="module")
def turn_relay(llama_base_url: str) -> Iterator[tuple[WireServer, Relay]]:
    """The relay the worker's model calls go through, as is: the turns cap their answers."""
    forward = Relay(llama_base_url)
    with WireServer() as wire:
        yield wire, forward


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], turn_relay: tuple[WireServer, Relay]) -> dict[str, str]:
    """The shared stack environment, with the openai provider pointed at the relay."""
    wire, _ = turn_relay
    return {
        **stack_env,
        "SIGNOFF_OPENAI_BASE_URL": f"{wire.url}/v1",
        "SIGNOFF_PROVIDER_MAX_RETRIES": "0",
        "SIGNOFF_PROVIDER_TIMEOUT_S": "60",
    }


def test_a_turn_sends_the_real_tool_call_and_its_result_back(
    client: Client, turn_relay: tuple[WireServer, Relay]
) -> None:
    wire, forward = turn_relay
    wire.script(*[forward] * 3)
    conversation = client.new_conversation(
        provider="openai",
        model=MODEL_ALIAS,
        tools={"calculator": "auto"},
        tool_selection=ToolSelection.REQUIRED,
        max_model_calls=3,
        model_settings={"max_output_tokens": 32},
    )
    try:
        turn_id = conversation.send("What is 2 + 3? Use the calculator.")
        conversation.wait_for_turn(turn_id, timeout=120)
    except TurnFailed as exc:
        pytest.fail(
            f"the turn failed: {exc}; server statuses {forward.statuses}, "
            f"last answer {forward.answers[-1:]!r:.300}"
        )

    steps = conversation.history
    call_at = next(i for i, s in enumerate(steps) if s.type is StepType.TOOL_CALL)
    call = steps[call_at].tool_calls[0]
    assert call.name == "calculator"
    # The small model's arguments may not evaluate: a failed result goes back just the same.
    result_at = next(i for i, s in enumerate(steps) if s.type is StepType.TOOL_RESULT)
    assert result_at > call_at
    assert steps[result_at].tool_calls[0].id == call.id
    assert any(
        s.type is StepType.TEXT_RESPONSE and s.source is StepSource.MODEL
        for s in steps[result_at + 1 :]
    ), [(s.type, s.status) for s in steps]

    assert forward.statuses == [200, 200]
    assert all(kind.startswith("text/event-stream") for kind in forward.content_types)
    sent = wire.bodies()[1]["messages"]
    tool_messages = [message for message in sent if message["role"] == "tool"]
    assert [message["tool_call_id"] for message in tool_messages] == [call.id]


def test_max_output_tokens_bounds_the_real_models_answer(
    client: Client, turn_relay: tuple[WireServer, Relay]
) -> None:
    """Asked for a long story, the model stops at the cap: the server cut it ("length")."""
    wire, forward = turn_relay
    wire.script(forward)
    conversation = client.new_conversation(
        provider="openai",
        model=MODEL_ALIAS,
        model_settings={"max_output_tokens": 6, "temperature": 0, "seed": 1},
    )
    turn_id = conversation.send("Write a very long story about a dragon and a knight.")
    response = conversation.wait_for_turn(turn_id, timeout=180)
    sent = wire.bodies()[-1]
    assert (sent["max_tokens"], sent["temperature"], sent["seed"]) == (6, 0, 1)
    chunks = forward.chunks()
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks if c.get("choices")]
    tokens = [piece for piece in pieces if piece]
    assert 0 < len(tokens) <= 6, tokens  # llama.cpp streams one token per chunk
    reasons = [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices")]
    assert "length" in reasons, reasons
    assert response.text == "".join(tokens)


@pytest.mark.timeout(300)
def test_a_long_conversation_keeps_within_the_real_models_context(
    client: Client, turn_relay: tuple[WireServer, Relay]
) -> None:
    """Turn after turn at the server's 1,024-token context (it reports no usage, so the sizes
    are Signoff's estimates): the context is compacted before it fills the window, and no turn
    fails, where without compaction the prompts would outgrow it within about 14 turns. Three
    turns after the first compaction show the conversation goes on from its summary."""
    wire, forward = turn_relay
    wire.script(*[forward] * 60)
    conversation = client.new_conversation(
        provider="openai",
        model=MODEL_ALIAS,
        tools={},
        context_tokens=1024,
        model_settings={"max_output_tokens": 24, "temperature": 0, "seed": 1},
    )
    question = "name a colour, an animal and a number, and say which of the three you like best"
    after_compaction = 0
    for n in range(20):
        turn_id = conversation.send(f"Question {n}: {question}, and why, in one short line.")
        try:
            conversation.wait_for_turn(turn_id, timeout=120)
        except TurnFailed as exc:
            pytest.fail(f"turn {n} failed: {exc}; server statuses {forward.statuses[-3:]}")
        if conversation.compaction_indices:
            after_compaction += 1
            if after_compaction == 4:  # the compacting turn and three after it
                break
    assert conversation.compaction_indices, "the context was never compacted"
    assert after_compaction == 4, f"only {after_compaction - 1} turns ran after the compaction"
    assert set(forward.statuses) == {200}

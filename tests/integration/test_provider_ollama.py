"""The Ollama provider against a local server speaking real /api/chat NDJSON over real sockets."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from shared.errors import ProviderError, RateLimited
from shared.models.config import ToolSelection
from shared.models.content import Media
from shared.models.steps import ToolCall, UsageMetadata
from shared.settings import Settings
from tests.wire_servers import (
    Reply,
    WireServer,
    ndjson,
    ollama_error,
    ollama_line,
    ollama_tool_call,
    rechunk,
)
from worker.providers.base import (
    FinishEvent,
    Message,
    ModelRequest,
    ProviderEvent,
    Role,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolSpec,
    UsageEvent,
)
from worker.providers.ollama import REQUIRED_TOOL_NUDGE, OllamaProvider
from worker.providers.plain_http import PlainHTTPTransport

MODEL = "qwen3:0.6b"
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


def provider_for(server: WireServer, **overrides: Any) -> OllamaProvider:
    options: dict[str, Any] = {
        "base_url": server.url,
        "timeout_s": 5.0,
        "max_retries": 2,
        "backoff_s": 0.001,
        "max_backoff_s": 0.002,
        "max_retry_after_s": 0.3,
    }
    return OllamaProvider(**(options | overrides))


def ask(text: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(model=MODEL, messages=(Message(Role.USER, text),), **fields)


def run(provider: OllamaProvider, request: ModelRequest | None = None) -> list[ProviderEvent]:
    return list(provider.stream(request or ask()))


def done(**counts: Any) -> dict[str, Any]:
    return ollama_line(done=True, done_reason="stop", total_duration=1_000, **counts)


def text_reply(*pieces: str) -> Reply:
    lines = [ollama_line(content=piece) for piece in pieces]
    return ndjson(*lines, done(prompt_eval_count=11, eval_count=len(pieces)))


def calls(events: list[ProviderEvent]) -> list[ToolCall]:
    return [event.call for event in events if isinstance(event, ToolCallEvent)]


# Streaming


def test_plain_text_streams_as_deltas_then_usage_then_finish(server: WireServer) -> None:
    server.script(text_reply("Hel", "lo"))

    events = run(provider_for(server))

    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageEvent(UsageMetadata.from_counts(11, 2)),
        FinishEvent("stop"),
    ]
    sent = server.requests[0]
    assert sent.path == "/api/chat"
    assert sent.json()["model"] == MODEL
    assert sent.json()["stream"] is True
    assert sent.json()["think"] is True


def test_calls_to_plain_http_go_through_the_lean_transport_and_reuse_its_connection(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    handle = PlainHTTPTransport.handle_request

    def spy(transport: PlainHTTPTransport, request: Any) -> Any:
        sent.append(str(request.url))
        return handle(transport, request)

    monkeypatch.setattr(PlainHTTPTransport, "handle_request", spy)
    server.script(text_reply("one"), text_reply("two"))
    provider = provider_for(server)

    first, second = run(provider), run(provider)

    assert first[0] == TextDelta("one") and second[0] == TextDelta("two")
    assert sent == [f"{server.url}/api/chat"] * 2
    # the second call came on the first's connection, kept alive
    assert server.requests[0].client_port == server.requests[1].client_port


def test_lines_split_across_reads_are_reassembled(server: WireServer) -> None:
    server.script(rechunk(text_reply("one ", "two ", "three"), size=7))

    events = run(provider_for(server))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["one ", "two ", "three"]


def test_thinking_becomes_thinking_deltas(server: WireServer) -> None:
    server.script(
        ndjson(
            ollama_line(thinking="Hmm, "),
            ollama_line(thinking="two plus two."),
            ollama_line(content="4"),
            done(),
        )
    )

    events = run(provider_for(server))

    assert events == [
        ThinkingDelta("Hmm, "),
        ThinkingDelta("two plus two."),
        TextDelta("4"),
        FinishEvent("stop"),
    ]


def test_absent_usage_yields_no_usage_event(server: WireServer) -> None:
    server.script(ndjson(ollama_line(content="ok"), ollama_line(done=True, done_reason="length")))

    assert run(provider_for(server)) == [TextDelta("ok"), FinishEvent("length")]


# Tool calls


def test_complete_tool_calls_get_stable_ids_when_absent(server: WireServer) -> None:
    server.script(
        ndjson(
            ollama_line(tool_calls=[ollama_tool_call("get_weather", {"city": "Rome"}, index=0)]),
            ollama_line(
                tool_calls=[
                    ollama_tool_call("get_time", {"zone": "UTC"}, index=1),
                    ollama_tool_call("get_weather", {"city": "Oslo"}, id="call_srv"),
                ]
            ),
            done(prompt_eval_count=20, eval_count=15),
        )
    )

    events = run(provider_for(server))

    assert calls(events) == [
        ToolCall(id="call_0", name="get_weather", args={"city": "Rome"}),
        ToolCall(id="call_1", name="get_time", args={"zone": "UTC"}),
        ToolCall(id="call_srv", name="get_weather", args={"city": "Oslo"}),
    ]
    assert events[-1] == FinishEvent("tool_calls")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Ro', {"_raw": '{"city": "Ro'}),
        ('{"city": "Rome"}', {"city": "Rome"}),
        (["Rome"], {"_raw": '["Rome"]'}),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_raw(
    server: WireServer, arguments: Any, expected: dict[str, Any]
) -> None:
    server.script(
        ndjson(ollama_line(tool_calls=[ollama_tool_call("get_weather", arguments)]), done())
    )

    assert calls(run(provider_for(server))) == [
        ToolCall(id="call_0", name="get_weather", args=expected)
    ]


# Retries and errors


def test_503_is_retried_after_the_servers_wait_capped(server: WireServer) -> None:
    server.script(ollama_error(503, "loading", headers={"Retry-After": "2"}), text_reply("ok"))

    events = run(provider_for(server))

    assert TextDelta("ok") in events
    assert len(server.requests) == 2
    waited = server.requests[1].received_at - server.requests[0].received_at
    assert 0.28 <= waited < 1.5


def test_429_is_raised_at_once_with_the_servers_wait(server: WireServer) -> None:
    """The turn pauses the provider for every worker and calls again (worker/turn.py)."""
    server.script(ollama_error(429, "too many requests", headers={"Retry-After": "2"}))

    with pytest.raises(RateLimited, match="too many requests") as info:
        run(provider_for(server, max_retries=1))

    assert (info.value.http_code, info.value.retry_after_s) == (429, 2.0)
    assert len(server.requests) == 1


def test_500_exhausted_raises_provider_error_with_the_code(server: WireServer) -> None:
    server.script(*(ollama_error(500, "llama runner process has terminated") for _ in range(3)))

    with pytest.raises(ProviderError, match="llama runner process has terminated") as info:
        run(provider_for(server, max_retries=2))

    assert info.value.http_code == 500
    assert len(server.requests) == 3


def test_404_is_not_retried_and_names_the_model(server: WireServer) -> None:
    server.script(ollama_error(404, f"model '{MODEL}' not found"), text_reply("unused"))

    with pytest.raises(ProviderError, match="not found") as info:
        run(provider_for(server))

    assert info.value.http_code == 404
    assert MODEL in str(info.value)
    assert len(server.requests) == 1


def test_error_line_mid_stream_is_a_provider_error(server: WireServer) -> None:
    server.script(ndjson(ollama_line(content="par"), {"error": "out of memory"}), text_reply("no"))

    with pytest.raises(ProviderError, match="out of memory") as info:
        run(provider_for(server))

    assert info.value.http_code == 500
    assert len(server.requests) == 1


def test_stream_cut_after_events_raises_and_is_not_replayed(server: WireServer) -> None:
    cut = ndjson(ollama_line(content="Hel"), ollama_line(content="lo"), done(), cut_after=2)
    server.script(cut, text_reply("replayed"))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderError, match="ended early") as info:
        seen.extend(provider_for(server).stream(ask()))

    assert info.value.http_code == 0
    assert seen == [TextDelta("Hel"), TextDelta("lo")]
    assert len(server.requests) == 1


def test_stream_cut_before_any_event_is_retried(server: WireServer) -> None:
    server.script(ndjson(ollama_line(content=""), done(), cut_after=1), text_reply("fine"))

    events = run(provider_for(server))

    assert events[0] == TextDelta("fine")
    assert len(server.requests) == 2


def test_stream_without_its_done_line_ended_early(server: WireServer) -> None:
    server.script(ndjson(ollama_line(content="half")))

    with pytest.raises(ProviderError, match="ended early") as info:
        run(provider_for(server, max_retries=0))

    assert info.value.http_code == 0


def test_closing_the_iterator_closes_the_http_response(server: WireServer) -> None:
    server.script(ndjson(ollama_line(content="a"), ollama_line(content="b"), hold_open_s=5))
    events = provider_for(server).stream(ask())

    assert next(events) == TextDelta("a")
    events.close()

    assert server.wait_for_disconnect(2.0)


def test_a_model_that_cannot_think_is_asked_again_without_think(server: WireServer) -> None:
    refusal = ollama_error(400, f'"{MODEL}" does not support thinking')
    server.script(refusal, text_reply("first"), text_reply("second"))
    provider = provider_for(server, max_retries=0)

    first = run(provider)
    second = run(provider)

    assert TextDelta("first") in first
    assert TextDelta("second") in second
    assert [body.get("think") for body in server.bodies()] == [True, None, None]


def test_an_explicit_think_is_not_second_guessed(server: WireServer) -> None:
    server.script(ollama_error(400, f'"{MODEL}" does not support thinking'), text_reply("no"))

    with pytest.raises(ProviderError, match="does not support thinking") as info:
        run(provider_for(server), ask(options={"think": True}))

    assert info.value.http_code == 400
    assert len(server.requests) == 1


# What the server receives


def test_request_maps_messages_images_tools_format_and_options(server: WireServer) -> None:
    server.script(text_reply("ok"))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = ModelRequest(
        model=MODEL,
        messages=(
            Message(Role.SYSTEM, "Be brief."),
            Message(Role.USER, "What is this?", media=(Media(data=PNG, mime_type="image/png"),)),
            Message(
                Role.ASSISTANT,
                tool_calls=(ToolCall(id="c1", name="get_weather", args={"city": "Paris"}),),
            ),
            Message(Role.TOOL, "sunny", tool_call_id="c1", name="get_weather"),
        ),
        tools=(WEATHER,),
        response_schema=schema,
        options={"temperature": 0.2, "num_ctx": 8192, "keep_alive": "5m"},
    )

    run(provider_for(server), request)

    body = server.requests[0].json()
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": [base64.b64encode(PNG).decode()]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather", "tool_call_id": "c1"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["format"] == schema
    assert body["options"] == {"temperature": 0.2, "num_ctx": 8192}
    assert body["keep_alive"] == "5m"


@pytest.mark.parametrize(
    ("selection", "sends_tools", "nudged"),
    [
        (ToolSelection.AUTO, True, False),
        (ToolSelection.REQUIRED, True, True),
        (ToolSelection.NONE, False, False),
    ],
)
def test_tool_selection_is_emulated(
    server: WireServer, selection: ToolSelection, sends_tools: bool, nudged: bool
) -> None:
    server.script(text_reply("ok"))

    run(provider_for(server), ask(tools=(WEATHER,), tool_selection=selection))

    body = server.requests[0].json()
    assert ("tools" in body) is sends_tools
    assert "tool_choice" not in body
    nudge = {"role": "system", "content": REQUIRED_TOOL_NUDGE}
    assert (body["messages"][-1] == nudge) is nudged


def test_media_ollama_cannot_read_fails_without_a_request(server: WireServer) -> None:
    pdf = Media(data=b"%PDF-1.7", mime_type="application/pdf")
    request = ModelRequest(model=MODEL, messages=(Message(Role.USER, "read", media=(pdf,)),))

    with pytest.raises(ProviderError, match="application/pdf") as info:
        run(provider_for(server), request)

    assert info.value.http_code == 415
    assert server.requests == []


def test_settings_configure_the_base_url(server: WireServer) -> None:
    provider = OllamaProvider(Settings(ollama_base_url=server.url, provider_max_retries=0))
    server.script(ollama_error(503, "server busy"))

    with pytest.raises(ProviderError, match="server busy"):
        run(provider)

    assert len(server.requests) == 1

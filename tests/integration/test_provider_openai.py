"""The OpenAI-compatible provider against a local server speaking real SSE over real sockets."""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from shared.errors import ProviderError, RateLimited
from shared.models.config import ToolSelection
from shared.models.content import Media
from shared.models.steps import ToolCall, UsageMetadata
from shared.settings import Settings
from tests.wire_servers import (
    WireServer,
    chat_chunk,
    openai_error,
    sse,
    tool_fragment,
    usage_chunk,
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
from worker.providers.openai_provider import OpenAIProvider

MODEL = "qwen2.5-7b-instruct-q4_k_m"
SECRET = "sk-test-do-not-log-0123456789"
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


def provider_for(server: WireServer, **overrides: Any) -> OpenAIProvider:
    options: dict[str, Any] = {
        "base_url": f"{server.url}/v1",
        "api_key": SECRET,
        "timeout_s": 5.0,
        "max_retries": 2,
        "backoff_s": 0.001,
        "max_backoff_s": 0.002,
        "max_retry_after_s": 0.3,
    }
    return OpenAIProvider(**(options | overrides))


def ask(text: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(model=MODEL, messages=(Message(Role.USER, text),), **fields)


def run(provider: OpenAIProvider, request: ModelRequest | None = None) -> list[ProviderEvent]:
    return list(provider.stream(request or ask()))


def text_reply(*pieces: str) -> Any:
    chunks = [chat_chunk(role="assistant", content="")]
    chunks += [chat_chunk(content=piece) for piece in pieces]
    return sse(*chunks, chat_chunk(finish_reason="stop"), usage_chunk(5, len(pieces)))


def calls(events: list[ProviderEvent]) -> list[ToolCall]:
    return [event.call for event in events if isinstance(event, ToolCallEvent)]


# Streaming


def test_plain_text_streams_as_deltas_then_usage_then_finish(server: WireServer) -> None:
    server.script(text_reply("Hel", "lo", " world"))

    events = run(provider_for(server))

    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(" world"),
        UsageEvent(UsageMetadata.from_counts(5, 3)),
        FinishEvent("stop"),
    ]
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json()["model"] == MODEL
    assert sent.json()["stream"] is True
    assert sent.json()["stream_options"] == {"include_usage": True}
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["user-agent"].startswith("OpenAI/Python")  # the SDK's own headers
    assert sent.headers["x-stainless-lang"] == "python"


def test_over_tls_calls_go_through_the_sdk_and_to_plain_http_straight_to_the_transport() -> None:
    tls = OpenAIProvider(base_url="https://models.example.test/v1", api_key=SECRET)
    plain = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key=SECRET)
    assert tls._direct is None
    assert plain._direct is not None
    assert str(plain._direct._url) == "http://127.0.0.1:9/v1/chat/completions"


def test_chunks_a_strict_validator_refuses_are_still_read(server: WireServer) -> None:
    # a server's chunks without id, created or object: the SDK's lenient reading takes them
    bare = [
        {key: v for key, v in chunk.items() if key not in ("id", "created", "object")}
        for chunk in (chat_chunk(content="Hel"), chat_chunk(content="lo"))
    ]
    server.script(sse(*bare, chat_chunk(finish_reason="stop")))

    events = run(provider_for(server))

    assert events == [TextDelta("Hel"), TextDelta("lo"), FinishEvent("stop")]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_become_thinking_deltas(server: WireServer, field: str) -> None:
    server.script(
        sse(
            chat_chunk(role="assistant", extra={field: "Let me"}),
            chat_chunk(extra={field: " think."}),
            chat_chunk(content="42"),
            chat_chunk(finish_reason="stop"),
        )
    )

    events = run(provider_for(server))

    assert events == [
        ThinkingDelta("Let me"),
        ThinkingDelta(" think."),
        TextDelta("42"),
        FinishEvent("stop"),
    ]


def test_usage_maps_cached_and_reasoning_tokens(server: WireServer) -> None:
    server.script(
        sse(
            chat_chunk(content="ok", finish_reason="stop"),
            usage_chunk(120, 30, cached=100, reasoning=12),
        )
    )

    events = run(provider_for(server))

    assert (
        UsageEvent(
            UsageMetadata(
                prompt_token_count=120,
                candidates_token_count=30,
                total_token_count=150,
                cached_content_token_count=100,
                thoughts_token_count=12,
            )
        )
        in events
    )
    assert events[-1] == FinishEvent("stop")


def test_absent_usage_yields_no_usage_event(server: WireServer) -> None:
    server.script(sse(chat_chunk(content="ok"), chat_chunk(finish_reason="length")))

    events = run(provider_for(server))

    assert events == [TextDelta("ok"), FinishEvent("length")]


# Tool calls


def test_arguments_fragmented_over_many_chunks_are_joined(server: WireServer) -> None:
    pieces = ['{"ci', 'ty"', ': "Pa', "ris", '", "days"', ": 3}"]
    fragments = [tool_fragment(0, id="call_abc", name="get_weather", arguments="")]
    fragments += [tool_fragment(0, arguments=piece) for piece in pieces]
    server.script(
        sse(
            *(chat_chunk(tool_calls=[fragment]) for fragment in fragments),
            chat_chunk(finish_reason="tool_calls"),
            usage_chunk(9, 9),
        )
    )

    events = run(provider_for(server))

    assert calls(events) == [
        ToolCall(id="call_abc", name="get_weather", args={"city": "Paris", "days": 3})
    ]
    assert isinstance(events[0], ToolCallEvent)
    assert events[-1] == FinishEvent("tool_calls")


def test_llama_cpp_repeating_id_and_name_on_every_fragment_gives_one_call(
    server: WireServer,
) -> None:
    pieces = ['{"city":', ' "Oslo"', "}"]
    server.script(
        sse(
            *(
                chat_chunk(tool_calls=[tool_fragment(0, id="x1", name="get_weather", arguments=p)])
                for p in pieces
            ),
            chat_chunk(finish_reason="tool_calls"),
        )
    )

    events = run(provider_for(server))

    assert calls(events) == [ToolCall(id="x1", name="get_weather", args={"city": "Oslo"})]


def test_parallel_calls_interleaved_by_index_each_yield_one_event(server: WireServer) -> None:
    server.script(
        sse(
            chat_chunk(tool_calls=[tool_fragment(0, id="a", name="get_weather", arguments="")]),
            chat_chunk(tool_calls=[tool_fragment(1, id="b", name="get_time", arguments="")]),
            chat_chunk(tool_calls=[tool_fragment(0, arguments='{"city": ')]),
            chat_chunk(tool_calls=[tool_fragment(1, arguments='{"zone": ')]),
            chat_chunk(tool_calls=[tool_fragment(1, arguments='"UTC"}')]),
            chat_chunk(tool_calls=[tool_fragment(0, arguments='"Rome"}')]),
            chat_chunk(finish_reason="tool_calls"),
        )
    )

    events = run(provider_for(server))

    assert calls(events) == [
        ToolCall(id="a", name="get_weather", args={"city": "Rome"}),
        ToolCall(id="b", name="get_time", args={"zone": "UTC"}),
    ]
    assert events[-1] == FinishEvent("tool_calls")


def test_a_new_id_at_a_reused_index_starts_a_new_call(server: WireServer) -> None:
    server.script(
        sse(
            chat_chunk(tool_calls=[tool_fragment(0, id="a", name="f", arguments='{"n": 1}')]),
            chat_chunk(tool_calls=[tool_fragment(0, id="b", name="f", arguments='{"n": 2}')]),
            chat_chunk(finish_reason="tool_calls"),
        )
    )

    assert calls(run(provider_for(server))) == [
        ToolCall(id="a", name="f", args={"n": 1}),
        ToolCall(id="b", name="f", args={"n": 2}),
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Par', {"_raw": '{"city": "Par'}),
        ("city=Paris", {"_raw": "city=Paris"}),
        ('["Paris"]', {"_raw": '["Paris"]'}),
        ("", {}),
    ],
)
def test_unparseable_arguments_are_kept_raw_instead_of_raising(
    server: WireServer, arguments: str, expected: dict[str, Any]
) -> None:
    server.script(
        sse(
            chat_chunk(tool_calls=[tool_fragment(0, name="get_weather", arguments=arguments)]),
            chat_chunk(finish_reason="tool_calls"),
        )
    )

    assert calls(run(provider_for(server))) == [
        ToolCall(id="call_0", name="get_weather", args=expected)
    ]


# Retries and errors


@pytest.mark.parametrize(
    ("headers", "low_s", "high_s"),
    [({"Retry-After": "1"}, 0.28, 0.9), ({"retry-after-ms": "120"}, 0.11, 0.28)],
)
def test_503_is_retried_after_the_servers_wait_capped(
    server: WireServer, headers: dict[str, str], low_s: float, high_s: float
) -> None:
    server.script(openai_error(503, "warming up", headers=headers), text_reply("ok"))

    events = run(provider_for(server))

    assert TextDelta("ok") in events
    assert len(server.requests) == 2
    waited = server.requests[1].received_at - server.requests[0].received_at
    assert low_s <= waited < high_s


@pytest.mark.parametrize(
    ("headers", "wait_s"),
    [({"Retry-After": "2"}, 2.0), ({"retry-after-ms": "120"}, 0.12), ({}, None)],
)
def test_429_is_raised_at_once_with_the_servers_wait(
    server: WireServer, headers: dict[str, str], wait_s: float | None
) -> None:
    """The turn pauses the provider for every worker and calls again (worker/turn.py)."""
    server.script(openai_error(429, "quota exceeded", headers=headers))

    with pytest.raises(RateLimited, match="quota exceeded") as info:
        run(provider_for(server, max_retries=2))

    assert (info.value.http_code, info.value.retry_after_s) == (429, wait_s)
    assert len(server.requests) == 1


def test_500_exhausted_raises_provider_error_with_the_code(server: WireServer) -> None:
    server.script(*(openai_error(500, "the GPU caught fire") for _ in range(3)))

    with pytest.raises(ProviderError, match="the GPU caught fire") as info:
        run(provider_for(server, max_retries=2))

    assert info.value.http_code == 500
    assert not isinstance(info.value, RateLimited)
    assert len(server.requests) == 3


def test_400_is_not_retried(server: WireServer) -> None:
    server.script(openai_error(400, "model 'nope' not found"), text_reply("unused"))

    with pytest.raises(ProviderError, match="model 'nope' not found") as info:
        run(provider_for(server))

    assert info.value.http_code == 400
    assert len(server.requests) == 1


def test_stream_cut_after_events_raises_and_is_not_replayed(server: WireServer) -> None:
    cut = sse(
        chat_chunk(content="Hel"),
        chat_chunk(content="lo"),
        chat_chunk(finish_reason="stop"),
        cut_after=2,
    )
    server.script(cut, text_reply("replayed"))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderError, match="ended early") as info:
        seen.extend(provider_for(server).stream(ask()))

    assert info.value.http_code == 0
    assert seen == [TextDelta("Hel"), TextDelta("lo")]
    assert len(server.requests) == 1


def test_stream_cut_before_any_event_is_retried(server: WireServer) -> None:
    server.script(sse(chat_chunk(role="assistant", content=""), cut_after=1), text_reply("fine"))

    events = run(provider_for(server))

    assert events[0] == TextDelta("fine")
    assert len(server.requests) == 2


def test_stream_closed_without_a_finish_reason_ended_early(server: WireServer) -> None:
    server.script(sse(chat_chunk(content="half an ans"), done=False))

    with pytest.raises(ProviderError, match="ended early") as info:
        run(provider_for(server, max_retries=0))

    assert info.value.http_code == 0


def test_error_event_mid_stream_is_a_provider_error(server: WireServer) -> None:
    server.script(
        sse(chat_chunk(content="a"), {"error": {"message": "model runner crashed", "code": 500}})
    )

    with pytest.raises(ProviderError, match="model runner crashed") as info:
        run(provider_for(server))

    assert info.value.http_code == 500
    assert len(server.requests) == 1


def test_unreadable_chunk_is_a_provider_error(server: WireServer) -> None:
    server.script(sse("this is not json"))

    with pytest.raises(ProviderError, match="unreadable"):
        run(provider_for(server, max_retries=0))


def test_unreachable_server_is_retried_then_reported_with_code_0() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIProvider(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1, backoff_s=0.001
    )

    with pytest.raises(ProviderError, match="cannot reach") as info:
        run(provider)

    assert info.value.http_code == 0


def test_closing_the_iterator_closes_the_http_response(server: WireServer) -> None:
    server.script(sse(chat_chunk(content="a"), chat_chunk(content="b"), done=False, hold_open_s=5))
    events = provider_for(server).stream(ask())

    assert next(events) == TextDelta("a")
    events.close()

    assert server.wait_for_disconnect(2.0)


# What the server receives


def test_request_maps_messages_media_tools_and_schema(server: WireServer) -> None:
    server.script(text_reply("ok"))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = ModelRequest(
        model=MODEL,
        messages=(
            Message(Role.SYSTEM, "Be brief."),
            Message(Role.USER, "What is this?", media=(Media(data=PNG, mime_type="image/png"),)),
            Message(
                Role.ASSISTANT,
                tool_calls=(
                    ToolCall(id="c1", name="get_weather", args={"city": "Paris"}),
                    ToolCall(id="c2", name="get_weather", args={"_raw": '{"city": "Pa'}),
                ),
            ),
            Message(Role.TOOL, "sunny", tool_call_id="c1", name="get_weather"),
        ),
        tools=(WEATHER,),
        tool_selection=ToolSelection.REQUIRED,
        response_schema=schema,
        options={"temperature": 0.2},
    )

    run(provider_for(server), request)

    body = server.requests[0].json()
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Pa'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
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
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }
    assert body["temperature"] == 0.2


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (ToolSelection.AUTO, "auto"),
        (ToolSelection.REQUIRED, {"type": "function", "function": {"name": "get_weather"}}),
        (ToolSelection.NONE, None),
    ],
)
def test_tool_choice_follows_tool_selection(
    server: WireServer, selection: ToolSelection, expected: object
) -> None:
    server.script(text_reply("ok"))

    run(provider_for(server), ask(tools=(WEATHER,), tool_selection=selection))

    body = server.requests[0].json()
    assert body.get("tool_choice") == expected
    assert ("tools" in body) is (expected is not None)


def test_settings_configure_the_client_and_the_key_is_never_logged(
    server: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        openai_base_url=f"{server.url}/v1", openai_api_key=SECRET, provider_max_retries=1
    )
    provider = OpenAIProvider(settings, backoff_s=0.001)
    server.script(openai_error(503, "warming up"), text_reply("ok"))

    with caplog.at_level(logging.DEBUG):
        events = run(provider)

    assert TextDelta("ok") in events
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {SECRET}"] * 2
    assert "warming up" in caplog.text
    assert SECRET not in caplog.text


def test_calls_beyond_the_connection_bound_wait_for_one_instead_of_failing(
    server: WireServer,
) -> None:
    slow = replace(text_reply("a", "b", "c"), chunk_delay_s=0.05)  # 7 chunks: >= 0.35 s each
    server.script(*[slow] * 9)
    settings = Settings(openai_base_url=f"{server.url}/v1", model_connections=3)
    provider = OpenAIProvider(settings, timeout_s=30.0)
    with ThreadPoolExecutor(max_workers=9) as pool:
        answers = list(pool.map(lambda _: run(provider), range(9)))

    assert all(TextDelta("c") in events for events in answers)  # none failed
    # never four at once: any four calls in arrival order span at least one call's length
    starts = sorted(request.received_at for request in server.requests)
    assert len(starts) == 9
    assert all(starts[n + 3] - starts[n] >= 0.33 for n in range(6)), starts


def test_required_with_several_tools_is_sent_as_required(server: WireServer) -> None:
    other = ToolSpec(name="other", description="Another tool.", parameters={"type": "object"})
    server.script(text_reply("ok"))

    run(provider_for(server), ask(tools=(WEATHER, other), tool_selection=ToolSelection.REQUIRED))

    assert server.requests[0].json()["tool_choice"] == "required"

"""The scripted demo model: deterministic, labelled, and exactly as its docstring says."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import ProviderError
from shared.models.config import ToolSelection
from shared.models.model_settings import ModelSettings
from shared.models.steps import ToolCall
from shared.settings import Settings
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
from worker.providers.scripted import LABEL, ScriptedProvider, tokens

TIME_TOOL = ToolSpec(
    name="get_time",
    description="The time in a zone.",
    parameters={
        "type": "object",
        "properties": {"tz": {"type": "string"}, "format": {"type": "string"}},
        "required": ["tz"],
    },
)
ECHO_TOOL = ToolSpec(
    name="echo",
    description="Echoes.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
)
TOOLS = (TIME_TOOL, ECHO_TOOL)


def run(request: ModelRequest, provider: ScriptedProvider | None = None) -> list[ProviderEvent]:
    return list((provider or ScriptedProvider(token_delay_ms=0)).stream(request))


def ask(prompt: str, **fields: Any) -> ModelRequest:
    messages = (Message(Role.SYSTEM, "Be brief."), Message(Role.USER, prompt))
    return ModelRequest(model="signoff-demo", messages=messages, **fields)


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def thinking_of(events: list[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ThinkingDelta))


def calls_of(events: list[ProviderEvent]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallEvent)]


def finish_of(events: list[ProviderEvent]) -> str:
    assert isinstance(events[-1], FinishEvent)
    return events[-1].reason


def after_calls(request: ModelRequest, calls: list[ToolCall], *results: str) -> ModelRequest:
    """The request of the next model call: the calls made, then their results."""
    messages = (
        *request.messages,
        Message(Role.ASSISTANT, tool_calls=tuple(calls)),
        *(
            Message(Role.TOOL, content, tool_call_id=call.id)
            for call, content in zip(calls, results, strict=True)
        ),
    )
    return ModelRequest(
        model=request.model,
        messages=messages,
        tools=request.tools,
        tool_selection=request.tool_selection,
        response_schema=request.response_schema,
    )


def test_same_request_gives_the_same_events() -> None:
    request = ask('call get_time {"tz": "UTC"} then tell me', tools=TOOLS)
    first, second = run(request), run(request, ScriptedProvider(token_delay_ms=0))
    assert first == second
    assert calls_of(first)[0].id.startswith("call_")


def test_thinks_before_answering_in_labelled_word_tokens() -> None:
    events = run(ask("What is   the weather like?"))
    kinds = [type(e) for e in events]
    assert kinds.index(TextDelta) > max(i for i, k in enumerate(kinds) if k is ThinkingDelta)
    assert thinking_of(events).startswith('The user asks: "What is the weather like?"')
    answer = text_of(events)
    assert answer.startswith(f'{LABEL} You said: "What is the weather like?"')
    assert all(len(e.text.split()) == 1 for e in events if isinstance(e, TextDelta | ThinkingDelta))
    assert finish_of(events) == "stop"


@given(st.text())
def test_tokens_concatenate_to_the_text(text: str) -> None:
    pieces = tokens(text)
    assert "".join(pieces) == text
    assert all(len(piece.split()) <= 1 for piece in pieces)


def test_directive_with_nested_json_becomes_one_tool_call() -> None:
    prompt = 'Please call get_time {"tz": "UTC", "opts": {"fmt": {"h": [1, {"m": 2}]}}} now'
    events = run(ask(prompt, tools=TOOLS))
    [call] = calls_of(events)
    assert call.name == "get_time"
    assert call.args == {"tz": "UTC", "opts": {"fmt": {"h": [1, {"m": 2}]}}}
    assert finish_of(events) == "tool_calls"
    assert "get_time" in thinking_of(events)


def test_several_directives_are_parallel_calls_in_order() -> None:
    prompt = 'call echo {"text": "call get_time {}"} and call get_time {"tz": "CET"}'
    calls = calls_of(run(ask(prompt, tools=TOOLS)))
    assert [(c.name, c.args) for c in calls] == [
        ("echo", {"text": "call get_time {}"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert len({c.id for c in calls}) == 2


def test_directive_for_a_tool_not_offered_is_explained_not_called() -> None:
    events = run(ask('call get_time {} and call launch_rocket {"count": 3}', tools=TOOLS))
    assert calls_of(events) == []
    assert (
        text_of(events)
        == f"{LABEL} The tool launch_rocket is not available here, so I made no call."
    )
    assert finish_of(events) == "stop"


def test_directive_whose_arguments_are_not_an_object_is_explained() -> None:
    events = run(ask("call get_time {tz: UTC}", tools=TOOLS))
    assert calls_of(events) == []
    assert "must be a JSON object" in text_of(events)


def test_answer_after_tool_results_quotes_them() -> None:
    request = ask('call get_time {"tz": "UTC"} and call echo {"text": "hi"}', tools=TOOLS)
    calls = calls_of(run(request))
    long_result = "tick " * 100
    events = run(after_calls(request, calls, "It is 12:00 UTC.", long_result))
    answer = text_of(events)
    assert answer.startswith(
        f"{LABEL} get_time returned: It is 12:00 UTC.\necho returned: tick tick"
    )
    assert answer.endswith("…")
    assert len(answer) < len(long_result)
    assert calls_of(events) == []
    assert finish_of(events) == "stop"


@pytest.mark.parametrize(
    ("result", "wording"),
    [
        ("Denied by operator: not today", "get_time was denied: Denied by operator"),
        ('{"error": "no such zone"}', 'get_time failed: {"error": "no such zone"}'),
        ("ValueError: bad tz", "get_time failed: ValueError: bad tz"),
    ],
)
def test_answer_reports_errors_and_denials(result: str, wording: str) -> None:
    request = ask('call get_time {"tz": "Mars"}', tools=TOOLS)
    events = run(after_calls(request, calls_of(run(request)), result))
    assert wording in text_of(events)


def test_required_calls_the_first_tool_with_minimal_arguments_once() -> None:
    request = ask("hello", tools=TOOLS, tool_selection=ToolSelection.REQUIRED)
    [call] = calls_of(run(request))
    assert call.name == "get_time"
    assert call.args == {"tz": "demo"}
    jsonschema.validate(call.args, TIME_TOOL.parameters)
    follow_up = run(after_calls(request, [call], "09:00"))
    assert calls_of(follow_up) == []
    assert text_of(follow_up) == f"{LABEL} get_time returned: 09:00"


def test_none_never_calls_tools_even_when_told_to() -> None:
    request = ask('call get_time {"tz": "UTC"}', tools=TOOLS, tool_selection=ToolSelection.NONE)
    events = run(request)
    assert calls_of(events) == []
    assert "asked not to use tools" in text_of(events)
    assert finish_of(events) == "stop"


def test_auto_without_directive_answers_without_tools() -> None:
    assert calls_of(run(ask("what time is it?", tools=TOOLS))) == []


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 20},
        "age": {"type": "integer", "minimum": 18},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "uniqueItems": True},
        "role": {"enum": ["admin", "user"]},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^\\d+$"},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "tags", "role", "address"],
    "additionalProperties": False,
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "person": PERSON,
    "defs": {
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {
                    "sku": {"$ref": "#/$defs/Sku"},
                    "qty": {"type": "integer", "minimum": 1},
                },
                "required": ["sku", "qty"],
            },
            "Sku": {"type": "string", "minLength": 12},
        },
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 2}
        },
        "required": ["items"],
    },
    "numbers": {
        "type": "object",
        "properties": {
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "even": {"type": "integer", "minimum": 3, "multipleOf": 2},
            "negative": {"type": "integer", "exclusiveMaximum": -4},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "fixed": {"const": "v1"},
        },
        "required": ["ratio", "even", "negative", "flag", "nothing", "fixed"],
    },
    "combinators": {
        "type": "object",
        "properties": {
            "either": {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string"}]},
            "one": {"oneOf": [{"type": "string", "maxLength": 4}, {"type": "integer"}]},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            },
            "maybe": {"type": ["null", "string"], "format": "date"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]},
        },
        "required": ["either", "one", "both", "maybe", "pair"],
    },
    "top_level_array": {
        "type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "minItems": 2,
        "maxItems": 2,
        "uniqueItems": True,
    },
    "recursive_tree": {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["label"],
            }
        },
        "$ref": "#/$defs/Node",
    },
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_structured_answer_is_valid_against_the_schema(name: str) -> None:
    schema = SCHEMAS[name]
    events = run(ask("Describe a customer", response_schema=schema))
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(pieces) > 1
    jsonschema.Draft202012Validator(schema).validate(json.loads("".join(pieces)))


def test_structured_answer_echoes_the_prompt_in_string_fields() -> None:
    document = json.loads(text_of(run(ask("Describe Ada", response_schema=PERSON))))
    assert document["address"]["city"].startswith(f'{LABEL} You said: "Describe Ada"')
    assert len(document["name"]) == 20
    assert document["age"] == 18
    assert document["role"] == "admin"
    assert len(document["tags"]) == 3
    assert "zip" not in document["address"]  # an optional pattern property is left out


def test_structured_answer_after_tool_results_is_json_too() -> None:
    schema = {
        "type": "object",
        "properties": {"summary": {"type": "string"}},
        "required": ["summary"],
    }
    request = ask('call get_time {"tz": "UTC"}', tools=TOOLS, response_schema=schema)
    calls = calls_of(run(request))
    assert len(calls) == 1
    document = json.loads(text_of(run(after_calls(request, calls, "noon"))))
    assert document == {"summary": f"{LABEL} get_time returned: noon"}


def test_schema_it_cannot_resolve_is_a_400_before_any_event() -> None:
    stream = ScriptedProvider(token_delay_ms=0).stream(
        ask("x", response_schema={"$ref": "https://example.com/schema.json"})
    )
    with pytest.raises(ProviderError) as error:
        next(stream)
    assert error.value.http_code == 400
    assert "https://example.com/schema.json" in str(error.value)


def test_usage_counts_match_the_emitted_tokens() -> None:
    request = ask('call get_time {"tz": "UTC"}', tools=TOOLS)
    call = calls_of(run(request))[0]
    events = run(after_calls(request, [call], "It is noon."))
    usage_events = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage_events) == 1
    assert events[-2] is usage_events[0]
    usage = usage_events[0].usage
    # "Be brief." 2 + directive 4 + call "get_time {"tz": "UTC"}" 3 + "It is noon." 3
    assert usage.prompt_token_count == 12
    assert usage.candidates_token_count == sum(isinstance(e, TextDelta) for e in events) > 0
    assert usage.thoughts_token_count == sum(isinstance(e, ThinkingDelta) for e in events) > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


def test_long_answers_have_two_hundred_tokens() -> None:
    events = run(ask("tell me everything #long"))
    assert sum(isinstance(e, TextDelta) for e in events) == 200
    assert text_of(events).startswith(LABEL)


def test_fail_raises_after_thinking() -> None:
    seen: list[ProviderEvent] = []
    with pytest.raises(ProviderError) as error:
        seen.extend(ScriptedProvider(token_delay_ms=0).stream(ask("break please #fail")))
    assert error.value.http_code == 500
    assert str(error.value) == "scripted failure requested"
    assert seen and all(isinstance(e, ThinkingDelta) for e in seen)


def test_unknown_model_is_a_404_before_any_event() -> None:
    request = ModelRequest(model="gpt-4o", messages=(Message(Role.USER, "hi"),))
    seen: list[ProviderEvent] = []
    with pytest.raises(ProviderError) as error:
        seen.extend(ScriptedProvider(token_delay_ms=0).stream(request))
    assert error.value.http_code == 404
    assert str(error.value) == "unknown model 'gpt-4o' for provider scripted"
    assert seen == []


def test_scripted_model_names_are_accepted() -> None:
    request = ModelRequest(model="scripted-fast", messages=(Message(Role.USER, "hi"),))
    assert finish_of(run(request)) == "stop"


def test_call_ids_differ_across_turns_with_the_same_directive() -> None:
    prompt = 'call get_time {"tz": "UTC"} and call get_time {"tz": "UTC"}'
    first = ask(prompt, tools=TOOLS)
    first_calls = calls_of(run(first))
    done = after_calls(first, first_calls, "noon", "noon")
    answer = text_of(run(done))
    second = ModelRequest(
        model="signoff-demo",
        messages=(*done.messages, Message(Role.ASSISTANT, answer), Message(Role.USER, prompt)),
        tools=TOOLS,
    )
    ids = [c.id for c in first_calls + calls_of(run(second))]
    assert len(ids) == 4
    assert len(set(ids)) == 4


def test_token_delay_sleeps_before_each_token() -> None:
    provider = ScriptedProvider(token_delay_ms=5)
    started = time.monotonic()
    events = run(ask("hello"), provider)
    elapsed = time.monotonic() - started
    deltas = sum(isinstance(e, TextDelta | ThinkingDelta) for e in events)
    assert elapsed >= deltas * 0.005


def test_slow_overrides_the_delay_setting() -> None:
    stream = ScriptedProvider(token_delay_ms=0).stream(ask("take your time #slow"))
    started = time.monotonic()
    next(stream), next(stream)
    elapsed = time.monotonic() - started
    stream.close()
    assert elapsed >= 0.1


def test_delay_comes_from_settings() -> None:
    assert ScriptedProvider(Settings(scripted_token_delay_ms=7)).token_delay_ms == 7
    assert ScriptedProvider().token_delay_ms == 0


def test_max_output_tokens_caps_the_text_and_reports_length() -> None:
    long = run(ask("tell me #long"))
    capped = run(ask("tell me #long", settings=ModelSettings(max_output_tokens=5)))
    assert len(tokens(text_of(long))) > 5
    assert tokens(text_of(capped)) == tokens(text_of(long))[:5]
    usage = next(e.usage for e in capped if isinstance(e, UsageEvent))
    assert usage.candidates_token_count == 5
    assert capped[-1] == FinishEvent("length")
    assert run(ask("hi", settings=ModelSettings(max_output_tokens=10_000)))[-1] == FinishEvent()


def test_stop_ends_the_text_before_the_first_stop_string() -> None:
    plain = text_of(run(ask("hello there")))
    stopped = run(ask("hello there", settings=ModelSettings(stop=["there", "You"])))
    assert text_of(stopped) == plain[: plain.index("You")]
    assert stopped[-1] == FinishEvent("stop")

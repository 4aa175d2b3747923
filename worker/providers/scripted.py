"""The scripted demo model, ``signoff-demo``: Signoff's offline default, with no network.

It is deterministic: the same request yields the same events, byte for byte.
It is labelled: every plain answer starts with ``[demo model]``.

Models: ``signoff-demo`` or any name starting with ``scripted``. Any other name
raises ``ProviderError("unknown model '<name>' for provider scripted", http_code=404)``
before the first event.

Events of one response, in order: ThinkingDelta tokens, TextDelta tokens, one
ToolCallEvent per tool call, one UsageEvent, one FinishEvent (reason
``tool_calls`` after tool calls, else ``stop``). It always thinks first, a
sentence or two on what it will do (``The user asks: "..." I will ...``).
Tokens are word-sized: a word with the whitespace after it, so that the tokens
concatenate to the full text. Before each thinking or text token it waits
``token_delay_ms`` (0: no wait).

It reads the last user message (the prompt; empty when there is none) and the
messages after it, and takes the first rule that applies:

1. Tool results (tool messages) follow the prompt: it answers
   ``[demo model] <tool> returned: <content>``, one line per result, the
   content on one line and cut at 200 characters. A result whose first 40
   characters contain ``denied``, ``refused`` or ``rejected`` reads
   ``<tool> was denied: ...``; else one whose first 40 characters contain
   ``error``, ``fail`` or ``exception`` reads ``<tool> failed: ...``
   (case-insensitive).
2. The prompt holds ``call TOOL_NAME {json}`` directives: the word ``call``
   (any case); a tool name of letters, digits, ``_``, ``.`` and ``-``, starting
   with a letter or ``_``; then a JSON object, nested braces allowed. Text
   inside a directive's JSON is not searched for more directives. Several
   directives are parallel calls.

   - tool_selection ``none``: it answers that it was asked not to use tools;
   - a directive whose JSON is not an object: it answers saying so;
   - a named tool missing from the request's tools: it answers that the tool is
     not available;
   - otherwise: one tool call per directive, in order, and no text.

   In the first three cases it calls no tool at all.
3. tool_selection ``required`` and tools offered: it calls the first tool with
   minimal arguments built from its parameters schema (required properties
   only; strings are ``"demo"``).
4. Otherwise it answers ``[demo model] You said: "<prompt>". ...``.

A tool call's id is ``call_<h>_<i>``: ``h`` is 16 hex digits of a SHA-256 of the
whole message list and ``i`` the call's index in the response, so ids are
stable for a request and differ from turn to turn.

With a response_schema, the answer of rules 1, 2 and 4 is instead a JSON
document valid against the schema (see `worker.providers.json_instance`), its
string fields holding the plain answer where their constraints allow; it is
streamed as text tokens too. ``pattern`` is not honoured. A schema it cannot
build from (a non-local or dangling ``$ref``, a ``false`` schema, an unknown
type, endless recursion) raises ``ProviderError(..., http_code=400)`` before
the first event; so do such tool parameters under rule 3.

Usage: prompt tokens are the whitespace-separated words of every message's
content and of every tool call's name and JSON arguments; candidate tokens
are the text tokens; thoughts tokens are the thinking tokens; the total is
prompt + candidates.

Words in the prompt that exercise failure paths:

- ``#fail``: raises ``ProviderError("scripted failure requested", http_code=500)``
  after the thinking tokens;
- ``#slow``: waits 50 ms before each token, whatever ``token_delay_ms`` says;
- ``#long``: the plain answer (rule 4) is 200 tokens long.

Model settings: of ``ModelRequest.settings`` it honours ``stop`` (the text
ends before the first of them, finish reason ``stop``), ``max_output_tokens``
(at most that many text tokens, finish reason ``length`` when it cut) and
``seed`` (trivially: it always answers the same). Thinking tokens are not
counted in the total, so they are not capped.

Errors are raised when iteration starts (``stream`` is a generator), before
any event unless said otherwise. Slash commands never reach a model; the
runtime handles them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidInput, ProviderError
from shared.models.config import ToolSelection
from shared.models.steps import ToolCall, UsageMetadata
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
    UsageEvent,
)
from worker.providers.json_instance import minimal_instance

__all__ = ["DEMO_MODEL", "LABEL", "ScriptedProvider", "tokens"]

DEMO_MODEL = "signoff-demo"
LABEL = "[demo model]"
SLOW_TOKEN_DELAY_MS = 50
LONG_ANSWER_TOKENS = 200
PROMPT_EXCERPT_CHARS = 80
RESULT_EXCERPT_CHARS = 200
VERDICT_WINDOW_CHARS = 40

_TOKEN = re.compile(r"\s*\S+\s*|\s+")
_DIRECTIVE = re.compile(r"\bcall\s+([A-Za-z_][\w.-]*)\s*(?=\{)", re.IGNORECASE)
_DENIAL = re.compile(r"denied|refused|rejected", re.IGNORECASE)
_ERROR = re.compile(r"error|fail|exception", re.IGNORECASE)
_FILLER = "This long answer is scripted so that streaming, scrolling and abort can be tested."


@dataclass(frozen=True)
class _Turn:
    """What the model reads: the prompt, and the tool results and calls after it."""

    prompt: str
    results: tuple[Message, ...]
    call_names: dict[str, str]


@dataclass(frozen=True)
class _Directive:
    name: str
    args: dict[str, Any] | None  # None when the text after the name is not a JSON object


@dataclass(frozen=True)
class _Reply:
    thinking: str
    text: str = ""
    calls: tuple[ToolCall, ...] = ()


class ScriptedProvider:
    """The offline demo model; see the module docstring for its exact behaviour."""

    name = "scripted"

    def __init__(
        self, settings: Settings | None = None, *, token_delay_ms: int | None = None
    ) -> None:
        if token_delay_ms is None:
            token_delay_ms = settings.scripted_token_delay_ms if settings is not None else 0
        self.token_delay_ms = token_delay_ms

    def stream(self, request: ModelRequest) -> Generator[ProviderEvent, None, None]:
        """Thinks, then answers or calls tools; raises ProviderError as documented."""
        _check_model(request.model)
        turn = _read_turn(request.messages)
        reply = _plan(request, turn)
        slow = "#slow" in turn.prompt
        delay_s = (SLOW_TOKEN_DELAY_MS if slow else self.token_delay_ms) / 1000
        thinking = tokens(reply.thinking)
        yield from _paced(thinking, ThinkingDelta, delay_s)
        if "#fail" in turn.prompt:
            raise ProviderError("scripted failure requested", http_code=500)
        text = tokens(_before_stop(reply.text, request.settings.stop or ()))
        cap = request.settings.max_output_tokens
        cut = cap is not None and len(text) > cap
        text = text[:cap] if cut else text
        yield from _paced(text, TextDelta, delay_s)
        yield from (ToolCallEvent(call) for call in reply.calls)
        usage = UsageMetadata.from_counts(
            prompt_words(request.messages), len(text), thoughts=len(thinking)
        )
        yield UsageEvent(usage)
        yield FinishEvent("length" if cut else "tool_calls" if reply.calls else "stop")


def _before_stop(text: str, stops: Sequence[str]) -> str:
    """The text up to the first of the stop strings, as a server's stop sequences cut it."""
    found = [text.find(stop) for stop in stops if stop in text]
    return text[: min(found)] if found else text


def tokens(text: str) -> list[str]:
    """Word-sized pieces, whitespace kept, that concatenate back to `text`."""
    return _TOKEN.findall(text)


def prompt_words(messages: Sequence[Message]) -> int:
    """The demo model's prompt token count: words of contents and of tool calls."""
    words = 0
    for message in messages:
        words += len(message.content.split())
        for call in message.tool_calls:
            words += len(f"{call.name} {json.dumps(call.args, sort_keys=True)}".split())
    return words


def _check_model(model: str) -> None:
    if model != DEMO_MODEL and not model.startswith("scripted"):
        raise ProviderError(f"unknown model {model!r} for provider scripted", http_code=404)


def _paced(
    pieces: list[str], event: Callable[[str], ProviderEvent], delay_s: float
) -> Iterator[ProviderEvent]:
    for piece in pieces:
        if delay_s:
            time.sleep(delay_s)
        yield event(piece)


def _read_turn(messages: Sequence[Message]) -> _Turn:
    users = [i for i, message in enumerate(messages) if message.role is Role.USER]
    start = users[-1] if users else -1
    after = messages[start + 1 :]
    return _Turn(
        prompt=messages[start].content if users else "",
        results=tuple(m for m in after if m.role is Role.TOOL),
        call_names={call.id: call.name for m in after for call in m.tool_calls},
    )


def _plan(request: ModelRequest, turn: _Turn) -> _Reply:
    """Picks the rule of the module docstring; a schema it cannot serve is a 400."""
    try:
        return _apply_rules(request, turn)
    except InvalidInput as exc:
        raise ProviderError(f"scripted: {exc.message}", http_code=400) from exc


def _apply_rules(request: ModelRequest, turn: _Turn) -> _Reply:
    if turn.results:
        count = len(turn.results)
        thought = f"I have {count} tool result(s). I will report them."
        return _answer(request, thought, _report(turn))
    directives = _directives(turn.prompt)
    if directives:
        return _directed(request, directives)
    said = f'The user asks: "{_excerpt(turn.prompt, PROMPT_EXCERPT_CHARS)}".'
    if request.tool_selection is ToolSelection.REQUIRED and request.tools:
        return _required_call(request, said)
    return _answer(request, f"{said} I will answer directly.", _plain_answer(turn.prompt))


def _answer(request: ModelRequest, thinking: str, text: str) -> _Reply:
    """A final answer: the text itself, or a JSON instance of the response schema."""
    if request.response_schema is None:
        return _Reply(thinking, text)
    document = minimal_instance(request.response_schema, text=text)
    thinking = f"{thinking} The answer must be JSON valid against the response schema."
    return _Reply(thinking, json.dumps(document, ensure_ascii=False))


def _plain_answer(prompt: str) -> str:
    head = (
        f'{LABEL} You said: "{_excerpt(prompt, PROMPT_EXCERPT_CHARS)}". '
        "I am the offline demo model, so this answer is scripted."
    )
    if "#long" not in prompt:
        return head
    words = _FILLER.split()
    filler = LONG_ANSWER_TOKENS - len(tokens(head))
    return f"{head} " + " ".join(words[i % len(words)] for i in range(filler))


def _report(turn: _Turn) -> str:
    lines = [
        _result_line(
            result.name or turn.call_names.get(result.tool_call_id, "tool"), result.content
        )
        for result in turn.results
    ]
    return f"{LABEL} " + "\n".join(lines)


def _result_line(name: str, content: str) -> str:
    head = content[:VERDICT_WINDOW_CHARS]
    verb = "was denied" if _DENIAL.search(head) else "failed" if _ERROR.search(head) else "returned"
    return f"{name} {verb}: {_excerpt(content, RESULT_EXCERPT_CHARS) or '(empty)'}"


def _directives(prompt: str) -> list[_Directive]:
    """The ``call NAME {json}`` directives, left to right; JSON text is never rescanned."""
    decoder = json.JSONDecoder()
    found: list[_Directive] = []
    position = 0
    while match := _DIRECTIVE.search(prompt, position):
        try:
            args, position = decoder.raw_decode(prompt, match.end())
        except json.JSONDecodeError:
            args, position = None, match.end() + 1
        found.append(_Directive(match[1], args if isinstance(args, dict) else None))
    return found


def _directed(request: ModelRequest, directives: list[_Directive]) -> _Reply:
    names = _join(d.name for d in directives)
    asked = f"The user asks me to call {names}."
    if request.tool_selection is ToolSelection.NONE:
        refusal = f"{LABEL} I was asked not to use tools, so I did not call {names}."
        return _answer(request, f"{asked} I was asked not to use tools.", refusal)
    malformed = [d.name for d in directives if d.args is None]
    if malformed:
        complaint = (
            f"{LABEL} The arguments for {_join(malformed)} must be a JSON object; I made no call."
        )
        return _answer(request, f"{asked} The arguments are not a JSON object.", complaint)
    offered = {tool.name for tool in request.tools}
    missing = [d.name for d in directives if d.name not in offered]
    if missing:
        absent = f"{LABEL} The tool {_join(missing)} is not available here, so I made no call."
        return _answer(request, f"{asked} {_join(missing)} is not among my tools.", absent)
    return _calls(
        request, f"{asked} I will call {names}.", [(d.name, d.args or {}) for d in directives]
    )


def _required_call(request: ModelRequest, said: str) -> _Reply:
    tool = request.tools[0]
    args = minimal_instance({"type": "object", **tool.parameters}, all_properties=False)
    thought = f"{said} A tool call is required, so I will call {tool.name}."
    return _calls(request, thought, [(tool.name, args)])


def _calls(request: ModelRequest, thinking: str, calls: list[tuple[str, Any]]) -> _Reply:
    stem = _fingerprint(request.messages)
    return _Reply(
        thinking,
        calls=tuple(
            ToolCall(id=f"call_{stem}_{index}", name=name, args=args)
            for index, (name, args) in enumerate(calls)
        ),
    )


def _fingerprint(messages: Sequence[Message]) -> str:
    """16 hex digits naming the whole conversation so far."""
    payload = [
        [
            message.role.value,
            message.content,
            [[call.id, call.name, call.args] for call in message.tool_calls],
            message.tool_call_id,
            message.name,
            [hashlib.sha256(media.data).hexdigest() for media in message.media],
        ]
        for message in messages
    ]
    encoded = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def _excerpt(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _join(names: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(names))

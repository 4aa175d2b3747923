"""The Ollama provider: the native ``/api/chat`` streaming protocol (NDJSON) over httpx2.

A plain-http server with no proxy (Ollama's usual place, on the machine or beside it) is
reached through `PlainHTTPTransport`, as the openai provider reaches one: a thousand streamed
calls in a worker read each line without httpcore's layers. TLS and proxies keep httpx2's own.

Conventions beyond the wire format:

- ``think`` is sent as configured (default true) unless ``options["think"]``
  says otherwise. A model that answers "does not support thinking" is asked
  again without it once, and remembered, unless the request asked explicitly.
- Ollama has no tool_choice: NONE sends no tools; REQUIRED appends a system
  message telling the model to answer with a tool call.
- Tool calls arrive complete; a call without an id gets ``call_<n>``, its
  position in the answer. Arguments that are not an object follow the
  ``{"_raw": "<text>"}`` convention of `worker.providers.openai_provider`.
- ``ModelRequest.settings`` map to ``options``: ``num_predict`` (max output
  tokens), ``temperature``, ``top_p``, ``stop``, ``seed``, and their ``extra``;
  ``reasoning_effort`` is ``think``: ``minimal`` sends false, the others their
  level ("low", "medium", "high"), with no retry without it.
  ``parallel_tool_calls`` has no Ollama equivalent: `shared.models.model_settings`
  refuses it before anything is queued.
- ``ModelRequest.options`` go into Ollama's ``options`` object, except
  ``think`` and ``keep_alive`` which are top-level fields.
- Images go base64 in ``images``; text media is appended to the content;
  other media cannot be read by Ollama and fail with http_code 415.
- An ``{"error": ...}`` line in a 200 stream is the server failing mid-answer
  (http_code 500). A stream without its ``done: true`` line ended early (0).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Generator, Iterator
from typing import Any

import httpx2

from shared.errors import ProviderError, RateLimited
from shared.models.config import ToolSelection
from shared.models.model_settings import ModelSettings, ReasoningEffort
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
from worker.providers.openai_provider import (
    RAW_ARGUMENTS_KEY,
    function_tool,
    parse_arguments,
)
from worker.providers.plain_http import PlainHTTPTransport, uses_plain_http
from worker.providers.retry import RetryPolicy, failure, retry_after_s, stream_with_retries

__all__ = ["REQUIRED_TOOL_NUDGE", "OllamaProvider"]

REQUIRED_TOOL_NUDGE = "Answer by calling one of the provided tools."
_TOP_LEVEL_OPTIONS = ("think", "keep_alive")
_CHAT_PATH = "/api/chat"
_DETAIL_CHARS = 500


class OllamaProvider:
    """Streams a chat answer from an Ollama server."""

    name = "ollama"

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        base_url: str | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        think: bool | None = True,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_retry_after_s: float = 30.0,
    ) -> None:
        config = settings or Settings.model_construct()
        connections = config.model_connections
        url = base_url or config.ollama_base_url
        self._client = httpx2.Client(
            base_url=url,
            timeout=timeout_s or config.provider_timeout_s,
            # calls beyond the bound wait for a connection (back-pressure), up to the timeout
            limits=httpx2.Limits(
                max_connections=connections, max_keepalive_connections=connections
            ),
            transport=PlainHTTPTransport(connections) if uses_plain_http(url) else None,
        )
        retries = config.provider_max_retries if max_retries is None else max_retries
        self._policy = RetryPolicy(retries, backoff_s, max_backoff_s, max_retry_after_s)
        self._think = think
        self._cannot_think: set[str] = set()

    def stream(self, request: ModelRequest) -> Generator[ProviderEvent, None, None]:
        """Yields the answer's events; closing the iterator closes the HTTP response."""
        return stream_with_retries(lambda: self._attempt(request), self._policy)

    def close(self) -> None:
        """Releases the pooled connections."""
        self._client.close()

    def _attempt(self, request: ModelRequest) -> Generator[ProviderEvent, None, None]:
        body = _body(request, think=self._think_for(request))
        where = f"ollama model {request.model!r}"
        response = self._send(body, where)
        try:
            if response.status_code == httpx2.codes.OK:
                yield from _read(response, where)
                return
            error = _status_error(response, where)
        finally:
            response.close()
        if _refuses_thinking(error) and body.get("think") and not _asked_to_think(request):
            self._cannot_think.add(request.model)
            yield from self._attempt(request)
            return
        raise failure(error, retry_after_s(response.headers))

    def _think_for(self, request: ModelRequest) -> bool | str | None:
        effort = request.settings.reasoning_effort
        if effort is not None:
            return False if effort is ReasoningEffort.MINIMAL else effort.value
        if "think" in request.options:
            return bool(request.options["think"])
        return None if request.model in self._cannot_think else self._think

    def _send(self, body: dict[str, Any], where: str) -> httpx2.Response:
        try:
            request = self._client.build_request("POST", _CHAT_PATH, json=body)
            return self._client.send(request, stream=True)
        except httpx2.HTTPError as exc:
            message = f"{where}: cannot reach the server: {type(exc).__name__}: {exc}"
            raise failure(ProviderError(message)) from exc


# Request mapping


def _asked_to_think(request: ModelRequest) -> bool:
    """Thinking the request asks for by name is not dropped on a refusal."""
    return "think" in request.options or request.settings.reasoning_effort is not None


def _options(settings: ModelSettings) -> dict[str, Any]:
    """Ollama's ``options`` for the model settings."""
    out: dict[str, Any] = dict(settings.extra)
    if settings.max_output_tokens is not None:
        out["num_predict"] = settings.max_output_tokens
    for name in ("temperature", "top_p", "stop", "seed"):
        if getattr(settings, name) is not None:
            out[name] = getattr(settings, name)
    return out


def _body(request: ModelRequest, *, think: bool | str | None) -> dict[str, Any]:
    send_tools = bool(request.tools) and request.tool_selection is not ToolSelection.NONE
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request, nudge=send_tools),
        "stream": True,
    }
    if think is not None:
        body["think"] = think
    if send_tools:
        body["tools"] = [function_tool(spec) for spec in request.tools]
    if request.response_schema is not None:
        body["format"] = request.response_schema
    if "keep_alive" in request.options:
        body["keep_alive"] = request.options["keep_alive"]
    options = {k: v for k, v in request.options.items() if k not in _TOP_LEVEL_OPTIONS}
    options.update(_options(request.settings))
    if options:
        body["options"] = options
    return body


def _messages(request: ModelRequest, *, nudge: bool) -> list[dict[str, Any]]:
    messages = [_message(message) for message in request.messages]
    if nudge and request.tool_selection is ToolSelection.REQUIRED:
        messages.append({"role": "system", "content": REQUIRED_TOOL_NUDGE})
    return messages


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role.value, "content": _text(message)}
    images = [_b64(media.data) for media in message.media if media.mime_type.startswith("image/")]
    if images:
        out["images"] = images
    if message.tool_calls:
        out["tool_calls"] = [_call_out(call) for call in message.tool_calls]
    if message.role is Role.TOOL:
        out["tool_name"] = message.name
        out["tool_call_id"] = message.tool_call_id
    return out


def _text(message: Message) -> str:
    """The content, with text attachments appended; unreadable media fail here."""
    pieces = [message.content] if message.content else []
    for media in message.media:
        if media.mime_type.startswith("text/"):
            pieces.append(media.data.decode("utf-8", errors="replace"))
        elif not media.mime_type.startswith("image/"):
            raise ProviderError(f"ollama cannot read {media.mime_type} attachments", http_code=415)
    return "\n\n".join(pieces)


def _call_out(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "function": {"name": call.name, "arguments": call.args}}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# Stream reading


def _read(response: httpx2.Response, where: str) -> Iterator[ProviderEvent]:
    reader = _LineReader(where)
    try:
        for line in response.iter_lines():
            if line.strip():
                yield from reader.feed(_parse(line, where))
    except httpx2.HTTPError as exc:
        message = f"{where}: the stream ended early: {type(exc).__name__}: {exc}"
        raise failure(ProviderError(message)) from exc
    if not reader.done:
        raise failure(ProviderError(f"{where}: the stream ended early, before its done line"))


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise failure(ProviderError(f"{where}: unreadable stream line: {line[:80]!r}")) from exc
    if not isinstance(value, dict):
        raise failure(ProviderError(f"{where}: unreadable stream line: {line[:80]!r}"))
    return value


class _LineReader:
    """Turns ``/api/chat`` lines into events; counts tool calls to name the ones without ids."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._calls = 0
        self.done = False

    def feed(self, line: dict[str, Any]) -> Iterator[ProviderEvent]:
        if "error" in line:
            raise failure(ProviderError(f"{self._where}: {line['error']}", http_code=500))
        message = line.get("message") or {}
        if message.get("thinking"):
            yield ThinkingDelta(str(message["thinking"]))
        if message.get("content"):
            yield TextDelta(str(message["content"]))
        for raw in message.get("tool_calls") or ():
            yield ToolCallEvent(self._call(raw))
        if line.get("done"):
            self.done = True
            yield from self._final(line)

    def _call(self, raw: dict[str, Any]) -> ToolCall:
        function = raw.get("function") or {}
        call_id = str(raw.get("id") or f"call_{self._calls}")
        self._calls += 1
        return ToolCall(id=call_id, name=str(function.get("name", "")), args=_arguments(function))

    def _final(self, line: dict[str, Any]) -> Iterator[ProviderEvent]:
        if "prompt_eval_count" in line or "eval_count" in line:
            usage = UsageMetadata.from_counts(
                int(line.get("prompt_eval_count") or 0), int(line.get("eval_count") or 0)
            )
            yield UsageEvent(usage)
        reason = str(line.get("done_reason") or "stop")
        yield FinishEvent("tool_calls" if self._calls and reason == "stop" else reason)


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    value = function.get("arguments")
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return parse_arguments(value)
    return {} if value is None else {RAW_ARGUMENTS_KEY: json.dumps(value)}


# Error mapping


def _status_error(response: httpx2.Response, where: str) -> ProviderError:
    status = response.status_code
    message = f"{where}: HTTP {status}: {_detail(response)}"
    return RateLimited(message, http_code=429) if status == 429 else ProviderError(message, status)


def _detail(response: httpx2.Response) -> str:
    try:
        text = response.read().decode("utf-8", errors="replace")
    except httpx2.HTTPError as exc:
        return f"(body unreadable: {type(exc).__name__})"
    try:
        body = json.loads(text)
    except ValueError:
        return text[:_DETAIL_CHARS]
    error = body.get("error") if isinstance(body, dict) else None
    return str(error)[:_DETAIL_CHARS] if error else text[:_DETAIL_CHARS]


def _refuses_thinking(error: ProviderError) -> bool:
    bad_request = error.http_code == httpx2.codes.BAD_REQUEST
    return bad_request and "does not support thinking" in error.message

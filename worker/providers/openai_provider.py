"""The OpenAI-compatible provider: Chat Completions streaming through the official SDK.

One class covers OpenAI, Ollama's ``/v1``, vLLM and the llama.cpp server, so it
tolerates their differences (the stream's side is in `worker.providers.openai_chunks`):

- Arguments that are not a JSON object (a small model's broken JSON) do not
  raise: the call's args become ``{"_raw": "<the text>"}`` (`RAW_ARGUMENTS_KEY`)
  so the runtime can report a tool error back to the model; `raw_arguments`
  reads them, and such a call is sent back to the server with its text as is.
- A call without an id gets ``call_<n>``, its position in the answer.
- Every message's content is a string: an assistant message that carries only
  tool calls goes with ``""``, never ``null``, which llama-cpp-python's server
  refuses with HTTP 500 (OpenAI takes either).
- Reasoning arrives as ``reasoning_content`` or ``reasoning`` on the delta.
- Usage comes from the last chunk that carries it; a server that sends none
  yields no `UsageEvent` (nothing is estimated).
- A stream counts as complete once a finish reason arrived; ending before
  that is "the stream ended early" (http_code 0).
- ``ModelRequest.settings`` map to ``max_tokens`` (the name every compatible
  server reads), ``temperature``, ``top_p``, ``stop``, ``seed``,
  ``reasoning_effort`` and ``parallel_tool_calls`` (sent only with tools); their
  ``extra`` and ``ModelRequest.options`` are merged into the request body.
  Images go as data URIs; other media as text or file parts.

The SDK's own retries are off: `worker.providers.retry` retries, and only
before the first event. An empty API key is sent as a placeholder, since local
servers need none and the SDK refuses an empty one.
"""

from __future__ import annotations

import base64
import itertools
import json
import mimetypes
from collections.abc import Generator
from typing import Any

import httpx2
import openai
from openai._types import RequestOptions
from openai.types.chat import ChatCompletion

from shared.errors import ProviderError, RateLimited
from shared.models.config import ToolSelection
from shared.models.content import Media
from shared.models.model_settings import ModelSettings
from shared.models.steps import ToolCall
from shared.settings import Settings
from worker.providers.base import (
    Message,
    ModelRequest,
    ProviderEvent,
    Role,
    ToolSpec,
)
from worker.providers.openai_chunks import (
    RAW_ARGUMENTS_KEY,
    ChunkReader,
    ChunkStream,
    parse_arguments,
    raw_arguments,
)
from worker.providers.plain_http import PlainHTTPTransport, uses_plain_http
from worker.providers.retry import RetryPolicy, failure, retry_after_s, stream_with_retries

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "OpenAIProvider",
    "function_tool",
    "parse_arguments",
    "raw_arguments",
]

POOL_SHARD = 64  # connections per httpx pool (see OpenAIProvider.__init__)
_NO_KEY = "no-key"
_DETAIL_CHARS = 500


class OpenAIProvider:
    """Streams a chat completion from an OpenAI-compatible server."""

    name = "openai"

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_retry_after_s: float = 30.0,
    ) -> None:
        config = settings or Settings.model_construct()
        key = api_key if api_key is not None else config.openai_api_key.get_secret_value()
        url = base_url or config.openai_base_url
        timeout = timeout_s or config.provider_timeout_s
        clients = _http_clients(url, config.model_connections)
        self._clients = [
            openai.OpenAI(
                base_url=url,
                api_key=key or _NO_KEY,
                timeout=timeout,
                max_retries=0,
                http_client=http_client,
            )
            for http_client in clients
        ]
        self._turn = itertools.cycle(self._clients)
        transport = clients[0]._transport
        self._direct = (
            _DirectPost(self._clients[0], transport, timeout)
            if isinstance(transport, PlainHTTPTransport)
            else None
        )
        retries = config.provider_max_retries if max_retries is None else max_retries
        self._policy = RetryPolicy(retries, backoff_s, max_backoff_s, max_retry_after_s)

    def stream(self, request: ModelRequest) -> Generator[ProviderEvent, None, None]:
        """Yields the answer's events; closing the iterator closes the HTTP response."""
        kwargs = _create_kwargs(request)
        return stream_with_retries(lambda: self._attempt(kwargs), self._policy)

    def close(self) -> None:
        """Releases the pooled connections."""
        for client in self._clients:
            client.close()

    def _attempt(self, kwargs: dict[str, Any]) -> Generator[ProviderEvent, None, None]:
        where = f"openai model {kwargs['model']!r}"
        reader = ChunkReader()
        with self._open(kwargs, where) as chunks:
            try:
                for chunk in chunks:
                    yield from reader.feed(chunk)
            except openai.APIError as exc:
                raise failure(_stream_error(exc, where)) from exc
            except ValueError as exc:  # not JSON, or JSON that is not an object
                raise failure(ProviderError(f"{where}: unreadable stream chunk: {exc}")) from exc
        if not reader.finished:
            raise failure(ProviderError(f"{where}: the stream ended early, before a finish reason"))
        yield from reader.end()

    def _open(self, kwargs: dict[str, Any], where: str) -> ChunkStream:
        """POSTs the body as built: `chat.completions.create` would walk it against its
        TypedDicts (`maybe_transform`), a no-op for these plain JSON values that cost an
        eighth of a streamed call's CPU in the worker, growing with the history."""
        body = {name: value for name, value in kwargs.items() if name != "extra_body"}
        try:
            if self._direct is not None:
                return self._direct.post({**body, **kwargs.get("extra_body", {})})
            options: RequestOptions = {"security": {"bearer_auth": True}}
            if "extra_body" in kwargs:
                options["extra_json"] = kwargs["extra_body"]
            return next(self._turn).post(
                "/chat/completions",
                body=body,
                options=options,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=ChunkStream,
            )
        except openai.APIStatusError as exc:
            raise failure(_status_error(exc, where), retry_after_s(exc.response.headers)) from exc
        except openai.APIConnectionError as exc:
            error = ProviderError(f"{where}: cannot reach the server: {_cause(exc)}")
            raise failure(error) from exc


class _DirectPost:
    """A streamed call to a plain-http server, sent straight to the transport.

    The SDK's `post` built each request through its options, header and URL layers and
    httpx's client, about a tenth of a streamed call's CPU in the worker. Here the
    SDK's client gives what those layers would: its headers (auth, user agent, platform),
    its URL, and, for a refused call, its own error (`_make_status_error_from_response`);
    transport failures become its `APITimeoutError` and `APIConnectionError`, as in `post`.
    """

    def __init__(self, client: openai.OpenAI, transport: PlainHTTPTransport, timeout: float):
        self._client = client
        self._transport = transport
        self._url = client.base_url.join("chat/completions")
        headers = {**client.default_headers, **client.auth_headers}
        self._headers = {name: value for name, value in headers.items() if isinstance(value, str)}
        self._timeout = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}

    def post(self, body: dict[str, Any]) -> ChunkStream:
        request = httpx2.Request(
            "POST",
            self._url,
            headers=self._headers,
            content=json.dumps(body).encode(),
            extensions={"timeout": self._timeout},
        )
        try:
            response = self._transport.handle_request(request)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except httpx2.RequestError as exc:
            raise openai.APIConnectionError(request=request) from exc
        response.request = request
        if response.status_code >= 400:
            response.read()
            raise self._client._make_status_error_from_response(response)
        return ChunkStream(cast_to=dict[str, Any], response=response, client=self._client)


def _http_clients(base_url: str, connections: int) -> list[httpx2.Client]:
    """The HTTP clients calls take in turn, `connections` in all.

    Plain http goes through one `PlainHTTPTransport`, whose pool costs the same at any size.
    Otherwise (TLS, a proxy) httpx's own transport, in pools of at most POOL_SHARD: its pool
    walks all its connections at every request and response, so one pool of a thousand
    cost more CPU per call than the call's own parsing. A call beyond a pool's bound waits
    for one of its connections (back-pressure), up to the timeout.
    """
    if uses_plain_http(base_url):
        return [openai.DefaultHttpxClient(transport=PlainHTTPTransport(connections))]
    sizes = [POOL_SHARD] * (connections // POOL_SHARD)
    sizes += [connections % POOL_SHARD] if connections % POOL_SHARD else []
    return [
        openai.DefaultHttpxClient(
            limits=httpx2.Limits(max_connections=size, max_keepalive_connections=size)
        )
        for size in sizes
    ]


# Request mapping


def _tool_choice(request: ModelRequest) -> str | dict[str, Any]:
    """ "required" with one tool is sent as that tool by name: it means the same on every
    server, and llama.cpp's server ignores "required" but honours a named function."""
    if request.tool_selection is ToolSelection.REQUIRED and len(request.tools) == 1:
        return {"type": "function", "function": {"name": request.tools[0].name}}
    return request.tool_selection.value


def _create_kwargs(request: ModelRequest) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": [_message(message) for message in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools and request.tool_selection is not ToolSelection.NONE:
        kwargs["tools"] = [function_tool(spec) for spec in request.tools]
        kwargs["tool_choice"] = _tool_choice(request)
    if request.response_schema is not None:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": request.response_schema},
        }
    kwargs.update(_settings(request.settings, tools="tools" in kwargs))
    extra = {**request.options, **request.settings.extra}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _settings(settings: ModelSettings, *, tools: bool) -> dict[str, Any]:
    """The request fields of the model settings; `max_tokens` is the one every server reads."""
    out: dict[str, Any] = {}
    if settings.max_output_tokens is not None:
        out["max_tokens"] = settings.max_output_tokens
    for name in ("temperature", "top_p", "stop", "seed"):
        if getattr(settings, name) is not None:
            out[name] = getattr(settings, name)
    if settings.reasoning_effort is not None:
        out["reasoning_effort"] = settings.reasoning_effort.value
    if settings.parallel_tool_calls is not None and tools:  # refused by OpenAI without tools
        out["parallel_tool_calls"] = settings.parallel_tool_calls
    return out


def function_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool in the function-tool shape that OpenAI and Ollama share."""
    function = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    return {"type": "function", "function": function}


def _message(message: Message) -> dict[str, Any]:
    """Tool results carry text only: the Chat Completions tool role takes no images."""
    if message.role is Role.TOOL:
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role is Role.ASSISTANT:
        return _assistant(message)
    if message.media:
        return {"role": message.role.value, "content": _parts(message)}
    return {"role": message.role.value, "content": message.content}


def _assistant(message: Message) -> dict[str, Any]:
    """Content stays a string, "" beside tool calls: llama.cpp's server refuses null."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [_call_out(call) for call in message.tool_calls]
    return out


def _call_out(call: ToolCall) -> dict[str, Any]:
    raw = raw_arguments(call.args)
    arguments = raw if raw is not None else json.dumps(call.args)
    function = {"name": call.name, "arguments": arguments}
    return {"id": call.id, "type": "function", "function": function}


def _parts(message: Message) -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": message.content}] if message.content else []
    return parts + [_media_part(media) for media in message.media]


def _media_part(media: Media) -> dict[str, Any]:
    if media.mime_type.startswith("text/"):
        return {"type": "text", "text": media.data.decode("utf-8", errors="replace")}
    uri = f"data:{media.mime_type};base64,{base64.b64encode(media.data).decode('ascii')}"
    if media.mime_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": uri}}
    filename = "attachment" + (mimetypes.guess_extension(media.mime_type) or "")
    return {"type": "file", "file": {"file_data": uri, "filename": filename}}


# Error mapping


def _status_error(exc: openai.APIStatusError, where: str) -> ProviderError:
    status = exc.status_code
    message = f"{where}: HTTP {status}: {_detail(exc)}"
    return RateLimited(message, http_code=429) if status == 429 else ProviderError(message, status)


def _stream_error(exc: openai.APIError, where: str) -> ProviderError:
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(f"{where}: the stream ended early: {_cause(exc)}")
    body = exc.body if isinstance(exc.body, dict) else {}
    code = body.get("code")
    status = code if isinstance(code, int) and 400 <= code < 600 else 0
    return ProviderError(f"{where}: the server failed mid-stream: {_detail(exc)}", status)


def _detail(exc: openai.APIError) -> str:
    body = exc.body
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:_DETAIL_CHARS]
    if isinstance(error, str) and error:
        return error[:_DETAIL_CHARS]
    return exc.message[:_DETAIL_CHARS]


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__
    return f"{exc} ({type(cause).__name__}: {cause})" if cause is not None else str(exc)

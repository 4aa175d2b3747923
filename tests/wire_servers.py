"""Real HTTP servers on 127.0.0.1 that speak model wire formats, scripted per test.

A `WireServer` answers each request with the next scripted `Reply` (or the
reply a function builds from the request) and records every request, so a test
can assert what a provider sent. Replies cover the cases providers must survive:
streamed bodies (OpenAI SSE, Ollama NDJSON), error statuses with headers such as
``Retry-After``, a connection cut mid-stream, and a stream held open until the
client leaves::

    with WireServer() as server:
        server.script(
            openai_error(429, "slow down", headers={"Retry-After": "1"}),
            sse(chat_chunk(content="Hi"), chat_chunk(finish_reason="stop")),
        )
        provider = OpenAIProvider(base_url=server.url + "/v1", ...)
        ...
        assert server.requests[-1].json()["model"] == "m"

Streamed replies use chunked transfer encoding, one HTTP chunk per event,
like the real servers. A request with nothing scripted gets a 500 whose body
says so, which fails the test loudly.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "RecordedRequest",
    "Reply",
    "Responder",
    "WireServer",
    "chat_chunk",
    "json_reply",
    "ndjson",
    "ollama_error",
    "ollama_line",
    "ollama_tool_call",
    "openai_error",
    "rechunk",
    "serve",
    "sse",
    "tool_fragment",
    "usage_chunk",
]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()
    client_port: int = 0  # the connection it came on: the same for a kept-alive one

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """A scripted answer.

    `chunks` are written one HTTP chunk each when `streamed`, else joined into one body.
    `cut_after` closes the connection after that many chunks, without the final chunk.
    `hold_open_s` keeps a finished stream open until the client leaves (or the time passes).
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    chunks: tuple[bytes, ...] = ()
    streamed: bool = True
    chunk_delay_s: float = 0.0
    cut_after: int | None = None
    hold_open_s: float = 0.0


Responder = Reply | Callable[[RecordedRequest], Reply]


class WireServer:
    """A threaded HTTP server on a free port of 127.0.0.1 that plays a script."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: dict[str | None, deque[Responder]] = {}
        self._lock = threading.Lock()
        self._disconnected = threading.Event()
        self._http = _HTTPServer(self)
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321`` (append ``/v1`` for OpenAI clients)."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WireServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def script(self, *replies: Responder, path: str | None = None) -> None:
        """Queues replies, served in order; with `path`, only to requests for that path."""
        with self._lock:
            self._script.setdefault(path, deque()).extend(replies)

    def pending(self) -> int:
        """How many scripted replies are still unserved."""
        with self._lock:
            return sum(len(queue) for queue in self._script.values())

    def wait_for_disconnect(self, timeout_s: float = 5.0) -> bool:
        """True once a client left before its reply ended (see `Reply.hold_open_s`)."""
        return self._disconnected.wait(timeout_s)

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests received so far."""
        return [request.json() for request in self.requests]

    def _receive(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            queue = self._script.get(request.path) or self._script.get(None)
            responder = queue.popleft() if queue else None
        if responder is None:
            return json_reply(500, {"error": f"wire server: nothing scripted for {request.path}"})
        return responder(request) if callable(responder) else responder


@contextmanager
def serve(*replies: Responder) -> Iterator[WireServer]:
    """A started server with `replies` scripted; stopped on exit."""
    with WireServer() as server:
        server.script(*replies)
        yield server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, wire: WireServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.wire = wire


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each event leaves at once, as from a real model server
    server: _HTTPServer

    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read `WireServer.requests` instead."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self.rfile.read(length),
            received_at=time.monotonic(),
            client_port=self.client_address[1],
        )
        reply = self.server.wire._receive(request)
        try:
            self._write(reply)
        except OSError:
            self.server.wire._disconnected.set()
            self.close_connection = True

    def _write(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if not reply.streamed:
            body = b"".join(reply.chunks)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._stream(reply)

    def _stream(self, reply: Reply) -> None:
        for number, chunk in enumerate(reply.chunks):
            if reply.cut_after is not None and number >= reply.cut_after:
                break
            time.sleep(reply.chunk_delay_s)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if reply.cut_after is not None:
            self._cut()
            return
        if reply.hold_open_s:
            self._await_client_leaving(reply.hold_open_s)
        self.wfile.write(b"0\r\n\r\n")

    def _cut(self) -> None:
        """Ends the connection cleanly at the TCP level but short of the HTTP body's end."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_WR)

    def _await_client_leaving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                raise ConnectionAbortedError("client left the stream")


# Reply builders


def json_reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
    """A whole JSON body with a status, e.g. an error."""
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return Reply(status, all_headers, (json.dumps(body).encode(),), streamed=False)


def sse(*events: Mapping[str, Any] | str, done: bool = True, **options: Any) -> Reply:
    """An OpenAI-style event stream: ``data: {...}`` events, then ``data: [DONE]``.

    A string event is sent verbatim as the data (for malformed payloads).
    `options` are `Reply` fields such as `cut_after` or `hold_open_s`.
    """
    payloads = [event if isinstance(event, str) else json.dumps(event) for event in events]
    chunks = [f"data: {payload}\n\n".encode() for payload in payloads]
    if done:
        chunks.append(b"data: [DONE]\n\n")
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=tuple(chunks), **options)


def ndjson(*lines: Mapping[str, Any] | str, **options: Any) -> Reply:
    """An Ollama-style stream: one JSON object per line; strings are sent verbatim."""
    encoded = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    chunks = tuple(f"{line}\n".encode() for line in encoded)
    return Reply(headers={"Content-Type": "application/x-ndjson"}, chunks=chunks, **options)


def rechunk(reply: Reply, size: int) -> Reply:
    """The same bytes re-cut into `size`-byte HTTP chunks, splitting events across reads."""
    data = b"".join(reply.chunks)
    return replace(reply, chunks=tuple(data[i : i + size] for i in range(0, len(data), size)))


def openai_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An OpenAI error answer: ``{"error": {"message", "type", "code"}}``."""
    error = {
        "message": message,
        "type": "server_error" if status >= 500 else "invalid_request_error",
    }
    return json_reply(status, {"error": {**error, "code": None}}, headers)


def ollama_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An Ollama error answer: ``{"error": "..."}``."""
    return json_reply(status, {"error": message}, headers)


# OpenAI Chat Completions chunks


def chat_chunk(
    *,
    content: str | None = None,
    role: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    reasoning_content: str | None = None,
    extra: Mapping[str, Any] | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of one choice; `extra` adds server-specific delta fields."""
    fields = {
        "role": role,
        "content": content,
        "reasoning_content": reasoning_content,
        "tool_calls": tool_calls,
        **(extra or {}),
    }
    delta = {key: value for key, value in fields.items() if value is not None}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return _chunk_envelope(model, [choice])


def tool_fragment(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """One streamed piece of a tool call, as in ``delta.tool_calls``."""
    fragment: dict[str, Any] = {"index": index}
    function: dict[str, Any] = {}
    if id is not None:
        fragment |= {"id": id, "type": "function"}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        fragment["function"] = function
    return fragment


def usage_chunk(
    prompt: int,
    completion: int,
    *,
    cached: int | None = None,
    reasoning: int | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """The final chunk ``stream_options.include_usage`` asks for: no choices, usage only."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return _chunk_envelope(model, [], usage=usage)


def _chunk_envelope(model: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-wire",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": choices,
        **extra,
    }


# Ollama /api/chat lines


def ollama_line(
    *,
    content: str = "",
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    done: bool = False,
    model: str = "test-model",
    **final: Any,
) -> dict[str, Any]:
    """One ``/api/chat`` stream line; `final` holds ``done_reason``, ``eval_count`` and such."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    line = {"model": model, "created_at": "2025-01-01T00:00:00Z", "message": message, "done": done}
    return line | final


def ollama_tool_call(
    name: str, arguments: Any, *, index: int | None = None, id: str | None = None
) -> dict[str, Any]:
    """A complete tool call as Ollama sends it: arguments as an object."""
    function: dict[str, Any] = {"name": name, "arguments": arguments}
    if index is not None:
        function["index"] = index
    call: dict[str, Any] = {"function": function}
    if id is not None:
        call["id"] = id
    return call

"""Reading a Chat Completions stream: server-sent events to chunks, chunks to provider events.

The chunks stay the JSON objects the server sent. The SDK's reader built a pydantic model
of every chunk and decoded every event through four generators. At one chunk per token,
with a thousand calls streaming, that was the largest cost left in a streamed call. The
objects are read defensively instead: a field of the wrong type counts as absent, as
the SDK's lenient construction treated it.

What spans chunks is kept by `ChunkReader`. Tool-call fragments are joined by
``index``; a new ``id`` at a known index starts a new call. A name repeated on every
fragment (llama.cpp) is kept once. Calls are emitted, in order, when the finish reason
arrives. Usage comes from the last chunk that carries it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from shared.models.steps import ToolCall, UsageMetadata
from worker.providers.base import (
    FinishEvent,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)

__all__ = ["RAW_ARGUMENTS_KEY", "ChunkReader", "ChunkStream", "parse_arguments", "raw_arguments"]

RAW_ARGUMENTS_KEY = "_raw"


def parse_arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments; text that is not a JSON object comes back under ``_raw``."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


def raw_arguments(args: Any) -> str | None:
    """The unparsed text of malformed arguments, or None when they parsed."""
    if isinstance(args, dict) and set(args) == {RAW_ARGUMENTS_KEY}:
        return str(args[RAW_ARGUMENTS_KEY])
    return None


class ChunkStream(openai.Stream[dict[str, Any]]):
    """The SDK's stream of a response, yielding each chunk as the server's JSON object.

    As the SDK's own: ``[DONE]`` ends it, an object carrying ``error`` raises `openai.APIError`
    with it as the body, transport failures raise `APITimeoutError` or `APIConnectionError`,
    and the response is closed however the iteration ends. Data that is not JSON raises
    `json.JSONDecodeError`.
    """

    def __stream__(self) -> Iterator[dict[str, Any]]:
        request = self.response.request
        try:
            for data in sse_data(_body_pieces(self.response)):
                if data.startswith(b"[DONE]"):
                    break
                # decoded here: given bytes, `json.loads` first guesses their encoding
                chunk = json.loads(data.decode("utf-8", "surrogatepass"))
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise openai.APIError(
                        _error_message(chunk["error"]), request, body=chunk["error"]
                    )
                yield chunk
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, ssl.SSLError) as exc:
            raise openai.APIConnectionError(request=request) from exc
        finally:
            self.response.close()


def _body_pieces(response: httpx2.Response) -> Iterator[bytes]:
    """The body as the transport hands it over. httpx's `iter_bytes` passes each piece
    through a decoder, a re-chunker and a byte count, three generators deep: at one piece
    per token, a fiftieth of a streamed call's CPU. Only an encoded body needs them."""
    stream = response.stream
    if "content-encoding" in response.headers or not isinstance(stream, httpx2.SyncByteStream):
        return response.iter_bytes()
    return iter(stream)


def _error_message(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else "An error occurred during streaming"


def sse_data(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The data of each server-sent event, its ``data:`` lines joined with newlines.

    Lines end with LF, CRLF or CR (a CR at the end of a piece waits for the next, in case
    an LF follows); other fields and comments are skipped; an event the stream ends in
    the middle of is dropped, as the SSE standard says.
    """
    pending = b""
    data: list[bytes] = []
    for piece in pieces:
        lines = (pending + piece).splitlines(keepends=True)
        pending = b""
        if lines and not lines[-1].endswith(b"\n"):
            pending = lines.pop()
        for line in lines:
            line = line.rstrip(b"\r\n")
            if not line:
                if data:
                    yield b"\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallAssembler:
    """Joins streamed tool-call fragments by index, and by id where a server reuses an index."""

    def __init__(self) -> None:
        self._calls: list[_PendingCall] = []
        self._by_index: dict[int, _PendingCall] = {}
        self._last_index = 0
        self._emitted = 0

    def add(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        call = self._slot(index if _is_int(index) else None, _text(fragment.get("id")))
        function = fragment.get("function")
        if isinstance(function, dict):
            call.name = _join_name(call.name, _text(function.get("name")))
            arguments = _text(function.get("arguments"))
            if arguments:
                call.arguments.append(arguments)

    def _slot(self, index: int | None, call_id: str) -> _PendingCall:
        key = self._last_index if index is None else index
        self._last_index = key
        call = self._by_index.get(key)
        if call is None or (call_id and call.id and call_id != call.id):
            call = _PendingCall(id=call_id)
            self._calls.append(call)
            self._by_index[key] = call
        elif call_id:
            call.id = call_id
        return call

    def drain(self) -> Iterator[ToolCallEvent]:
        """The calls not yet emitted, complete."""
        for number in range(self._emitted, len(self._calls)):
            call = self._calls[number]
            args = parse_arguments("".join(call.arguments))
            yield ToolCallEvent(ToolCall(id=call.id or f"call_{number}", name=call.name, args=args))
        self._emitted = len(self._calls)
        self._by_index.clear()


def _join_name(current: str, piece: str) -> str:
    """llama.cpp repeats the whole name on every fragment; others send it once or in pieces."""
    return current if not piece or piece == current else current + piece


class ChunkReader:
    """Turns chat-completion chunks into events, keeping what spans chunks."""

    def __init__(self) -> None:
        self._calls = _ToolCallAssembler()
        self._usage: UsageMetadata | None = None
        self._finish_reason: str | None = None

    @property
    def finished(self) -> bool:
        return self._finish_reason is not None

    def feed(self, chunk: Any) -> Iterator[ProviderEvent]:
        """The events of one chunk; a chunk that is not a JSON object is a `ValueError`."""
        if not isinstance(chunk, dict):
            raise ValueError(f"a chunk that is not a JSON object: {str(chunk)[:80]}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        for choice in _dicts(chunk.get("choices")):
            if choice.get("index") in (0, None):
                yield from self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> Iterator[ProviderEvent]:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            yield from _deltas(delta)
            for fragment in _dicts(delta.get("tool_calls")):
                self._calls.add(fragment)
        reason = choice.get("finish_reason")
        if reason and isinstance(reason, str):
            self._finish_reason = reason
            yield from self._calls.drain()

    def end(self) -> Iterator[ProviderEvent]:
        """The events owed once the stream is over: late calls, usage, the finish."""
        yield from self._calls.drain()
        if self._usage is not None:
            yield UsageEvent(self._usage)
        yield FinishEvent(self._finish_reason or "stop")


def _deltas(delta: dict[str, Any]) -> Iterator[ProviderEvent]:
    thinking = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(thinking, str) and thinking:
        yield ThinkingDelta(thinking)
    for name in ("content", "refusal"):
        text = delta.get(name)
        if isinstance(text, str) and text:
            yield TextDelta(text)


def _usage(raw: dict[str, Any]) -> UsageMetadata:
    prompt = _count(raw, "prompt_tokens")
    completion = _count(raw, "completion_tokens")
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=completion,
        total_token_count=_count(raw, "total_tokens") or prompt + completion,
        cached_content_token_count=_count(raw.get("prompt_tokens_details"), "cached_tokens"),
        thoughts_token_count=_count(raw.get("completion_tokens_details"), "reasoning_tokens"),
    )


def _count(raw: Any, name: str) -> int:
    value = raw.get(name) if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

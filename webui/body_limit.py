"""Every request body is capped before the app sees the request, whatever its framing.

The cap is the route's (a view marked with `body_limit`, e.g. a trigger's event) or the
app's. A `Content-Length` over it is answered 413 at once, before authentication and
without reading the body; a body without one (`Transfer-Encoding: chunked`) is read
through `CappedInput`, which reads at most the cap plus one byte and then raises the 413.
Either way the answer is JSON naming the limit, and the server closes the connection
rather than read the rest (`webui/serving.py`). Flask's own `MAX_CONTENT_LENGTH` sits one
byte above the app's cap: werkzeug stops a chunked body at its maximum without a word (the
body comes out cut short), so it is this stream that sees the byte past the cap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from flask import Flask
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

__all__ = ["LIMIT_KEY", "BodyLimit", "CappedInput", "body_limit", "too_large"]

LIMIT_KEY = "signoff.body_limit"  # the request's cap, in its WSGI environ

F = TypeVar("F", bound=Callable[..., Any])
_ATTRIBUTE = "signoff_body_limit"


def body_limit(limit: int) -> Callable[[F], F]:
    """Marks a view whose request bodies are capped at `limit` bytes (below the app's cap)."""

    def mark(view: F) -> F:
        setattr(view, _ATTRIBUTE, limit)
        return view

    return mark


def too_large(limit: int) -> str:
    """The 413's message, naming the limit."""
    return f"the request body is over this route's limit of {limit:,} bytes"


class CappedInput:
    """A request's input stream that raises 413 once more than `limit` bytes were asked of it."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._read = 0

    def _take(self, data: bytes) -> bytes:
        self._read += len(data)
        if self._read > self._limit:
            raise RequestEntityTooLarge(too_large(self._limit))
        return data

    def _room(self, size: int | None) -> int:
        room = self._limit + 1 - self._read
        return room if size is None or size < 0 else min(size, room)

    def read(self, size: int | None = -1) -> bytes:
        return self._take(bytes(self._stream.read(self._room(size))))

    def readline(self, size: int | None = -1) -> bytes:
        return self._take(bytes(self._stream.readline(self._room(size))))

    def __iter__(self) -> CappedInput:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class BodyLimit:
    """WSGI middleware around a Flask app's `wsgi_app`: the cap, before anything else runs."""

    def __init__(self, app: Flask, wsgi_app: Callable[..., Any], *, default: int) -> None:
        self._app = app
        self._wsgi_app = wsgi_app
        self._default = default

    def limit_for(self, environ: dict[str, Any]) -> int:
        """The cap of the route the request is for (the app's when no route matches)."""
        try:
            endpoint, _ = self._app.url_map.bind_to_environ(environ).match()
        except HTTPException:
            return self._default
        view = self._app.view_functions.get(str(endpoint))
        return int(getattr(view, _ATTRIBUTE, self._default))

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        limit = environ[LIMIT_KEY] = self.limit_for(environ)
        length = environ.get("CONTENT_LENGTH") or ""
        if length.isdigit() and int(length) > limit:
            return _answer_413(limit, start_response)
        if not length.isdigit():  # chunked, or no framing the server announced
            environ["wsgi.input"] = CappedInput(environ["wsgi.input"], limit)
        return self._wsgi_app(environ, start_response)


def _answer_413(limit: int, start_response: Callable[..., Any]) -> list[bytes]:
    body = json.dumps({"error": {"code": "payload_too_large", "message": too_large(limit)}})
    start_response(
        "413 Content Too Large",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body.encode()]

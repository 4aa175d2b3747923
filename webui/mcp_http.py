"""/mcp: Signoff's MCP tools over Streamable HTTP, for agent hosts holding an API token.

The SDK's transport is an ASGI app, and the web is Flask under gevent (WSGI). Each
request is authenticated here first (a bearer token only: 401 JSON without a valid
one; the API's body cap, 413), then handed whole to the SDK's own Streamable HTTP
session manager, stateless and answering JSON (no session to keep between requests,
no stream held open), run to its end on an asyncio loop inside the request's greenlet.
An asyncio loop belongs to an OS thread, which every greenlet of a worker shares, so
one MCP request at a time runs its loop per worker process (`_Endpoint.lock`, a gevent
lock there); each holds it for a few Redis round trips, which yield to the worker's
other connections.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

from flask import Flask, Response, current_app, request
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from shared.gate import Caller
from shared.mcp_server import build_server
from shared.models.users import Role
from webui.auth import AuthMethod, current_principal, requires
from webui.errors import HttpProblem
from webui.services import EXTENSION, Services

__all__ = ["PATH", "init_app"]

PATH = "/mcp"
_EXTENSION = "signoff.mcp"
_ANSWER_WITHIN_S = 30  # a tool call is a few Redis round trips; nothing holds the loop longer
_DROPPED = frozenset({"content-length", "transfer-encoding", "connection"})


# The caller of the request being served: set in the request's greenlet, and so in the context
# `asyncio.run` copies into the loop's tasks.
_CALLER: ContextVar[Caller] = ContextVar("signoff_mcp_caller")


@dataclass
class _Endpoint:
    """Per app: the SDK server (built once: that takes a millisecond) and the lock that keeps
    one MCP request's asyncio loop running at a time."""

    server: Server[Any]
    lock: Any


@dataclass
class _Exchange:
    """One request as ASGI sees it, and the response the SDK sends back."""

    body: bytes
    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    _read: bool = False

    async def receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until we answer
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]
            ]
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))


def _scope() -> dict[str, Any]:
    # A WSGI server hands headers over decoded as latin-1; "replace" only guards other callers.
    headers = [
        (k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace"))
        for k, v in request.headers
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": PATH,
        "raw_path": PATH.encode(),
        "root_path": "",
        "query_string": request.query_string,
        "headers": headers,
        "client": (request.remote_addr or "", 0),
        "server": (request.host, 0),
    }


async def _exchange(
    manager: StreamableHTTPSessionManager, scope: dict[str, Any], ex: _Exchange
) -> None:
    async with asyncio.timeout(_ANSWER_WITHIN_S), manager.run():
        await manager.handle_request(scope, ex.receive, ex.send)


@requires(Role.VIEWER)
def serve() -> Response:
    """One MCP message for a bearer token's caller, answered by the SDK's transport."""
    caller = current_principal()
    if caller.method is not AuthMethod.TOKEN:
        raise HttpProblem(
            401,
            "unauthorized",
            "the MCP endpoint takes a bearer token (`signoff token create NAME --role R`)",
            headers={"WWW-Authenticate": 'Bearer realm="signoff"'},
        )
    exchange = _Exchange(body=request.get_data(cache=False))  # 413 past the API's cap
    endpoint: _Endpoint = current_app.extensions[_EXTENSION]
    manager = StreamableHTTPSessionManager(
        app=endpoint.server,
        json_response=True,
        stateless=True,
        security_settings=None,  # bearer tokens only: a browser cannot send one by itself
        max_request_body_size=current_app.config["MAX_CONTENT_LENGTH"],
    )
    scope = _scope()
    with endpoint.lock:
        token = _CALLER.set(caller)
        try:
            asyncio.run(_exchange(manager, scope, exchange))
        except TimeoutError:
            raise HttpProblem(
                503, "unavailable", f"the MCP request took over {_ANSWER_WITHIN_S} s; try again"
            ) from None
        finally:
            _CALLER.reset(token)
    headers = [(k, v) for k, v in exchange.headers if k.lower() not in _DROPPED]
    return Response(b"".join(exchange.chunks), status=exchange.status, headers=headers)


def init_app(app: Flask) -> None:
    """Adds the route; the lock is made here, in the worker (after gevent patched threading)."""
    # `threading.Lock` looked up now, in the worker, after gevent patched it: a real lock
    # taken while another greenlet holds it would block every connection of the worker.
    client = cast(Services, app.extensions[EXTENSION]).client
    app.extensions[_EXTENSION] = _Endpoint(
        server=build_server(client, _CALLER.get), lock=threading.Lock()
    )
    # POST only: stateless, the server offers no stream to GET and no session to DELETE (405).
    app.add_url_rule(PATH, endpoint="mcp", view_func=serve, methods=["POST"])
    for name in ("mcp.server.streamable_http_manager", "mcp.server.streamable_http"):
        logging.getLogger(name).setLevel(logging.WARNING)  # a start and a stop per request

"""The MCP servers operators register: their records, their secrets, their listed tools.

A record (how to reach the server, its state, its tools and their version) is readable by
every role; the environment and header values live in a hash of their own that only
`connection` reads, for the worker that starts or reaches the server. Each listing that
changes the tools bumps the version and rewrites the server's entries in the tool
catalog (`shared.store.policy`), in the same transaction, so the policy pages and the
loosening check see exactly the tools the workers offer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import Conflict, CorruptRecord, NotFound
from shared.mcp.catalog import Listing, digest
from shared.models.mcp import McpServer, McpServerRequest, McpServerState, split_command
from shared.outbound import OutboundPolicy
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.policy import ToolInfo

__all__ = ["ALLOW_SETTING", "McpConnection", "McpServerStore", "outbound_policy", "redact"]

ALLOW_SETTING = "SIGNOFF_MCP_ALLOWED_HOSTS"

MAX_ERROR_CHARS = 2_000


@dataclass(frozen=True)
class McpConnection:
    """How a worker reaches one server, secrets included: never logged, never shown."""

    name: str
    argv: tuple[str, ...] = ()
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def secrets(self) -> list[str]:
        return [v for v in (*self.env.values(), *self.headers.values()) if len(v) >= 4]


def outbound_policy(allowed: Iterable[str]) -> OutboundPolicy:
    """The addresses an MCP server URL may reach: the webhooks' policy, MCP's allow-list."""
    return OutboundPolicy(tuple(allowed), setting=ALLOW_SETTING)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced, so an error message can be shown and logged."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


class McpServerStore:
    """Registered MCP servers, by name."""

    def __init__(
        self, client: redis.Redis, keys: KeySpace, *, outbound: OutboundPolicy | None = None
    ) -> None:
        self.client = client
        self.keys = keys
        self.outbound = outbound  # given, a URL on a refused address is not registered

    def add(self, request: McpServerRequest, *, actor: str, replace: bool = False) -> McpServer:
        """Registers a server (state `pending` until a worker lists its tools)."""
        if self.outbound is not None and request.url is not None:
            self.outbound.check_url(request.url)
        server = McpServer(
            name=request.name,
            transport=request.transport,
            command=request.command,
            url=request.url,
            env_keys=sorted(request.env),
            header_keys=sorted(request.headers),
            trusted=request.trusted,
            created_at=time.time(),
            created_by=actor,
        )
        secrets = json.dumps({"env": request.env, "headers": request.headers})

        def write(pipe: Any, before: McpServer | None) -> McpServer:
            if before is not None and not replace:
                raise Conflict(f"an MCP server named {request.name!r} is already registered")
            pipe.multi()
            if before is not None:
                _drop_catalog(pipe, self.keys, before)
            pipe.hset(self.keys.mcp_servers(), server.name, server.model_dump_json())
            pipe.hset(self.keys.mcp_secrets(), server.name, secrets)
            return server

        return self._update(request.name, write, "registering MCP server")

    def remove(self, name: str) -> McpServer:
        """Forgets a server, its secrets and its tools' catalog entries."""

        def write(pipe: Any, before: McpServer | None) -> McpServer:
            if before is None:
                raise NotFound(f"there is no MCP server named {name!r}")
            pipe.multi()
            _drop_catalog(pipe, self.keys, before)
            pipe.hdel(self.keys.mcp_servers(), name)
            pipe.hdel(self.keys.mcp_secrets(), name)
            return before

        return self._update(name, write, "removing MCP server")

    def get(self, name: str) -> McpServer:
        with storage_errors(f"reading MCP server {name}"):
            raw = self.client.hget(self.keys.mcp_servers(), name)
        if raw is None:
            raise NotFound(f"there is no MCP server named {name!r}")
        return _parse(name, raw)

    def all(self) -> list[McpServer]:
        """Every server, by name."""
        with storage_errors("reading MCP servers"):
            raw: dict[str, str] = self.client.hgetall(self.keys.mcp_servers())  # type: ignore[assignment]
        return [_parse(name, doc) for name, doc in sorted(raw.items())]

    def some(self, names: list[str]) -> dict[str, McpServer]:
        """The named servers that exist, in one round trip."""
        if not names:
            return {}
        with storage_errors("reading MCP servers"):
            raw: list[Any] = self.client.hmget(self.keys.mcp_servers(), names)
        return {name: _parse(name, doc) for name, doc in zip(names, raw, strict=True) if doc}

    def connection(self, name: str) -> McpConnection:
        """How to reach a server, with its secrets (for the worker only)."""
        server = self.get(name)
        with storage_errors(f"reading MCP server {name}"):
            raw = self.client.hget(self.keys.mcp_secrets(), name)
        try:
            secrets = json.loads(str(raw)) if raw else {}
        except ValueError as exc:
            raise CorruptRecord(f"the secrets of MCP server {name} are not JSON") from exc
        argv = tuple(split_command(server.command)) if server.command else ()
        return McpConnection(
            name=name,
            argv=argv,
            url=server.url,
            env=dict(secrets.get("env", {})),
            headers=dict(secrets.get("headers", {})),
        )

    def record_listing(self, name: str, listing: Listing) -> McpServer:
        """A successful listing: state connected; the version moves only if the tools changed."""

        def write(pipe: Any, before: McpServer | None) -> McpServer:
            if before is None:
                raise NotFound(f"there is no MCP server named {name!r}")
            changed = digest(before.tools, before.problems) != digest(
                listing.tools, listing.problems
            )
            after = before.model_copy(
                update={
                    "state": McpServerState.CONNECTED,
                    "last_error": "",
                    "tools": listing.tools,
                    "problems": listing.problems,
                    "tools_version": before.tools_version + (1 if changed else 0),
                    "refreshed_at": time.time(),
                }
            )
            pipe.multi()
            if changed:
                _drop_catalog(pipe, self.keys, before)
                _add_catalog(pipe, self.keys, after)
            pipe.hset(self.keys.mcp_servers(), name, after.model_dump_json())
            return after

        return self._update(name, write, "recording MCP tools")

    def record_failure(self, name: str, error: str) -> McpServer | None:
        """A failed attempt: state failing with the error; the tools listed before are kept."""

        def write(pipe: Any, before: McpServer | None) -> McpServer | None:
            if before is None:
                return None  # removed meanwhile: nothing to record
            after = before.model_copy(
                update={
                    "state": McpServerState.FAILING,
                    "last_error": error[:MAX_ERROR_CHARS],
                    "refreshed_at": time.time(),
                }
            )
            pipe.multi()
            pipe.hset(self.keys.mcp_servers(), name, after.model_dump_json())
            return after

        return self._update(name, write, "recording an MCP failure")

    def _update(self, name: str, write: Callable[[Any, McpServer | None], Any], what: str) -> Any:
        """Read, decide and write one server's record under WATCH, retried on a race."""
        key = self.keys.mcp_servers()
        with storage_errors(f"{what} {name}"), self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw = pipe.hget(key, name)
                    result = write(pipe, _parse(name, raw) if raw else None)
                    if _in_multi(pipe):
                        pipe.execute()
                    return result
                except redis.WatchError:
                    continue


def _in_multi(pipe: Any) -> bool:
    """Whether `write` began the transaction (it decides whether there is anything to write);
    a cluster pipeline keeps the flag on its strategy."""
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None:
        return bool(strategy._explicit_transaction)
    return bool(pipe.explicit_transaction)


def _drop_catalog(pipe: Any, keys: KeySpace, server: McpServer) -> None:
    names = [tool.exposed for tool in server.offered()]
    if names:
        pipe.hdel(keys.tool_catalog(), *names)


def _add_catalog(pipe: Any, keys: KeySpace, server: McpServer) -> None:
    mapping: dict[Any, Any] = {
        tool.exposed: ToolInfo(
            name=tool.exposed,
            description=tool.description,
            default_policy=server.default_policy(tool),
            server=server.name,
            server_tool=tool.name,
            annotations=tool.annotations,
        ).model_dump_json()
        for tool in server.offered()
    }
    if mapping:
        pipe.hset(keys.tool_catalog(), mapping=mapping)


def _parse(name: str, doc: Any) -> McpServer:
    try:
        return McpServer.model_validate_json(doc)
    except ValidationError as exc:
        raise CorruptRecord(f"MCP server {name} is unreadable: {exc}") from exc

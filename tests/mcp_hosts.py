"""An MCP host for the tests: the SDK's own ClientSession over stdio or Streamable HTTP.

Each helper opens a session, runs one async function with it, and closes it, so a
test reads as a sequence of plain calls. `McpHost` wraps a session with the calls
the tests make and the waits they need (a conversation parked, a turn completed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from shared.store.users import TokenStore
from tests.stack import ROOT, SIGNOFF, state_store

T = TypeVar("T")

ROLES = ("viewer", "submitter", "operator")
EMAIL = {"to": "ops@example.com", "subject": "Report", "body": "All good."}
EMAIL_PROMPT = 'call send_email {"to": "ops@example.com", "subject": "Report", "body": "All good."}'


@dataclass
class McpHost:
    """A connected ClientSession (or the SDK's high-level Client) and the calls the tests make."""

    session: ClientSession | Client

    async def tool_names(self) -> set[str]:
        return {tool.name for tool in (await self.session.list_tools()).tools}

    async def call(self, name: str, **arguments: Any) -> types.CallToolResult:
        return await self.session.call_tool(name, arguments)

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        """The structured answer of a call that must succeed."""
        result = await self.call(name, **arguments)
        assert not result.is_error, text_of(result)
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    async def refused(self, name: str, **arguments: Any) -> str:
        """The message of a call that must fail as a tool error."""
        result = await self.call(name, **arguments)
        assert result.is_error, result
        return text_of(result)

    async def wait_for(
        self, cid: str, done: Callable[[dict[str, Any]], bool], *, turn_id: str | None = None
    ) -> dict[str, Any]:
        """get_conversation until `done` holds for its answer (20 s at most)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            state = await self.ok("get_conversation", conversation_id=cid, turn_id=turn_id)
            if done(state):
                return state
            await anyio.sleep(0.05)
        raise AssertionError(f"conversation {cid} never got there: {state}")


def role_tokens(env: dict[str, str], prefix: str) -> dict[str, str]:
    """A token of each role, named `<prefix>-<role>`, by role name."""
    admin, keys = state_store(env["SIGNOFF_REDIS_URL"], env["SIGNOFF_KEY_PREFIX"])
    store = TokenStore(admin, keys)
    try:
        return {role: store.create(f"{prefix}-{role}", role) for role in ROLES}
    finally:
        admin.close()


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def stdio_params(env: dict[str, str], token: str) -> StdioServerParameters:
    """`signoff mcp serve` as a host starts it: the command, the token in the environment."""
    return StdioServerParameters(
        command=SIGNOFF,
        args=["mcp", "serve"],
        env={**os.environ, **env, "SIGNOFF_TOKEN": token},
        cwd=str(ROOT),
    )


def over_stdio(env: dict[str, str], token: str, body: Callable[[McpHost], Awaitable[T]]) -> T:
    """Starts `signoff mcp serve`, runs `body` with a session on it, stops it."""

    async def main() -> T:
        async with (
            stdio_client(stdio_params(env, token)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await body(McpHost(session))

    return anyio.run(main)


def over_http(
    url: str, token: str, body: Callable[[McpHost], Awaitable[T]], *, modern: bool = False
) -> T:
    """Connects to `url` (the web's /mcp) with a bearer token, runs `body`, disconnects.

    A ClientSession speaks the handshake era (`initialize`); `modern` uses the SDK's Client,
    which probes `server/discover` and speaks the per-request era (2026-07-28).
    """

    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            if modern:
                async with Client(transport, cache=None) as client:
                    assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    return await body(McpHost(client))
            async with transport as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await body(McpHost(session))

    return anyio.run(main)


# The approval's round trip, step by step, the same over either transport.

EDITED = {"to": "lead@example.com", "subject": "Report", "body": "All good, checked."}


async def start_and_park(host: McpHost) -> tuple[str, str, str]:
    """A submitter starts a conversation whose send_email parks; its ids and the approval's."""
    started = await host.ok("start_conversation", prompt=EMAIL_PROMPT)
    cid, turn_id = started["conversation_id"], started["turn_id"]
    state = await host.wait_for(cid, lambda s: s["status"] == "waiting_for_user")
    [approval_id] = state["pending_approvals"]
    assert state["turn"] is None
    return cid, turn_id, approval_id


async def allow_edited(host: McpHost, cid: str, approval_id: str) -> None:
    """An operator finds the approval in the inbox and allows it with edited arguments; a
    second decision is a conflict naming who decided."""
    listed = await host.ok("list_pending_approvals", conversation_id=cid)
    assert listed["pending_count"] == 1
    [item] = listed["items"]
    assert (item["id"], item["tool"], item["arguments"]) == (approval_id, "send_email", EMAIL)
    by_tool = await host.ok("list_pending_approvals", tool="get_time", conversation_id=cid)
    assert by_tool["pending_count"] == 0 and by_tool["items"] == []
    resolved = await host.ok(
        "resolve_approval", approval_id=approval_id, decision="allow", arguments=EDITED
    )
    assert (resolved["status"], resolved["decision"]) == ("resolved", "allow")
    again = await host.refused(
        "resolve_approval", approval_id=approval_id, decision="deny", reason="x"
    )
    assert "conflict" in again and resolved["resolved_by"] in again


async def completed_answer(host: McpHost, cid: str, turn_id: str) -> str:
    """The turn's final answer, once completed."""

    def done(state: dict[str, Any]) -> bool:
        # the tool reads the turn and the conversation one after the other: waited for both
        return state["turn"]["status"] == "completed" and state["status"] == "idle"

    state = await host.wait_for(cid, done, turn_id=turn_id)
    assert state["pending_approvals"] == []
    assert state["answer"] == state["turn"]["answer"]
    return str(state["turn"]["answer"])

"""The SDK's low-level MCP server on Signoff's tools, for any transport.

`identify` names the caller of each request (the stdio server looks its token up again
at every call, so a revoked token stops at once; the web passes the request's
principal). Tools a caller's role does not allow are left out of its list and refused
if called. Every failure of a call is a tool error (``isError``) whose text says what
was wrong, not a protocol error: a model reads it and can correct itself.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from shared.client import Client
from shared.errors import SignoffError
from shared.gate import Caller, check_role
from shared.mcp_server.tools import TOOLS, SignoffTool, find_tool

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "build_server", "call_tool"]

log = logging.getLogger(__name__)

SERVER_NAME = "signoff"
INSTRUCTIONS = (
    "Signoff runs LLM agent conversations as background jobs; risky tool calls wait for a "
    "person's approval. Start work with start_conversation, then poll get_conversation "
    "(status waiting_for_user means an approval is pending). Operators decide approvals with "
    "list_pending_approvals and resolve_approval."
)
_INVALID_REQUEST = -32600


def _version() -> str:
    try:
        return version("signoff")
    except PackageNotFoundError:
        return "0"


@functools.cache
def _definitions() -> dict[str, types.Tool]:
    """Each tool as MCP lists it, built once: a JSON Schema takes milliseconds to generate."""
    return {tool.name: _definition(tool) for tool in TOOLS}


def _definition(tool: SignoffTool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.arguments.model_json_schema(),
        output_schema=tool.answer.model_json_schema(mode="serialization"),
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=not tool.read_only,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def _input_schema(name: str) -> dict[str, Any] | None:
    """What the SDK checks a per-request call's `Mcp-Param` headers against."""
    found = _definitions().get(name)
    return None if found is None else found.input_schema


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _answer(answer: BaseModel) -> types.CallToolResult:
    data = answer.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)


def _invalid(tool: SignoffTool, exc: ValidationError) -> types.CallToolResult:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    lines = [f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in errors[:10]]
    return _failed(f"invalid arguments for {tool.name}: " + "; ".join(lines))


def call_tool(
    client: Client, caller: Caller, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Runs one call: its answer as structured content and JSON text, or a tool error."""
    tool = find_tool(name)
    if tool is None:
        known = ", ".join(t.name for t in TOOLS)
        return _failed(f"unknown tool {name[:100]!r}; this server has: {known}")
    try:
        check_role(caller, tool.role, tool.name)
        args = tool.arguments.model_validate(arguments or {})
        return _answer(tool.run(client, caller, args))
    except ValidationError as exc:
        return _invalid(tool, exc)
    except SignoffError as exc:
        return _failed(f"{exc.code}: {exc.message}")
    except Exception:
        log.exception("MCP tool %s failed", tool.name)
        return _failed(f"internal error in {tool.name}; see the Signoff server's log")


def build_server(client: Client, identify: Callable[[], Caller]) -> Server[Any]:
    """An SDK server whose tools act for the caller `identify` names, through `client`."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            caller = identify()
        except SignoffError as exc:
            raise MCPError(code=_INVALID_REQUEST, message=exc.message) from None
        return types.ListToolsResult(
            tools=[_definitions()[tool.name] for tool in TOOLS if caller.role.allows(tool.role)]
        )

    async def call(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            caller = identify()
        except SignoffError as exc:
            return _failed(f"{exc.code}: {exc.message}")
        # Short Redis round trips, run inline: under the web's gevent they yield to other
        # connections; the stdio server has one client.
        return call_tool(client, caller, params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=_version(),
        title="Signoff",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call,
    )

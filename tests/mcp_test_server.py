"""A real MCP server for the tests, written with the SDK's low-level server.

    python -m tests.mcp_test_server good|hostile [--http PORT] [--legacy]

Each call is appended to the file named by MCP_TEST_EFFECTS (one JSON line: the tool
and its arguments) before the tool does anything else, so a test can tell exactly which
calls reached the server. `good` offers a read-only `list_notes`, a destructive
`delete_note`, `hang` (never answers), `crash` (the process exits mid-call), `ask_name`
(asks the user for input), `grow` (adds a tool `extra`, and tells listening clients that
the tool list changed) and `big` (a result of N bytes). `hostile` offers, beside one
good tool, a 10 MB schema, a catastrophic pattern, bad and duplicate names, and 10,000
filler tools.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.message import SessionMessage

NOTES = {"1": "buy milk", "2": "call the bank"}
READ_ONLY = types.ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def good_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="list_notes",
            description="Lists the notes.",
            input_schema=_schema(),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="delete_note",
            description="Deletes a note.",
            input_schema=_schema(id={"type": "string"}),
            annotations=DESTRUCTIVE,
        ),
        types.Tool(name="hang", description="Never answers.", input_schema=_schema()),
        types.Tool(name="crash", description="Dies mid-call.", input_schema=_schema()),
        types.Tool(name="ask_name", description="Asks for a name.", input_schema=_schema()),
        types.Tool(name="grow", description="Offers one more tool.", input_schema=_schema()),
        types.Tool(
            name="big",
            description="A result of `size` bytes.",
            input_schema=_schema(size={"type": "integer"}),
            annotations=READ_ONLY,
        ),
    ]


def hostile_tools() -> list[types.Tool]:
    huge = {f"p{i}": {"type": "string", "description": "x" * 1000} for i in range(10_000)}
    tools = [
        types.Tool(
            name="fine", description="Works.", input_schema=_schema(), annotations=READ_ONLY
        ),
        types.Tool(name="huge_schema", input_schema={"type": "object", "properties": huge}),
        types.Tool(
            name="evil_pattern",
            input_schema=_schema(s={"type": "string", "pattern": "^(a+)+\\1$"}),
        ),
        types.Tool(name="bad name with spaces and more" * 3, input_schema=_schema()),
        types.Tool(name="fine", description="Again.", input_schema=_schema()),
        types.Tool(name="dotted.name", input_schema=_schema()),
        types.Tool(name="dotted_name", input_schema=_schema()),
    ]
    tools += [types.Tool(name=f"filler{i}", input_schema=_schema()) for i in range(10_000)]
    return tools


def _record(name: str, arguments: dict[str, Any] | None) -> None:
    path = os.environ.get("MCP_TEST_EFFECTS")
    if path:
        with open(path, "a") as effects:
            effects.write(json.dumps({"tool": name, "args": arguments or {}}) + "\n")
            effects.flush()
            os.fsync(effects.fileno())


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    name, args = params.name, params.arguments or {}
    _record(name, args)
    if name == "list_notes":
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(NOTES))], structured_content=NOTES
        )
    if name == "delete_note":
        return _text(f"deleted note {args.get('id')}")
    if name == "hang":
        await asyncio.sleep(3600)
    if name == "crash":
        os._exit(3)
    if name == "big":
        return _text("x" * int(args.get("size", 0)))
    if name == "ask_name":
        return await _ask_name(ctx, params)
    if name == "grow":
        TOOLS.append(types.Tool(name="extra", description="New.", input_schema=_schema()))
        await BUS.publish(ToolsListChanged())
        return _text("grown")
    if name in ("fine", "extra"):
        return _text(name)
    return types.CallToolResult(content=[types.TextContent(text="no such tool")], is_error=True)


ASK = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="Which name should I greet?",
        requested_schema=_schema(name={"type": "string", "minLength": 2}),
    )
)


async def _ask_name(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    """The current revision's multi-round-trip input request (ask, then answer the retry); an
    older revision's `elicitation/create` inside the call when the server runs `--legacy`."""
    if LEGACY:
        asked = await ctx.session.elicit_form(
            ASK.params.message,  # type: ignore[union-attr]
            ASK.params.requested_schema,  # type: ignore[union-attr]
            related_request_id=ctx.request_id,
        )
        answer: Any = asked
    else:
        answer = (params.input_responses or {}).get("name")
    if answer is None:
        return types.InputRequiredResult(input_requests={"name": ASK})
    found = answer if isinstance(answer, dict) else answer.model_dump(mode="json")
    _record("ask_name.answer", {"action": found.get("action"), "content": found.get("content")})
    name = (found.get("content") or {}).get("name")
    return _text(f"hello {name} ({found.get('action')})")


TOOLS: list[types.Tool] = []  # what this process offers (`grow` adds one)
LEGACY = "--legacy" in sys.argv  # speaks only the handshake era (2025 revisions)
BUS = InMemorySubscriptionBus()  # where the tool list's changes go to listening clients


def build(mode: str) -> Server[Any]:
    TOOLS[:] = good_tools() if mode == "good" else hostile_tools()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    return Server(
        f"test-{mode}",
        on_list_tools=list_tools,
        on_call_tool=_call,
        on_subscriptions_listen=ListenHandler(BUS),
    )


async def _stdio(server: Server[Any], *, legacy: bool) -> None:
    async with stdio_server() as (read, write):
        if legacy:
            read = await _without_discover(read, write)
        await server.run(read, write, server.create_initialization_options())


async def _without_discover(read: Any, write: Any) -> Any:
    """A server of an older revision: `server/discover` is an unknown method, so the client
    falls back to the `initialize` handshake (and server-to-client requests)."""
    inner_send, inner_read = anyio.create_memory_object_stream[Any](16)

    async def relay() -> None:
        async with inner_send:
            async for message in read:
                body = getattr(message, "message", None)
                if isinstance(body, types.JSONRPCRequest) and body.method == "server/discover":
                    error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                    reply = types.JSONRPCError(jsonrpc="2.0", id=body.id, error=error)
                    await write.send(SessionMessage(reply))
                    continue
                await inner_send.send(message)

    asyncio.get_running_loop().create_task(relay())
    return inner_read


def main(argv: list[str]) -> None:
    server = build(argv[0])
    if "--http" in argv:
        import uvicorn

        port = int(argv[argv.index("--http") + 1])
        app = server.streamable_http_app(json_response="--json" in argv)  # plain JSON answers
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    else:
        asyncio.run(_stdio(server, legacy=LEGACY))


if __name__ == "__main__":
    main(sys.argv[1:])

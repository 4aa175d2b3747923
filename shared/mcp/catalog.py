"""A server's tool listing turned into the tools Signoff offers, each refused on its own.

A server is not trusted to be well-formed: a tool whose name cannot be offered (too
long, a collision, a duplicate), whose input schema breaks the bounds user schemas
keep (size, depth, a pattern re2 cannot run in linear time), or that comes past the
count limit is kept with a `problem` naming it, and the rest still work. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from shared.errors import InvalidInput
from shared.models.config import TOOL_NAME_PATTERN
from shared.models.mcp import McpTool, McpToolAnnotations, exposed_name
from shared.schema import check_schema

__all__ = ["MAX_DESCRIPTION_CHARS", "Listing", "build_listing", "digest"]

MAX_DESCRIPTION_CHARS = 4_000
MAX_LISTED_NAME_CHARS = 128
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SAFE = re.compile(TOOL_NAME_PATTERN)
_HINTS = {
    "title": "title",
    "readOnlyHint": "read_only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open_world",
}


class Listing:
    """The tools of one listing, in the server's order, and problems of the listing as a whole."""

    def __init__(self, tools: list[McpTool], problems: list[str]) -> None:
        self.tools = tools
        self.problems = problems


def build_listing(
    server: str, raw_tools: Iterable[Mapping[str, Any]], *, max_tools: int
) -> Listing:
    """Each listed tool (as the wire spells it: `inputSchema`, `readOnlyHint`) checked."""
    tools: list[McpTool] = []
    problems: list[str] = []
    taken: dict[str, str] = {}
    for position, raw in enumerate(raw_tools):
        if position >= max_tools:
            problems.append(
                f"the server lists more than {max_tools:,} tools (SIGNOFF_MCP_MAX_TOOLS); "
                "only the first are offered"
            )
            break
        tool = _tool(server, raw)
        if not tool.problem:
            clash = taken.get(tool.exposed)
            if clash is not None:
                tool = _refused(tool, _clash(tool, clash))
            else:
                taken[tool.exposed] = tool.name
        tools.append(tool)
    return Listing(tools, problems)


def _clash(tool: McpTool, earlier: str) -> str:
    if earlier == tool.name:
        return f"tool {tool.name!r} is listed twice; only the first is offered"
    return (
        f"tool {tool.name!r} would be offered as {tool.exposed!r}, which tool {earlier!r} "
        "already is; rename one of them on the server"
    )


def _refused(tool: McpTool, problem: str) -> McpTool:
    return tool.model_copy(update={"problem": problem, "exposed": ""})


def _tool(server: str, raw: Mapping[str, Any]) -> McpTool:
    name = raw.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_LISTED_NAME_CHARS:
        shown = repr(name)[:80]
        return McpTool(name=str(name)[:80], problem=f"tool name {shown} must be 1-128 characters")
    description = raw.get("description") or ""
    tool = McpTool(
        name=name,
        exposed=exposed_name(server, _UNSAFE.sub("_", name)),
        description=str(description)[:MAX_DESCRIPTION_CHARS],
        annotations=_annotations(raw.get("annotations")),
    )
    if not _SAFE.fullmatch(tool.exposed):
        return _refused(
            tool,
            f"tool {name!r} would be offered as {tool.exposed!r}, longer than the 64 characters "
            "model providers accept; shorten the server's name or the tool's",
        )
    problem = _schema_problem(name, raw.get("inputSchema"))
    if problem:
        return _refused(tool, problem)
    return tool.model_copy(update={"input_schema": raw["inputSchema"]})


def _schema_problem(name: str, schema: Any) -> str:
    field = f"input schema of tool {name!r}"
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f"{field} must be a JSON schema with type 'object'"
    try:
        check_schema(schema, name=field)
    except InvalidInput as exc:
        return exc.message
    return ""


def _annotations(raw: Any) -> McpToolAnnotations:
    if not isinstance(raw, Mapping):
        return McpToolAnnotations()
    found: dict[str, Any] = {}
    for wire, field in _HINTS.items():
        value = raw.get(wire)
        if field == "title":
            found[field] = str(value)[:200] if isinstance(value, str) else None
        else:
            found[field] = value if isinstance(value, bool) else None
    return McpToolAnnotations(**found)


def digest(tools: list[McpTool], problems: list[str]) -> str:
    """What changes when the listing changes (tools, schemas, annotations, problems)."""
    body = [tool.model_dump(mode="json") for tool in tools]
    return json.dumps([body, problems], sort_keys=True, separators=(",", ":"))

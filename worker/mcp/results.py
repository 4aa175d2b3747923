"""An MCP tool result as the model reads it: content blocks in, a bounded JSON outcome out.

Text and structured content pass through; an image or audio block is described, not
copied (its bytes would fill the model's context); a resource link keeps its URI; an
embedded resource keeps its text. `isError` makes the outcome an error whose message is
the result's text. A result larger than `mcp_max_result_bytes` is refused, naming both.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from worker.tools import ToolOutcome

__all__ = ["outcome_of"]


def outcome_of(
    server: str, tool: str, result: mcp_types.CallToolResult, *, limit: int
) -> ToolOutcome:
    """The call's outcome, recording the server that answered."""
    blocks = [_block(block) for block in result.content]
    if result.is_error:
        text = " ".join(b["text"] for b in blocks if b.get("type") == "text") or "no message"
        return _bounded(
            ToolOutcome.failure(f"{tool} (MCP server {server}) failed: {text}"), limit, tool
        )
    payload: dict[str, Any] = {"server": server, "content": blocks}
    if result.structured_content is not None:
        payload["structured_content"] = result.structured_content
    return _bounded(ToolOutcome.success(payload), limit, tool)


def _bounded(outcome: ToolOutcome, limit: int, tool: str) -> ToolOutcome:
    size = len(json.dumps([outcome.result, outcome.error], default=str).encode())
    if size <= limit:
        return outcome
    return ToolOutcome.failure(
        f"the result of {tool} is {size:,} bytes, over the limit of {limit:,} "
        "(SIGNOFF_MCP_MAX_RESULT_BYTES); it was not kept"
    )


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, mcp_types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "bytes": _size(block.data)}
    if isinstance(block, mcp_types.ResourceLink):
        link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        return link | ({"mime_type": block.mime_type} if block.mime_type else {})
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        found: dict[str, Any] = {"type": "resource", "uri": str(resource.uri)}
        text = getattr(resource, "text", None)
        if text is not None:
            return found | {"text": text}
        return found | {"bytes": _size(getattr(resource, "blob", ""))}
    return {"type": str(getattr(block, "type", "unknown"))}


def _size(data: str) -> int:
    """Decoded bytes of base64 data, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=")

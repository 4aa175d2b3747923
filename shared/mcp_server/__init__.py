"""Signoff as an MCP server: its tools for other agent hosts, over stdio and Streamable HTTP.

`tools.py` is the catalog (what each tool takes, answers, and needs), `calls.py` runs a
call through the product's own `Client`, stores and gate, `server.py` builds the SDK's
low-level server on them, and `tokens.py` turns an API token into the caller. The CLI
serves it over stdio (`signoff mcp serve`), the web at ``/mcp`` (`webui/mcp_http.py`).
"""

from __future__ import annotations

from shared.mcp_server.server import SERVER_NAME, build_server
from shared.mcp_server.tokens import TokenCaller, caller_for_token

__all__ = ["SERVER_NAME", "TokenCaller", "build_server", "caller_for_token"]

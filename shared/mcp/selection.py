"""Which MCP tools a conversation (or an agent) may use: servers, or `server/tool` names."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["selected_servers", "selects"]


def selects(selection: Sequence[str], server: str, tool: str) -> bool:
    """Whether `selection` names the server whole, or this one tool of it."""
    return server in selection or f"{server}/{tool}" in selection


def selected_servers(selection: Sequence[str]) -> list[str]:
    """The servers a selection reaches, in order, each once."""
    return list(dict.fromkeys(entry.partition("/")[0] for entry in selection))

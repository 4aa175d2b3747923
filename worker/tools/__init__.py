"""Tools the model may call: the tool type, the registry, and the built-in tools."""

from __future__ import annotations

from worker.tools.base import Tool, ToolContext, ToolFailed, object_schema, tool
from worker.tools.files import canonical_path_for
from worker.tools.registry import (
    BUILTIN_TOOLS,
    ToolOutcome,
    ToolRegistry,
    default_registry,
    load_user_tools,
)
from worker.tools.workspace import WorkspacePath, resolve_path

__all__ = [
    "BUILTIN_TOOLS",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolOutcome",
    "ToolRegistry",
    "WorkspacePath",
    "canonical_path_for",
    "default_registry",
    "load_user_tools",
    "object_schema",
    "resolve_path",
    "tool",
]

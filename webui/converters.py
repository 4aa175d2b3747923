"""URL converters: ids in paths must be ids that can exist (others are a plain 404).

Each converter also gives the OpenAPI schema of its path argument, so the document
declares exactly what the routes match.
"""

from __future__ import annotations

from typing import Any, ClassVar

from werkzeug.routing import BaseConverter, ValidationError

from shared.models.config import TOOL_NAME_PATTERN
from shared.models.mcp import SERVER_NAME_PATTERN
from shared.store.keys import ID_PATTERN

__all__ = [
    "CONVERTERS",
    "IdConverter",
    "NotificationIdConverter",
    "PathConverter",
    "ToolNameConverter",
]

_MAX_ID = 128
MODEL_NAME_PATTERN = r"[A-Za-z0-9_.:/@+\-]{1,200}"
# `shared.store.keys.KeySpace.notification`: ``<conversation id>.<suffix>``, suffix without dots.
NOTIFICATION_ID_PATTERN = r"[A-Za-z0-9_.\-]+\.[A-Za-z0-9_\-]+"


class PathConverter(BaseConverter):
    """A converter that declares the schema of what it matches (werkzeug anchors `regex`)."""

    schema: ClassVar[dict[str, Any]]


class IdConverter(PathConverter):
    """The characters `shared.store.keys.check_id` accepts."""

    regex = ID_PATTERN
    schema = {"type": "string", "pattern": f"^{ID_PATTERN}$"}


class NotificationIdConverter(PathConverter):
    """A notification id: a conversation id, a dot and a suffix; at most 128 characters."""

    regex = NOTIFICATION_ID_PATTERN
    schema = {
        "type": "string",
        "pattern": f"^{NOTIFICATION_ID_PATTERN}$",
        "maxLength": _MAX_ID,
    }

    def to_python(self, value: str) -> str:
        if len(value) > _MAX_ID:
            raise ValidationError()
        return value


class ToolNameConverter(PathConverter):
    """A tool name as policy rules take it."""

    regex = TOOL_NAME_PATTERN.strip("^$")
    schema = {"type": "string", "pattern": TOOL_NAME_PATTERN}


class McpServerNameConverter(PathConverter):
    """An MCP server's name."""

    regex = SERVER_NAME_PATTERN.strip("^$")
    schema = {"type": "string", "pattern": SERVER_NAME_PATTERN}


class ModelNameConverter(PathConverter):
    """A model's name as providers spell it: `llama3:8b`, `org/model` (slashes included)."""

    part_isolating = False
    regex = MODEL_NAME_PATTERN
    schema = {"type": "string", "pattern": f"^{MODEL_NAME_PATTERN}$"}


# The name each converter has in URL rules: ``<nid:nid>``.
CONVERTERS: dict[str, type[PathConverter]] = {
    "id": IdConverter,
    "nid": NotificationIdConverter,
    "tool": ToolNameConverter,
    "mcp": McpServerNameConverter,
    "model": ModelNameConverter,
}

"""The provider protocol: a model request in, a stream of provider events out.

Providers are synchronous iterators (workers run turns on threads). Closing the
iterator closes the underlying HTTP stream, which is how abort stops a model.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.models.config import ToolSelection
from shared.models.content import Media
from shared.models.model_settings import ModelSettings
from shared.models.steps import ToolCall, UsageMetadata
from shared.models.value_enum import ValueEnum

__all__ = [
    "FinishEvent",
    "Message",
    "ModelRequest",
    "Provider",
    "ProviderEvent",
    "Role",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallEvent",
    "ToolSpec",
    "UsageEvent",
]


class Role(ValueEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True)
class Message:
    """One message of the context sent to a model."""

    role: Role
    content: str = ""
    media: tuple[Media, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # on assistant messages
    tool_call_id: str = ""  # on tool messages
    name: str = ""  # tool name, on tool messages


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_selection: ToolSelection = ToolSelection.AUTO
    response_schema: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    settings: ModelSettings = field(default_factory=ModelSettings)


@dataclass(frozen=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    """A complete tool call: fragments are reassembled inside the provider."""

    call: ToolCall


@dataclass(frozen=True)
class UsageEvent:
    usage: UsageMetadata


@dataclass(frozen=True)
class FinishEvent:
    reason: str = "stop"


ProviderEvent = ThinkingDelta | TextDelta | ToolCallEvent | UsageEvent | FinishEvent


class Provider(Protocol):
    """Turns a request into events; raises ProviderError (with http_code) on failure."""

    name: str

    def stream(self, request: ModelRequest) -> Iterator[ProviderEvent]:
        """Yields events until the model finishes; closing the iterator stops the call."""
        ...

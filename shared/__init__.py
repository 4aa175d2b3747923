"""Signoff's shared package: models, settings, stores and clients used by workers and the web."""

from __future__ import annotations

from shared.client import Client, Conversation
from shared.client.aio import AsyncClient, AsyncConversation
from shared.models.chunks import StreamChunk, Text, Thought, ToolCallChunk
from shared.models.config import ConversationConfig, ToolPolicy, ToolSelection, TurnLimits
from shared.models.content import Content, Media, SlashCommand, TextPart
from shared.models.events import ChatResponse, ConversationStatus, TurnStatus
from shared.models.steps import (
    Step,
    StepSource,
    StepStatus,
    StepTarget,
    StepType,
    ToolCall,
    UsageMetadata,
)
from shared.settings import DoubleTextPolicy, Settings, load_settings
from shared.workspace import FileRead

__all__ = [
    "AsyncClient",
    "AsyncConversation",
    "ChatResponse",
    "Client",
    "Content",
    "Conversation",
    "ConversationConfig",
    "ConversationStatus",
    "DoubleTextPolicy",
    "FileRead",
    "Media",
    "Settings",
    "SlashCommand",
    "Step",
    "StepSource",
    "StepStatus",
    "StepTarget",
    "StepType",
    "StreamChunk",
    "Text",
    "TextPart",
    "Thought",
    "ToolCall",
    "ToolCallChunk",
    "ToolPolicy",
    "ToolSelection",
    "TurnLimits",
    "TurnStatus",
    "UsageMetadata",
    "load_settings",
]

"""The JSON API's request and response bodies; the OpenAPI schemas are generated from them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.config import ConversationConfig, ToolPolicy, ToolSelection
from shared.content import Content
from shared.conversations import ConversationRecord
from shared.events import ChatResponse, ConversationStatus, TurnStatus
from shared.settings import DoubleTextPolicy
from shared.steps import Step, UsageMetadata

__all__ = [
    "ConversationDetail",
    "ConversationList",
    "ConversationSummary",
    "ErrorBody",
    "ErrorResponse",
    "HistoryResponse",
    "NewConversation",
    "PromptAccepted",
    "PromptBody",
    "TurnView",
    "Usage",
    "UsageDayView",
    "UsageResponse",
    "conversation_detail",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewConversation(_Request):
    """The options of `Client.new_conversation`; each omitted one defaults from settings."""

    provider: str | None = None
    model: str | None = None
    system_prompt: str = Field("", max_length=200_000)
    tools: dict[str, ToolPolicy] | None = None
    allow_all: bool = False
    tool_selection: ToolSelection = ToolSelection.AUTO
    max_history_size: int | None = Field(None, ge=0)
    response_schema: dict[str, Any] | None = None
    double_text_policy: DoubleTextPolicy | None = None
    max_model_calls: int | None = Field(None, gt=0)
    max_tool_calls: int | None = Field(None, ge=0)
    timeout_s: float | None = Field(None, gt=0)
    conversation_id: str | None = None
    metadata: dict[str, str] | None = None
    compaction_token_budget: int | None = Field(None, ge=0)


class PromptBody(_Request):
    """A prompt: `text` (``/name args`` is a slash command) or `content` with parts."""

    text: str | None = None
    content: Content | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PromptBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("send exactly one of 'text' and 'content'")
        return self

    def prompt(self) -> str | Content:
        return self.text if self.text is not None else self.content  # type: ignore[return-value]


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class Usage(BaseModel):
    total: UsageMetadata
    last_turn: UsageMetadata | None = Field(description="Usage of the last turn; null before any.")


class ConversationSummary(BaseModel):
    id: str
    status: ConversationStatus
    closed: bool
    active_turn: str | None
    queued: int = Field(description="Turns waiting behind the active one.")
    provider: str
    model: str
    created_at: float
    updated_at: float
    metadata: dict[str, str]

    @classmethod
    def of(cls, record: ConversationRecord) -> ConversationSummary:
        return cls(**_summary_fields(record))


class ConversationDetail(ConversationSummary):
    config: ConversationConfig
    usage: Usage
    turn_count: int


def _summary_fields(record: ConversationRecord) -> dict[str, Any]:
    return {
        "id": record.conversation_id,
        "status": record.status,
        "closed": record.closed,
        "active_turn": record.active_turn or None,
        "queued": record.queued,
        "provider": record.config.provider,
        "model": record.config.model,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "metadata": record.config.metadata,
    }


def conversation_detail(
    record: ConversationRecord, usage: Usage, turn_count: int
) -> ConversationDetail:
    return ConversationDetail(
        **_summary_fields(record), config=record.config, usage=usage, turn_count=turn_count
    )


class ConversationList(BaseModel):
    items: list[ConversationSummary]
    offset: int
    limit: int
    total: int | None = Field(description="All conversations; null when a filter is applied.")
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class PromptAccepted(BaseModel):
    conversation_id: str
    turn_id: str
    status: TurnStatus = TurnStatus.QUEUED


class HistoryResponse(BaseModel):
    conversation_id: str
    offset: int
    limit: int
    total: int = Field(description="Retained steps.")
    trimmed: int = Field(description="Steps dropped from the front by max_history_size.")
    steps: list[Step]
    turn_start_indices: list[int] = Field(description="Relative to the retained steps.")
    compaction_indices: list[int] = Field(description="Relative to the retained steps.")


class TurnView(BaseModel):
    conversation_id: str
    turn_id: str
    status: TurnStatus
    prompt: Content
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    response: ChatResponse | None = Field(None, description="Set once the turn completed.")
    error: str | None = Field(None, description="Why a failed or cancelled turn ended.")


class UsageDayView(BaseModel):
    day: str
    models: dict[str, UsageMetadata]


class UsageResponse(BaseModel):
    start: str
    end: str
    days: list[UsageDayView]
    totals: dict[str, UsageMetadata]

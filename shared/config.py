"""A conversation's configuration: fixed at creation, stored with the conversation."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.settings import DoubleTextPolicy, Settings

__all__ = ["ConversationConfig", "ToolPolicy", "ToolSelection", "TurnLimits"]


class ToolSelection(str, Enum):
    """Whether the model may, must, or must not call tools."""

    AUTO = "auto"
    REQUIRED = "required"
    NONE = "none"


class ToolPolicy(str, Enum):
    """What happens when the model calls a tool: run it, ask an operator, or refuse."""

    AUTO = "auto"
    ASK = "ask"
    DENY = "deny"


class TurnLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_model_calls: int = Field(16, gt=0)
    max_tool_calls: int = Field(32, ge=0)
    timeout_s: float = Field(600.0, gt=0)


class ConversationConfig(BaseModel):
    """How a conversation runs; every field has a default that works offline."""

    model_config = ConfigDict(frozen=True)

    provider: str = "scripted"
    model: str = "signoff-demo"
    system_prompt: str = ""
    tools: dict[str, ToolPolicy] | None = Field(
        default=None,
        description="Enabled tools and their policy; None enables every registered tool.",
    )
    allow_all: bool = Field(default=False, description="Run every tool without asking.")
    tool_selection: ToolSelection = ToolSelection.AUTO
    max_history_size: int | None = Field(default=None, ge=0)
    response_schema: dict[str, Any] | None = None
    double_text_policy: DoubleTextPolicy = DoubleTextPolicy.ENQUEUE
    limits: TurnLimits = Field(default_factory=TurnLimits)
    approval_timeout_s: int | None = Field(default=None, gt=0)
    compaction_token_budget: int | None = Field(
        default=None, ge=0, description="Compact past this many context tokens; None uses settings."
    )
    batch_id: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)

    @field_validator("provider", "model")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ConversationConfig:
        """Defaults from settings, then the caller's choices."""
        base: dict[str, Any] = {
            "provider": settings.provider,
            "model": settings.model,
            "double_text_policy": settings.double_text_policy,
            "max_history_size": settings.max_history_size,
            "limits": TurnLimits(
                max_model_calls=settings.max_model_calls,
                max_tool_calls=settings.max_tool_calls,
                timeout_s=settings.turn_timeout_s,
            ),
        }
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(base)

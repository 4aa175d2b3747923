"""A conversation's configuration: fixed at creation, stored with the conversation."""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.settings import DoubleTextPolicy, Settings

__all__ = [
    "LABEL_PATTERN",
    "MAX_APPROVAL_TIMEOUT_S",
    "MAX_HISTORY_SIZE",
    "MAX_LABELS",
    "MAX_MODEL_CALLS",
    "MAX_TOOL_CALLS",
    "MAX_TURN_TIMEOUT_S",
    "ConversationConfig",
    "PromptOptions",
    "ToolPolicy",
    "ToolSelection",
    "TurnLimits",
]


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


# Bounds of the numbers a conversation is configured with: finite, and within reason.
MAX_MODEL_CALLS = 1_000
MAX_TOOL_CALLS = 10_000
MAX_TURN_TIMEOUT_S = 7 * 86_400.0
MAX_APPROVAL_TIMEOUT_S = 365 * 86_400
MAX_HISTORY_SIZE = 10_000_000
MAX_LABELS = 16
LABEL_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"


class TurnLimits(BaseModel):
    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    max_model_calls: int = Field(16, gt=0, le=MAX_MODEL_CALLS)
    max_tool_calls: int = Field(32, ge=0, le=MAX_TOOL_CALLS)
    timeout_s: float = Field(600.0, gt=0, le=MAX_TURN_TIMEOUT_S)


class ConversationConfig(BaseModel):
    """How a conversation runs; every field has a default that works offline."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    provider: str = "scripted"
    model: str = "signoff-demo"
    system_prompt: str = ""
    tools: dict[str, ToolPolicy] | None = Field(
        default=None,
        description="Enabled tools and their policy; None enables every registered tool.",
    )
    allow_all: bool = Field(
        default=False,
        description="Run every tool without asking (honoured only with policy_may_loosen).",
    )
    policy_may_loosen: bool = Field(
        default=False,
        description="Set by the server when an operator (or a direct Python client) created the "
        "conversation: its `tools` and `allow_all` may loosen the operator's tool policy; "
        "otherwise they only tighten it.",
    )
    labels: list[str] = Field(
        default_factory=list,
        max_length=MAX_LABELS,
        description="Operator-set labels; tool policy rules can be scoped by label.",
    )
    tool_selection: ToolSelection = ToolSelection.AUTO
    max_history_size: int | None = Field(default=None, ge=0, le=MAX_HISTORY_SIZE)
    response_schema: dict[str, Any] | None = None
    double_text_policy: DoubleTextPolicy = DoubleTextPolicy.ENQUEUE
    limits: TurnLimits = Field(default_factory=TurnLimits)
    approval_timeout_s: int | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_S)
    compaction_token_budget: int | None = Field(
        default=None,
        ge=0,
        le=10**9,
        description="Compact past this many context tokens; None uses settings.",
    )
    batch_id: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not re.match(LABEL_PATTERN, label):
                raise ValueError(f"label {label!r} must be 1-64 letters, digits, _ . : -")
        return sorted(set(value))

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


class PromptOptions(BaseModel):
    """One prompt's overrides of its conversation's defaults, for that turn only.

    The seed's prompt request carries these (`with_tool_selection`, `with_timeout`).
    None keeps the conversation's value. Tool policy is not here: a prompt never
    changes what needs a sign-off.
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False, extra="forbid")

    tool_selection: ToolSelection | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TURN_TIMEOUT_S)
    response_schema: dict[str, Any] | None = None

    def is_empty(self) -> bool:
        return self == PromptOptions()

    def apply(self, config: ConversationConfig) -> ConversationConfig:
        """The configuration this prompt's turn runs with."""
        update: dict[str, Any] = {}
        if self.tool_selection is not None:
            update["tool_selection"] = self.tool_selection
        if self.timeout_s is not None:
            update["limits"] = config.limits.model_copy(update={"timeout_s": self.timeout_s})
        if self.response_schema is not None:
            update["response_schema"] = self.response_schema
        return config.model_copy(update=update) if update else config

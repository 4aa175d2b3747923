"""A conversation's configuration: fixed at creation, stored with the conversation."""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.models.model_settings import INTEGRAL, SUPPORTED, ModelSettings, check_supported
from shared.models.patterns import NOT_SPACE, SPACE
from shared.schema import check_schema
from shared.schema.limits import (
    MAX_PATTERN_CHARS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_EXPANSION,
    MAX_SCHEMA_PATTERNS,
)
from shared.settings import DoubleTextPolicy, Settings

__all__ = [
    "AGENT_NAME_PATTERN",
    "INTEGRAL",
    "LABEL_PATTERN",
    "MAX_APPROVAL_TIMEOUT_S",
    "MAX_HISTORY_SIZE",
    "MAX_LABELS",
    "MAX_MODEL_CALLS",
    "MAX_TOOL_CALLS",
    "MAX_TURN_TIMEOUT_S",
    "MCP_SELECTION_PATTERN",
    "RESPONSE_SCHEMA",
    "TOOL_NAME_PATTERN",
    "AgentOptions",
    "ConversationConfig",
    "ConversationOptions",
    "PromptOptions",
    "ToolPolicy",
    "ToolSelection",
    "TurnLimits",
    "default_model_settings",
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
AGENT_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# An MCP server an agent or conversation may use, or one tool of it (`notes/list_notes`): a
# tool's name has no whitespace (as `str.isspace` says: ECMA-262 and Rust read `\s` otherwise).
MCP_SELECTION_PATTERN = rf"^[A-Za-z0-9-]{{1,32}}(/[^/{SPACE}]{{1,128}})?$"
MAX_MCP_SELECTIONS = 64
MCP_SELECTION = (
    "MCP servers (or `server/tool` names) whose tools the model is offered, as "
    "`server__tool`; each call still goes through the operator's tool policy."
)


_HistorySize = Annotated[int, Field(ge=0, le=MAX_HISTORY_SIZE), INTEGRAL]
_ModelCalls = Annotated[int, Field(gt=0, le=MAX_MODEL_CALLS), INTEGRAL]
_ToolCalls = Annotated[int, Field(ge=0, le=MAX_TOOL_CALLS), INTEGRAL]
_TokenBudget = Annotated[int, Field(ge=0, le=10**9), INTEGRAL]
_ContextTokens = Annotated[int, Field(gt=0, le=10**9), INTEGRAL]
_CONTEXT_DOC = (
    "The model's context window in tokens, over SIGNOFF_CONTEXT_SIZES and SIGNOFF_CONTEXT_TOKENS: "
    "prompts are compacted before they reach its threshold, and a turn whose context cannot fit "
    "even so fails with context_overflow."
)
_ApprovalTimeout = Annotated[int, Field(gt=0, le=MAX_APPROVAL_TIMEOUT_S), INTEGRAL]

# What `shared.schema.check_schema` refuses, which no JSON Schema can say of a schema.
RESPONSE_SCHEMA = (
    "A JSON Schema (draft 2020-12) the answer must satisfy. Refused unless it is one, and "
    f"within these bounds: at most {MAX_SCHEMA_BYTES:,} bytes as compact JSON, "
    f"{MAX_SCHEMA_DEPTH} levels of objects and arrays, {MAX_SCHEMA_PATTERNS} patterns "
    f"(`pattern`, `patternProperties`) of at most {MAX_PATTERN_CHARS:,} characters each in "
    "re2 syntax (no backreferences, no lookaround), `$ref` to places inside it only, "
    "`$schema` (2020-12's) and `$id` at its top only, no `$dynamicRef` or `$dynamicAnchor`, "
    f"at most {MAX_SCHEMA_EXPANSION:,} objects and arrays once each `$ref` is replaced."
)


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
    mcp: list[str] = Field(default_factory=list, description=MCP_SELECTION)
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
    model_settings: ModelSettings = Field(
        default_factory=ModelSettings,
        description="Each model call's settings: the creator's over the defaults of settings.",
    )
    context_tokens: int | None = Field(default=None, gt=0, description=_CONTEXT_DOC)
    batch_id: str | None = None
    submitted_by: str | None = Field(
        None,
        description="Who submitted its batch (a user or token): the owner its calls count "
        "against for daily budgets, since the batch owns the conversation.",
    )
    metadata: dict[str, str] = Field(default_factory=dict)
    agent: str | None = Field(None, description="The named agent it runs as, if any.")
    agent_version: int | None = Field(None, description="The version of that agent.")

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
        chosen = ModelSettings.model_validate(base.get("model_settings") or {})
        base["model_settings"] = chosen.over(default_model_settings(settings, base["provider"]))
        return cls.model_validate(base)


def default_model_settings(settings: Settings, provider: str) -> ModelSettings:
    """The defaults of settings that `provider` honours (a default is never refused)."""
    defaults = ModelSettings(
        max_output_tokens=settings.max_output_tokens or None,
        temperature=None if settings.temperature < 0 else settings.temperature,
    )
    return defaults.only(SUPPORTED.get(provider, frozenset(ModelSettings.model_fields)))


class PromptOptions(BaseModel):
    """One prompt's overrides of its conversation's defaults, for that turn only.

    The seed's prompt request carries these (`with_tool_selection`, `with_timeout`).
    None keeps the conversation's value. Tool policy is not here: a prompt never
    changes what needs a sign-off.
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False, extra="forbid")

    tool_selection: ToolSelection | None = Field(
        None, description="This turn only: whether the model may, must or must not call tools."
    )
    timeout_s: float | None = Field(
        None, gt=0, le=MAX_TURN_TIMEOUT_S, description="This turn only: its time limit."
    )
    response_schema: dict[str, Any] | None = Field(
        None, description=f"This turn only. {RESPONSE_SCHEMA}"
    )
    model_settings: ModelSettings | None = Field(
        None, description="This turn only: model settings over the conversation's."
    )

    def is_empty(self) -> bool:
        return self == PromptOptions()

    def check_for(self, config: ConversationConfig) -> None:
        """Refuses model settings that the conversation's provider cannot honour."""
        if self.model_settings is not None:
            check_supported(config.provider, self.model_settings)

    def apply(self, config: ConversationConfig) -> ConversationConfig:
        """The configuration this prompt's turn runs with."""
        update: dict[str, Any] = {}
        if self.tool_selection is not None:
            update["tool_selection"] = self.tool_selection
        if self.timeout_s is not None:
            update["limits"] = config.limits.model_copy(update={"timeout_s": self.timeout_s})
        if self.response_schema is not None:
            update["response_schema"] = self.response_schema
        if self.model_settings is not None:
            update["model_settings"] = self.model_settings.over(config.model_settings)
        return config.model_copy(update=update) if update else config


class AgentOptions(BaseModel):
    """What a named agent fixes of the conversations it runs (`shared.models.agents`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    provider: str | None = Field(
        None, min_length=1, max_length=100, json_schema_extra={"pattern": NOT_SPACE}
    )
    model: str | None = Field(
        None, min_length=1, max_length=200, json_schema_extra={"pattern": NOT_SPACE}
    )
    system_prompt: str = Field("", max_length=200_000)
    tools: dict[Annotated[str, Field(pattern=TOOL_NAME_PATTERN)], ToolPolicy] | None = Field(
        None, max_length=256
    )
    labels: list[Annotated[str, Field(pattern=LABEL_PATTERN)]] | None = Field(
        None, max_length=MAX_LABELS, description="Operator only: tool policy rules match labels."
    )
    mcp: list[Annotated[str, Field(pattern=MCP_SELECTION_PATTERN)]] | None = Field(
        None, max_length=MAX_MCP_SELECTIONS, description=MCP_SELECTION
    )
    tool_selection: ToolSelection = ToolSelection.AUTO
    response_schema: dict[str, Any] | None = Field(None, description=RESPONSE_SCHEMA)
    max_model_calls: _ModelCalls | None = None
    max_tool_calls: _ToolCalls | None = None
    timeout_s: float | None = Field(None, gt=0, le=MAX_TURN_TIMEOUT_S)
    metadata: (
        dict[Annotated[str, Field(max_length=100)], Annotated[str, Field(max_length=2000)]] | None
    ) = Field(None, max_length=64)
    approval_timeout_s: _ApprovalTimeout | None = None
    model_settings: ModelSettings | None = Field(
        None, description="Each model call's settings, over the defaults of settings."
    )
    context_tokens: _ContextTokens | None = Field(None, description=_CONTEXT_DOC)


class ConversationOptions(AgentOptions):
    """How a new conversation runs, as its creator asks; an omitted option defaults from settings.

    The one list of options: `Client.new_conversation`, the API's request body, a batch's
    configuration and the CLI all read it, and `resolve` turns it into the stored config.
    Unless the creator may loosen the operator's tool policy, `tools` only tightens it,
    and the web refuses `allow_all` and `labels` below the operator role. With `agent`,
    the named agent's options replace these (`shared.store.agents.resolve_options`).
    """

    allow_all: bool = False
    max_history_size: _HistorySize | None = None
    double_text_policy: DoubleTextPolicy | None = None
    compaction_token_budget: _TokenBudget | None = None
    agent: str | None = Field(
        None,
        pattern=AGENT_NAME_PATTERN,
        description="Run as this named agent: its options are used, and the conversation "
        "records its name and version.",
    )
    agent_version: Annotated[int, Field(gt=0), INTEGRAL] | None = Field(
        None, description="With `agent`: this version of it (default: its latest)."
    )

    def resolve(self, settings: Settings, *, policy_may_loosen: bool) -> ConversationConfig:
        """The stored configuration: these choices over the defaults of `settings`."""
        if self.response_schema is not None:
            check_schema(self.response_schema)
        limits = TurnLimits(
            max_model_calls=self.max_model_calls or settings.max_model_calls,
            max_tool_calls=settings.max_tool_calls
            if self.max_tool_calls is None
            else self.max_tool_calls,
            timeout_s=self.timeout_s or settings.turn_timeout_s,
        )
        limit_fields = {"max_model_calls", "max_tool_calls", "timeout_s"}
        chosen = self.model_dump(
            exclude_none=True, include=set(ConversationOptions.model_fields) - limit_fields
        )
        config = ConversationConfig.from_settings(
            settings, **chosen, limits=limits, policy_may_loosen=policy_may_loosen
        )
        check_supported(config.provider, config.model_settings)
        return config

"""The step model of a conversation: every event of a trajectory is a `Step`.

Names and semantics follow the seed's Step model. Enum values unknown to this
version parse as ``UNKNOWN`` so that a newer writer never breaks an older reader.
"""

from __future__ import annotations

import time
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from shared.models.value_enum import ValueEnum

__all__ = [
    "Step",
    "StepSource",
    "StepStatus",
    "StepTarget",
    "StepType",
    "ToolCall",
    "UsageMetadata",
]


class _TolerantEnum(ValueEnum):
    """A string enum whose unknown values become ``UNKNOWN`` instead of an error."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        return cls["UNKNOWN"]


class StepType(_TolerantEnum):
    TEXT_RESPONSE = "text_response"
    TOOL_CALL = "tool_call"
    SYSTEM_MESSAGE = "system_message"
    COMPACTION = "compaction"
    FINISH = "finish"
    # Extensions (the seed has no value for these): the user's prompt and a tool's result.
    USER_INPUT = "user_input"
    TOOL_RESULT = "tool_result"
    UNKNOWN = "unknown"


class StepSource(_TolerantEnum):
    SYSTEM = "system"
    USER = "user"
    MODEL = "model"
    UNKNOWN = "unknown"


class StepTarget(_TolerantEnum):
    USER = "user"
    ENVIRONMENT = "environment"
    UNSPECIFIED = "unspecified"
    UNKNOWN = "unknown"


class StepStatus(_TolerantEnum):
    ACTIVE = "active"
    DONE = "done"
    WAITING_FOR_USER = "waiting_for_user"
    ERROR = "error"
    CANCELED = "canceled"
    TERMINAL_ERROR = "terminal_error"
    UNKNOWN = "unknown"


class UsageMetadata(BaseModel):
    """Token counters and what they cost; two of them add up field by field."""

    model_config = ConfigDict(frozen=True)

    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0
    cost_micros: int = Field(
        0, description="What the priced calls cost, in millionths of the price's currency."
    )
    unpriced_calls: int = Field(0, description="Model calls whose model had no price.")
    estimated_calls: int = Field(
        0, description="Model calls whose server reported no usage: Signoff estimated it."
    )

    def __add__(self, other: UsageMetadata) -> UsageMetadata:
        return UsageMetadata(
            **{name: getattr(self, name) + getattr(other, name) for name in USAGE_FIELDS}
        )

    @classmethod
    def from_counts(
        cls, prompt: int, candidates: int, *, cached: int = 0, thoughts: int = 0
    ) -> Self:
        """Builds usage from prompt and output counts; the total is their sum."""
        return cls(
            prompt_token_count=prompt,
            candidates_token_count=candidates,
            total_token_count=prompt + candidates,
            cached_content_token_count=cached,
            thoughts_token_count=thoughts,
        )

    def is_zero(self) -> bool:
        return all(getattr(self, name) == 0 for name in USAGE_FIELDS)


USAGE_FIELDS: tuple[str, ...] = (
    "prompt_token_count",
    "candidates_token_count",
    "total_token_count",
    "cached_content_token_count",
    "thoughts_token_count",
    "cost_micros",
    "unpriced_calls",
    "estimated_calls",
)


class ToolCall(BaseModel):
    """A complete tool call requested by the model."""

    id: str = ""
    name: str
    args: Any = Field(default_factory=dict)
    canonical_path: str | None = None


class Step(BaseModel):
    """One event of a trajectory: a prompt, a model response, a tool call, a finish."""

    id: str = ""
    step_index: int = 0
    type: StepType = StepType.UNKNOWN
    source: StepSource = StepSource.UNKNOWN
    target: StepTarget = StepTarget.UNSPECIFIED
    status: StepStatus = StepStatus.DONE
    content: str = ""
    content_delta: str = ""
    thinking: str = ""
    thinking_delta: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    error: str = ""
    is_complete_response: bool | None = None
    structured_output: Any = None
    usage_metadata: UsageMetadata | None = None
    cascade_id: str = ""
    trajectory_id: str = ""
    http_code: int = 0
    command: str = ""
    """On a user input: the slash command it was (never sent to the model); empty for a prompt."""
    at: float | None = None
    """When the step was recorded (Unix seconds): the conversation's timeline. An extension;
    None on a delta and on steps recorded before it was kept."""

    # Constructors, one per kind of step: each states its type, source and target once.

    @classmethod
    def user_input(cls, text: str, *, turn_id: str, index: int, command: str = "") -> Self:
        """The user's prompt (or slash command) that starts a turn."""
        return cls(
            at=time.time(),
            id=f"{turn_id}-input",
            step_index=index,
            type=StepType.USER_INPUT,
            source=StepSource.USER,
            target=StepTarget.UNSPECIFIED,
            content=text,
            command=command,
        )

    @classmethod
    def model_response(
        cls,
        *,
        turn_id: str,
        index: int,
        status: StepStatus,
        content: str = "",
        thinking: str = "",
        tool_calls: list[ToolCall] | None = None,
        usage: UsageMetadata | None = None,
    ) -> Self:
        """A finished model call: a tool call when it asks for tools, else a text response."""
        calls = tool_calls or []
        return cls(
            at=time.time(),
            id=f"{turn_id}-model-{index}",
            step_index=index,
            type=StepType.TOOL_CALL if calls else StepType.TEXT_RESPONSE,
            source=StepSource.MODEL,
            target=StepTarget.USER,
            status=status,
            content=content,
            thinking=thinking,
            tool_calls=calls,
            is_complete_response=not calls and status is StepStatus.DONE,
            usage_metadata=usage,
        )

    @classmethod
    def model_delta(cls, *, index: int, content_delta: str = "", thinking_delta: str = "") -> Self:
        """Text the model is still producing: a partial step, streamed and never stored."""
        return cls(
            step_index=index,
            type=StepType.TEXT_RESPONSE,
            source=StepSource.MODEL,
            target=StepTarget.USER,
            status=StepStatus.ACTIVE,
            thinking_delta=thinking_delta,
            content_delta=content_delta,
        )

    @classmethod
    def tool_result(
        cls,
        call: ToolCall,
        content: str,
        *,
        turn_id: str,
        index: int,
        status: StepStatus,
        error: str = "",
    ) -> Self:
        """What a tool returned (or why it did not run), for the model."""
        return cls(
            at=time.time(),
            id=f"{call.id or turn_id}-result",
            step_index=index,
            type=StepType.TOOL_RESULT,
            source=StepSource.SYSTEM,
            target=StepTarget.ENVIRONMENT,
            status=status,
            content=content,
            tool_calls=[call],
            error=error,
        )

    @classmethod
    def to_model(cls, content: str, *, id: str = "") -> Self:
        """A system instruction to the model (a repair request, say)."""
        return cls.system_message(content, target=StepTarget.ENVIRONMENT, id=id)

    @classmethod
    def to_user(cls, content: str, *, id: str = "") -> Self:
        """A system message for the user; it never reaches the model."""
        return cls.system_message(content, target=StepTarget.USER, id=id)

    @classmethod
    def system_message(cls, content: str, *, target: StepTarget, id: str = "") -> Self:
        return cls(
            at=time.time(),
            id=id,
            type=StepType.SYSTEM_MESSAGE,
            source=StepSource.SYSTEM,
            target=target,
            content=content,
        )

    @classmethod
    def error_message(
        cls,
        message: str,
        *,
        turn_id: str,
        index: int,
        http_code: int = 0,
        status: StepStatus = StepStatus.ERROR,
    ) -> Self:
        """A system message telling the user what went wrong; it never reaches the model."""
        return cls(
            at=time.time(),
            id=f"{turn_id}-error",
            step_index=index,
            type=StepType.SYSTEM_MESSAGE,
            source=StepSource.SYSTEM,
            target=StepTarget.USER,
            status=status,
            error=message,
            content=message,
            http_code=http_code,
        )

    @classmethod
    def compaction(
        cls, summary: str, *, turn_id: str, index: int, usage: UsageMetadata | None = None
    ) -> Self:
        """A summary that stands in for every step before it in the model's context."""
        return cls(
            at=time.time(),
            id=f"{turn_id}-compaction-{index}",
            step_index=index,
            type=StepType.COMPACTION,
            source=StepSource.SYSTEM,
            target=StepTarget.UNSPECIFIED,
            content=summary,
            usage_metadata=usage,
        )

    @classmethod
    def finish(
        cls, *, turn_id: str, index: int, structured_output: Any, usage: UsageMetadata | None
    ) -> Self:
        """The last step of a completed turn: its usage and structured output."""
        return cls(
            at=time.time(),
            id=f"{turn_id}-finish",
            step_index=index,
            type=StepType.FINISH,
            source=StepSource.SYSTEM,
            target=StepTarget.USER,
            structured_output=structured_output,
            usage_metadata=usage,
        )

"""The step model of a conversation: every event of a trajectory is a `Step`.

Names and semantics follow the seed's Step model. Enum values unknown to this
version parse as ``UNKNOWN`` so that a newer writer never breaks an older reader.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Step",
    "StepSource",
    "StepStatus",
    "StepTarget",
    "StepType",
    "ToolCall",
    "UsageMetadata",
]


class _TolerantEnum(str, Enum):
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
    """Token counters; two of them add up field by field."""

    model_config = ConfigDict(frozen=True)

    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0

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

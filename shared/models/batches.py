"""A batch's states and the configuration its items share."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.models.config import TOOL_NAME_PATTERN, ConversationConfig
from shared.models.model_settings import ModelSettings
from shared.models.patterns import NOT_SPACE

__all__ = [
    "MAX_ERROR_FILTER",
    "BatchConfig",
    "BatchState",
    "BatchStatus",
    "CompareOutcome",
    "CompareShow",
    "ExportFormat",
    "RerunChanges",
    "RetryFilter",
    "RetryStatus",
]

MAX_ERROR_FILTER = 500
MAX_RETRY_ITEMS = 1_000  # items a retry may name one by one (a selection on the page)


class BatchState(str, Enum):
    """Where one item of a batch stands."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INVALID = "invalid"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {BatchState.DONE, BatchState.FAILED, BatchState.CANCELLED, BatchState.INVALID}
)


class BatchStatus(str, Enum):
    SUBMITTING = "submitting"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"


class ExportFormat(str, Enum):
    """How a batch's results leave: JSON lines as stored, or CSV rows with fields flattened."""

    JSONL = "jsonl"
    CSV = "csv"


class BatchConfig(BaseModel):
    """What every prompt of the batch shares."""

    conversation: ConversationConfig = Field(default_factory=ConversationConfig)
    max_concurrency: int = Field(16, gt=0, le=10_000)


class RetryStatus(str, Enum):
    """Why an ended item may be tried again: it failed, was cancelled, or ended (`done`) with
    a tool call a person denied, or whose approval expired unanswered."""

    FAILED = "failed"
    DENIED = "denied"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class RetryFilter(BaseModel):
    """Which ended items a retry takes: those of any of `statuses`, whose error (or a denied
    call's reason) holds `error`, ignoring case, whose turn called `tool`, and (when `items`
    names some) only those items."""

    model_config = ConfigDict(frozen=True)

    statuses: frozenset[RetryStatus] = frozenset(RetryStatus)
    error: str | None = Field(None, min_length=1, max_length=MAX_ERROR_FILTER)
    tool: str | None = Field(None, pattern=TOOL_NAME_PATTERN)
    items: frozenset[str] | None = Field(None, min_length=1, max_length=MAX_RETRY_ITEMS)


class RerunChanges(BaseModel):
    """What a re-run changes of its source batch's configuration (nothing: the same again).

    An agent (or a version of the source's agent) replaces the configuration with the agent's,
    which decides its provider and model; else `provider` and `model` replace the source's.
    `model_settings` go over either.
    """

    model_config = ConfigDict(frozen=True)

    agent: str | None = None
    agent_version: int | None = Field(None, gt=0)
    provider: str | None = Field(
        None, min_length=1, max_length=100, json_schema_extra={"pattern": NOT_SPACE}
    )
    model: str | None = Field(
        None, min_length=1, max_length=200, json_schema_extra={"pattern": NOT_SPACE}
    )
    model_settings: ModelSettings | None = None
    max_concurrency: int | None = Field(None, gt=0, le=10_000)

    @field_validator("provider", "model")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value


class CompareOutcome(str, Enum):
    """How one item fared in two runs of the same inputs. Succeeded: ended `done` with no
    tool call denied; the answers agree when their structured outputs (or, without them,
    their texts, spaces aside) are equal."""

    AGREE = "agree"
    DIFFER = "differ"
    ONLY_FIRST = "only_first"
    ONLY_SECOND = "only_second"
    NEITHER = "neither"


class CompareShow(str, Enum):
    """Which items of a comparison to list: those of one outcome, or `changed` (all that are
    not `agree` or `neither`: the answers differ, or only one run succeeded)."""

    CHANGED = "changed"
    AGREE = "agree"
    DIFFER = "differ"
    ONLY_FIRST = "only_first"
    ONLY_SECOND = "only_second"
    NEITHER = "neither"

    def takes(self, outcome: CompareOutcome) -> bool:
        if self is CompareShow.CHANGED:
            return outcome in _CHANGED
        return self.value == outcome.value


_CHANGED = frozenset({CompareOutcome.DIFFER, CompareOutcome.ONLY_FIRST, CompareOutcome.ONLY_SECOND})

"""The JSON API's request and response bodies; the OpenAPI schemas are generated from them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from shared.models.config import (
    INTEGRAL,
    ConversationConfig,
    ConversationOptions,
    PromptOptions,
    ToolPolicy,
)
from shared.models.content import Content
from shared.models.events import ChatResponse, ConversationStatus, TurnStatus
from shared.models.notifications import Allow, Deny, NotificationStatus, ResolutionKind
from shared.models.patterns import NOT_SPACE
from shared.models.steps import Step, UsageMetadata
from shared.store.batches import BatchConfig, BatchInfo, BatchState, BatchStatus
from shared.store.conversations import ConversationRecord
from shared.store.keys import ID_PATTERN
from webui.bulk import BULK_LIMIT

__all__ = [
    "INTEGRAL",
    "MAX_BATCH_ITEMS",
    "AuditEntry",
    "AuditList",
    "BatchCancelled",
    "BatchConfigBody",
    "BatchDetail",
    "BatchList",
    "BatchResult",
    "BatchSubmitted",
    "BatchSummary",
    "BulkAllow",
    "BulkFilter",
    "BulkResolveBody",
    "BulkResolveResult",
    "ConversationDetail",
    "ConversationList",
    "ConversationOptionsBody",
    "ConversationSummary",
    "DenyBody",
    "ErrorBody",
    "ErrorResponse",
    "HistoryResponse",
    "Integer",
    "InvalidItem",
    "NewBatch",
    "NewConversation",
    "PromptAccepted",
    "RequestBody",
    "TurnView",
    "Usage",
    "UsageDayView",
    "UsageResponse",
    "conversation_detail",
]


Integer = Annotated[int, INTEGRAL]  # 5 or 5.0, never true or "5"


class RequestBody(BaseModel):
    """A request body read as its schema says: no unknown fields, no true for 1, no "5" for 5."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ConversationOptionsBody(ConversationOptions):
    """`shared.models.config.ConversationOptions` as a request body (strict, no unknown fields).

    Below the operator role, `tools` may only tighten the operator's tool policy, and
    `allow_all` and `labels` are refused (403 naming the field).
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class NewConversation(ConversationOptionsBody):
    """The options of `Client.new_conversation`, and optionally the conversation's id."""

    conversation_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="Below the operator role, it must start with the caller's name and a dot.",
    )


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
    title: str = Field("", description="The first line of its first prompt.")
    last_turn_status: TurnStatus | None = Field(
        None, description="How its last ended turn ended; null before any ended."
    )

    @classmethod
    def of(cls, record: ConversationRecord) -> ConversationSummary:
        return cls(**_summary_fields(record))


class ConversationDetail(ConversationSummary):
    config: ConversationConfig
    usage: Usage
    turn_count: int
    tool_policy: dict[str, ToolPolicy | None] = Field(
        default_factory=dict,
        description="What a call of each known tool does now (auto, ask, deny; null: disabled), "
        "from the operator's rules and the conversation's own tightening.",
    )


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
        "title": record.title,
        "last_turn_status": record.last_turn_status,
    }


def conversation_detail(
    record: ConversationRecord,
    usage: Usage,
    turn_count: int,
    tool_policy: dict[str, ToolPolicy | None] | None = None,
) -> ConversationDetail:
    return ConversationDetail(
        **_summary_fields(record),
        config=record.config,
        usage=usage,
        turn_count=turn_count,
        tool_policy=tool_policy or {},
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
    options: PromptOptions = Field(
        default_factory=PromptOptions, description="The prompt's own options, for this turn."
    )
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    response: ChatResponse | None = Field(None, description="Set once the turn completed.")
    error: str | None = Field(None, description="Why a failed or cancelled turn ended.")


class UsageDayView(BaseModel):
    day: str
    models: dict[str, UsageMetadata]


class UsageResponse(BaseModel):
    start: str = Field(description="As asked, or the default.")
    end: str = Field(description="As asked, or the default.")
    days: list[UsageDayView] = Field(description="Each day read, in order (see the operation).")
    totals: dict[str, UsageMetadata] = Field(description="Over `days`, by model.")


# Batches

MAX_BATCH_ITEMS = 10_000


class BatchConfigBody(RequestBody):
    """What every prompt of a batch shares: conversation options and a concurrency cap."""

    conversation: ConversationOptionsBody = Field(default_factory=ConversationOptionsBody)
    max_concurrency: Integer = Field(16, gt=0, le=10_000)


class NewBatch(RequestBody):
    """A batch: one configuration, many prompts, each run as its own conversation."""

    batch_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="Below the operator role, a new id must start with the caller's name and a "
        "dot, and only the batch's creator may add to it. Reuse an id to add items to a batch "
        "(its configuration stays as it was): "
        "items whose id it already has are skipped, so a retried request submits nothing twice.",
    )
    config: BatchConfigBody = Field(default_factory=BatchConfigBody)
    items: list[Any] = Field(
        min_length=1,
        max_length=MAX_BATCH_ITEMS,
        description='Each {"id"?: string, "prompt": string or Content, "tool_selection"?, '
        '"timeout_s"?, "response_schema"?} (the last three: that item\'s prompt options, over '
        "the batch's); a malformed item is reported with its index and the others run.",
    )


class InvalidItem(BaseModel):
    index: int = Field(description="Position in `items`, from 0.")
    id: str
    error: str


class BatchSummary(BaseModel):
    id: str
    status: BatchStatus
    total: int
    finished: int = Field(description="Items done, failed, cancelled or invalid.")
    counts: dict[BatchState, int]
    denied: int = Field(0, description="Ended items with a tool call an operator denied.")
    usage: UsageMetadata
    max_concurrency: int
    provider: str
    model: str
    created_at: float
    pending_approvals: int = Field(description="Notifications of this batch waiting for a person.")

    @classmethod
    def of(cls, info: BatchInfo, pending_approvals: int) -> BatchSummary:
        return cls(**_batch_fields(info, pending_approvals))


class BatchDetail(BatchSummary):
    config: BatchConfig

    @classmethod
    def of(cls, info: BatchInfo, pending_approvals: int) -> BatchDetail:
        return cls(**_batch_fields(info, pending_approvals), config=info.config)


def _batch_fields(info: BatchInfo, pending_approvals: int) -> dict[str, Any]:
    return {
        "id": info.batch_id,
        "status": info.status,
        "total": info.total,
        "finished": info.finished,
        "counts": info.counts,
        "denied": info.denied,
        "usage": info.usage,
        "max_concurrency": info.config.max_concurrency,
        "provider": info.config.conversation.provider,
        "model": info.config.conversation.model,
        "created_at": info.created_at,
        "pending_approvals": pending_approvals,
    }


class BatchList(BaseModel):
    items: list[BatchSummary]
    offset: int
    limit: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class BatchSubmitted(BaseModel):
    batch: BatchDetail
    submitted: int
    skipped: int = Field(description="Items whose id the batch already had (a resubmission).")
    invalid: list[InvalidItem]


class BatchCancelled(BaseModel):
    batch: BatchDetail
    stopped: int = Field(description="Conversations cancelled or aborted.")


class BatchResult(BaseModel):
    """One line of the results: one per item, in input order, finished or not."""

    id: str
    line: int = Field(description="The item's index in `items` (API) or its line number (CLI).")
    status: BatchState
    text: str | None
    structured_output: Any = None
    usage: UsageMetadata | None
    error: str | None
    denied: int = Field(0, description="Tool calls an operator denied in the item's turn.")


# Bulk approvals


class BulkFilter(RequestBody):
    """Which pending notifications: each facet optional; all set facets must match."""

    tool: str | None = None
    batch_id: str | None = None
    conversation_id: str | None = None
    min_age_s: float | None = Field(None, ge=0, description="Waiting at least this long.")
    created_before: float | None = Field(
        None,
        description="Created at or before this time (epoch seconds): pins the set a count was "
        "taken of; a 409 answer carries the value it used.",
    )


class DenyBody(Deny):
    """Deny, with a reason that is not only whitespace."""

    reason: str = Field(json_schema_extra={"pattern": NOT_SPACE})


class BulkAllow(Allow):
    """Allow every call: their arguments as they are (edit them one call at a time)."""

    arguments: None = None


class BulkResolveBody(RequestBody):
    filter: BulkFilter = Field(default_factory=BulkFilter)
    resolution: Annotated[BulkAllow | DenyBody, Field(discriminator="kind")]
    expected_count: Integer = Field(
        ge=0,
        le=BULK_LIMIT,
        description="How many the caller expects to resolve (e.g. `pending_count` of "
        "GET /notifications with the same filter); a different count now answers 409. "
        f"One action resolves at most {BULK_LIMIT:,}.",
    )

    def decision(self) -> Allow | Deny:
        """The resolution as the stores take it."""
        chosen = self.resolution
        if isinstance(chosen, DenyBody):
            return Deny(reason=chosen.reason)
        return Allow(sticky=chosen.sticky)


class BulkResolveResult(BaseModel):
    matched: int
    resolved: int
    conflicts: int = Field(description="Resolved by someone else (or expired) in between.")
    not_applicable: int = Field(description="This resolution is not allowed for them.")
    left_pending: int = Field(description="Counted but moved while the list was read.")
    created_before: float


# Audit


class AuditEntry(BaseModel):
    """One resolution: who, when, what, and the arguments before and after."""

    id: str
    notification_id: str
    conversation_id: str
    batch_id: str | None = Field(None, description="The batch of the request, if any.")
    status: NotificationStatus
    actor: str
    at: float
    kind: ResolutionKind | None = Field(description="Null when the turn was aborted.")
    tool: str | None
    arguments_before: Any = None
    arguments_after: Any = None
    reason: str | None


class AuditList(BaseModel):
    items: list[AuditEntry]
    next_before: str | None = Field(
        description="Pass as `before` for the next (older) page; null on the last."
    )

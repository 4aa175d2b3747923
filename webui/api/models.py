"""The JSON API's request and response bodies; the OpenAPI schemas are generated from them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict
from pydantic_core import to_jsonable_python

from shared.batches.template import MAX_TEMPLATE_CHARS
from shared.models.batches import (
    MAX_ERROR_FILTER,
    MAX_RETRY_ITEMS,
    BatchConfig,
    BatchState,
    BatchStatus,
    CompareOutcome,
    RerunChanges,
    RetryFilter,
    RetryStatus,
)
from shared.models.config import (
    INTEGRAL,
    TOOL_NAME_PATTERN,
    ConversationConfig,
    ConversationOptions,
    PromptOptions,
    ToolPolicy,
)
from shared.models.content import Content
from shared.models.events import ChatResponse, ConversationStatus, TurnStatus
from shared.models.model_settings import ModelSettings
from shared.models.notifications import (
    Allow,
    ClaimAction,
    Deny,
    NotificationStatus,
    ResolutionKind,
)
from shared.models.patterns import NOT_SPACE
from shared.models.steps import Step, UsageMetadata
from shared.store.agents import agent_decides
from shared.store.batches import ITEM_FIELDS, BatchInfo
from shared.store.conversations import ConversationRecord
from shared.store.keys import ID_PATTERN
from webui.approvals.bulk import BULK_LIMIT
from webui.approvals.inbox import MAX_AGE_S

__all__ = [
    "INTEGRAL",
    "MAX_BATCH_ITEMS",
    "AuditEntry",
    "AuditList",
    "BatchCancelled",
    "BatchComparisonSummary",
    "BatchConfigBody",
    "BatchDetail",
    "BatchList",
    "BatchRerunStarted",
    "BatchResult",
    "BatchRetried",
    "BatchSubmitted",
    "BatchSummary",
    "BulkAllow",
    "BulkFilter",
    "BulkResolveBody",
    "BulkResolveResult",
    "ComparedBatch",
    "ComparedSide",
    "ConversationDetail",
    "ConversationList",
    "ConversationOptionsBody",
    "ConversationSummary",
    "DenyBody",
    "ErrorBody",
    "ErrorResponse",
    "FieldAgreement",
    "FieldComparison",
    "HistoryResponse",
    "Integer",
    "InvalidItem",
    "ItemComparison",
    "NewBatch",
    "NewConversation",
    "PromptAccepted",
    "RequestBody",
    "RerunBody",
    "RetryBody",
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


# `agent_version` (not null) needs `agent` (not null), and with `agent` the options the agent
# decides are left out or at their defaults: the API says both.
_VERSION_NEEDS_AGENT: JsonDict = {
    "if": {"required": ["agent_version"], "properties": {"agent_version": {"type": "integer"}}},
    "then": {"required": ["agent"], "properties": {"agent": {"type": "string"}}},
}
_AGENT_DECIDES: JsonDict = {
    "if": {"required": ["agent"], "properties": {"agent": {"type": "string"}}},
    "then": {
        "properties": {
            name: {"enum": list(dict.fromkeys([None, to_jsonable_python(default)]))}
            for name, default in agent_decides().items()
        }
    },
}


class ConversationOptionsBody(ConversationOptions):
    """`shared.models.config.ConversationOptions` as a request body (strict, no unknown fields).

    Below the operator role, `tools` may only tighten the operator's tool policy, and
    `allow_all` and `labels` are refused (403 naming the field).
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={"allOf": [_VERSION_NEEDS_AGENT, _AGENT_DECIDES]},
    )


class NewConversation(ConversationOptionsBody):
    """The options of `Client.new_conversation`, and optionally the conversation's id."""

    conversation_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="Below the operator role, it must start with the caller's name and a dot.",
    )


class ForkBody(BaseModel):
    """A fork of a conversation: its first `at_step` steps, with the same or another agent.

    No tool options: the fork keeps the original's (or the agent's), so forking never
    loosens the tool policy.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    at_step: int = Field(
        ge=0,
        description="How many of the original's steps the fork keeps (0: none). Refused (422) "
        "past the history or between a tool call and its result.",
    )
    conversation_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="Below the operator role, it must start with the caller's name and a dot.",
    )
    agent: str | None = Field(None, description="Run the fork as this named agent.")
    agent_version: int | None = Field(
        None, gt=0, description="This version of the agent (the original's agent if none named)."
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
    scopes: dict[str, UsageMetadata] = Field(
        default_factory=dict,
        description="The same calls by `agent:<name>`, `batch:<id>` and `owner:<name>` (the "
        "user or API token that submitted them).",
    )


class UsageResponse(BaseModel):
    start: str = Field(description="As asked, or the default.")
    end: str = Field(description="As asked, or the default.")
    days: list[UsageDayView] = Field(description="Each day read, in order (see the operation).")
    totals: dict[str, UsageMetadata] = Field(description="Over `days`, by model.")
    scope_totals: dict[str, UsageMetadata] = Field(
        default_factory=dict,
        description="Over `days`, by agent, batch and owner. Cost is in millionths "
        "(`cost_micros`) of the prices' currency; `unpriced_calls` counts calls whose model "
        "had no price.",
    )
    day_totals: dict[str, UsageMetadata] = Field(
        default_factory=dict, description="Each day's calls (every model), by UTC day."
    )


# Batches

MAX_BATCH_ITEMS = 10_000


class BatchConfigBody(RequestBody):
    """What every prompt of a batch shares: conversation options and a concurrency cap."""

    conversation: ConversationOptionsBody = Field(default_factory=ConversationOptionsBody)
    max_concurrency: Integer = Field(16, gt=0, le=10_000)


# An item: an object whose keys are item fields, or any other value (reported invalid).
ITEM_SCHEMA: JsonDict = {
    "anyOf": [
        {"type": "object", "propertyNames": {"enum": list(ITEM_FIELDS)}},
        {"not": {"type": "object"}},
    ]
}


# Items or CSV, exactly one; a template only with CSV.
_ITEMS_OR_CSV: JsonDict = {
    "oneOf": [
        {
            "required": ["items"],
            "properties": {
                "items": {"not": {"type": "null"}},
                "csv": {"type": "null"},
                "template": {"type": "null"},
            },
        },
        {
            "required": ["csv"],
            "properties": {"csv": {"not": {"type": "null"}}, "items": {"type": "null"}},
        },
    ]
}


class NewBatch(RequestBody):
    """A batch: one configuration, many prompts, each run as its own conversation."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_ITEMS_OR_CSV)

    batch_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="Below the operator role, a new id must start with the caller's name and a "
        "dot, and only the batch's creator may add to it. Reuse an id to add items to a batch "
        "(its configuration stays as it was): "
        "items whose id it already has are skipped, so a retried request submits nothing twice.",
    )
    config: BatchConfigBody = Field(default_factory=BatchConfigBody)
    items: list[Any] | None = Field(
        None,
        min_length=1,
        max_length=MAX_BATCH_ITEMS,
        description='Each {"id"?: string, "prompt": string or Content, "tool_selection"?, '
        '"timeout_s"?, "response_schema"?, "model_settings"?} (the last four: that item\'s '
        "prompt options, over the batch's); a malformed item (or one whose model settings the "
        "provider cannot honour) is reported with its index and the others run. A key that is "
        "not one of those refuses the request (403 for a submitter's tool policy keys, else 422).",
        json_schema_extra={
            "anyOf": [
                {
                    "type": "array",
                    "items": ITEM_SCHEMA,
                    "minItems": 1,
                    "maxItems": MAX_BATCH_ITEMS,
                },
                {"type": "null"},
            ]
        },
    )
    csv: str | None = Field(
        None,
        min_length=1,
        description="Instead of `items`: CSV text, a header row and then one item per row, its "
        "id from an `id` column if there is one, its prompt the `template` rendered with the "
        "row's cells (without a template, the `prompt` column). A template naming a column the "
        "header lacks, or a row with fewer or more cells than the header, refuses the request "
        "(422 naming the line and the column) before anything is created.",
    )
    template: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TEMPLATE_CHARS,
        description="With `csv`: the prompt of each row, naming columns as `Classify: "
        "{subject}\\n{body}`; a field is a column's name and nothing else (no attribute or "
        "index access, position, format spec or conversion); `{{` and `}}` are braces.",
    )

    @model_validator(mode="after")
    def _items_or_csv(self) -> NewBatch:
        if (self.items is None) == (self.csv is None):
            raise ValueError("give items or csv, exactly one")
        if self.template is not None and self.csv is None:
            raise ValueError("template names csv columns: it goes with csv, not items")
        return self


class InvalidItem(BaseModel):
    index: int = Field(description="Position in `items`, from 0; for `csv`, the line number.")
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
    held: str | None = Field(
        None,
        description='"budget:tokens" or "budget:micros": its budget is spent and no item is '
        "dispatched until it is raised (PUT /budgets/batch/<id>).",
    )
    rest_cost_micros: int | None = Field(
        None,
        description="The projected cost of the items not yet ended: the mean cost of the items "
        "that ran (done or failed) times their number; null before one ran, or with no price.",
    )
    source: str | None = Field(None, description="The batch this one re-runs, if it is a re-run.")
    retries: int = Field(0, description="Retries that ran some of its items again.")

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
        "held": info.held or None,
        "rest_cost_micros": info.rest_cost_micros,
        "source": info.source or None,
        "retries": info.retries,
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
    denials: list[str] = Field(
        default_factory=list,
        description="Why each of those did not run: `denied (by <who>): <reason>`, "
        "`denied (it expired): <reason>`, or `<tool> was cancelled`.",
    )
    attempts: int = Field(1, description="Runs of the item: 1, and one more for each retry.")
    conversation_id: str = Field(description="The latest attempt's conversation.")
    tool_calls: list[str] | None = Field(
        None,
        description="The names of the tool calls the model made in the latest attempt's turn, "
        "in order (denied ones too); null without a finished answer.",
    )
    duration_s: float | None = Field(
        None, description="The latest attempt's turn, from its start running to its end."
    )


# An agent (or a version of the source's) decides the provider and the model: not both.
_AGENT_OR_MODEL: JsonDict = {
    "if": {
        "anyOf": [
            {"required": ["agent"], "properties": {"agent": {"type": "string"}}},
            {"required": ["agent_version"], "properties": {"agent_version": {"type": "integer"}}},
        ]
    },
    "then": {"properties": {"provider": {"type": "null"}, "model": {"type": "null"}}},
}


def _bounds_in_json_schema(schema: dict[str, Any]) -> None:
    """An optional `Integer` keeps its bounds as pydantic's own `gt`/`le` inside `anyOf`,
    which no JSON Schema reader knows (the fuzz sent 0 as valid): spelled as JSON Schema."""
    for option in schema.get("anyOf", []):
        for ours, theirs in (("gt", "exclusiveMinimum"), ("ge", "minimum"), ("le", "maximum")):
            if ours in option:
                option[theirs] = option.pop(ours)


class RerunBody(RerunChanges):
    """What a re-run changes of its source's configuration; every field optional."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        json_schema_extra=_AGENT_OR_MODEL,
    )

    agent: str | None = Field(
        None, min_length=1, max_length=100, description="Run as this agent (its latest version)."
    )
    agent_version: Integer | None = Field(
        None,
        gt=0,
        description="That version of `agent`, or of the source's agent.",
        json_schema_extra=_bounds_in_json_schema,
    )
    model_settings: ModelSettings | None = Field(
        None, description="Over the source's (or the agent's) model settings."
    )
    max_concurrency: Integer | None = Field(
        None, gt=0, le=10_000, json_schema_extra=_bounds_in_json_schema
    )
    batch_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="The re-run's id (below the operator role: `<name>.<id>`); the same id "
        "again goes on submitting a re-run cut short.",
    )

    def changes(self) -> RerunChanges:
        return RerunChanges.model_validate(self.model_dump(exclude={"batch_id"}))


class BatchRerunStarted(BaseModel):
    batch: BatchDetail
    source: str = Field(description="The batch it re-runs.")
    submitted: int
    skipped: int = Field(description="Items the re-run already had (the same id again).")
    invalid: int = Field(description="Items whose input was invalid in the source too.")


class ComparedSide(BaseModel):
    """One run's side of an item: its latest attempt."""

    status: str = Field(description="As shown: an item state, or `denied` (done, a call denied).")
    answer: str | None
    structured_output: Any = None
    tokens: int | None
    cost_micros: int | None
    priced: bool = Field(description="Whether a price counted its cost (else cost is unknown).")
    error: str | None
    denials: list[str]
    attempts: int
    conversation_id: str | None
    tool_calls: list[str] | None = Field(
        None, description="Tool calls made, by name in order; null without a finished answer."
    )
    duration_s: float | None = Field(None, description="The turn's, start to end.")


class FieldComparison(BaseModel):
    field: str = Field(description="A structured output's field, nested ones as dotted paths.")
    first: Any = None
    second: Any = None
    agree: bool


class ItemComparison(BaseModel):
    """One item in two runs: each side, the outcome, and what differs."""

    id: str
    line: int
    outcome: CompareOutcome
    first: ComparedSide
    second: ComparedSide
    answer_diff: list[list[str]] = Field(
        description='The answers\' words in order: ["=", kept], ["-", only the first\'s], '
        '["+", only the second\'s].'
    )
    answer_diff_truncated: bool = Field(description="Past 5,000 words an answer is not diffed.")
    fields: list[FieldComparison]


class FieldAgreement(BaseModel):
    agree: int
    compared: int = Field(description="Items where both runs succeeded.")
    rate: float


class ComparedBatch(BaseModel):
    id: str
    status: BatchStatus
    total: int
    usage: UsageMetadata = Field(description="The whole batch's, every attempt of every item.")
    source: str | None


class BatchComparisonSummary(BaseModel):
    """Two runs of the same inputs compared item by item."""

    total: int
    outcomes: dict[CompareOutcome, int] = Field(
        description="agree: both succeeded with equal answers; differ: both succeeded; "
        "only_first, only_second: one succeeded; neither."
    )
    fields: dict[str, FieldAgreement] = Field(
        description="Per structured field: how often both runs gave the same value."
    )
    tokens: dict[str, int] = Field(description="Of the latest attempts: first and second.")
    cost_micros: dict[str, int] = Field(description="Of the latest attempts: first and second.")
    batches: dict[str, ComparedBatch] = Field(description="first and second.")
    truncated: bool = Field(False, description="Always false here: every item is read.")


class RetryBody(RequestBody):
    """Which ended items to run again; every field optional (all four statuses, any error)."""

    statuses: list[RetryStatus] | None = Field(
        None,
        min_length=1,
        max_length=len(RetryStatus),
        description="Items that `failed`, were `cancelled`, ended with a tool call `denied` "
        "by a person, or whose approval `expired` unanswered (default: all four).",
    )
    error: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ERROR_FILTER,
        description="Only items whose error, or a denied call's reason, holds this text "
        "(ignoring case).",
    )

    tool: str | None = Field(
        None,
        pattern=TOOL_NAME_PATTERN,
        description="Only items whose turn called this tool (read from its answer: an item "
        "that failed or was cancelled left none, and is not taken).",
    )
    items: list[str] | None = Field(
        None,
        min_length=1,
        max_length=MAX_RETRY_ITEMS,
        description="Only these items, by id (those that ended as the other fields say).",
    )

    def retry_filter(self) -> RetryFilter:
        statuses = frozenset(self.statuses) if self.statuses else frozenset(RetryStatus)
        items = frozenset(self.items) if self.items else None
        return RetryFilter(statuses=statuses, error=self.error, tool=self.tool, items=items)


class BatchRetried(BaseModel):
    batch: BatchDetail
    retried: int = Field(description="Items queued again, each as a new attempt.")
    skipped: list[str] = Field(
        description="Items chosen that could not run again, each with why (one that never "
        "ran has no prompt to run)."
    )


# Bulk approvals


class BulkFilter(RequestBody):
    """Which pending notifications: each facet optional; all set facets must match."""

    tool: str | None = None
    batch_id: str | None = None
    conversation_id: str | None = None
    min_age_s: float | None = Field(
        None, ge=0, le=MAX_AGE_S, description="Waiting at least this long."
    )
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
    scope: str | None = Field(
        None,
        description="The resolver's role and scopes (`approver tool:send_email`, `*` for all); "
        "null for the system and direct clients.",
    )
    claim: ClaimAction | None = Field(
        None, description="A claim or a release of the request (no decision: status pending)."
    )
    claimed_by: str | None = Field(
        None, description="Who held the request (claimed it, or released it) at the time."
    )


class AuditList(BaseModel):
    items: list[AuditEntry]
    next_before: str | None = Field(
        description="Pass as `before` for the next (older) page; null on the last."
    )

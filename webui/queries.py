"""The query parameters of each operation and page, each declared once (`webui.params` reads them).

A page reads the same model as the API where it takes the same parameters; a page's size is
its own, so a page reads the model without ``limit``, and the API's adds it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Annotated

from pydantic import Field

from shared.models.batches import CompareShow, ExportFormat
from shared.models.config import LABEL_PATTERN
from shared.store.keys import ID_PATTERN
from webui.approvals.inbox import InboxFilter
from webui.audit import AuditDecision, AuditFilter
from webui.batches.results import ResultStatus
from webui.listing import ConversationFilter, ListedStatus
from webui.params import (
    AN_ID,
    EMPTY_IS_A_VALUE,
    HEADER,
    STRIPPED,
    ChoiceParam,
    DayParam,
    IntegerParam,
    QueryModel,
    StreamIdParam,
)
from webui.stream_ids import STREAM_ID

__all__ = [
    "DEFAULT_DAYS",
    "MAX_OFFSET",
    "AuditPageQuery",
    "AuditQuery",
    "BatchPageQuery",
    "CompareItemsQuery",
    "ComparePageQuery",
    "ConversationsPageQuery",
    "ConversationsQuery",
    "DeleteAgentQuery",
    "EventsQuery",
    "FileQuery",
    "HistoryPageQuery",
    "HistoryQuery",
    "InboxPageQuery",
    "ListQuery",
    "NotificationsQuery",
    "OffsetQuery",
    "PolicyLogQuery",
    "ResultsQuery",
    "RuleScopeQuery",
    "Switch",
    "UsageQuery",
]

MAX_OFFSET = 10**9
DEFAULT_DAYS = 14  # of a usage report without a start

Offset = Annotated[IntegerParam, Field(ge=0, le=MAX_OFFSET, description="Items to skip.")]


class Switch(str, Enum):
    """A yes-or-no query parameter, spelled as JSON spells it."""

    TRUE = "true"
    FALSE = "false"


class DeleteAgentQuery(QueryModel):
    force: ChoiceParam[Switch] = Field(
        Switch.FALSE,
        description="Delete the agent even though schedules or triggers name it.",
    )


class OffsetQuery(QueryModel):
    """The batches page."""

    offset: Offset = 0


class BatchPageQuery(OffsetQuery):
    """The page of one batch: its results from ``offset``, optionally of one status."""

    status: ChoiceParam[ResultStatus] | None = Field(
        None, description="Only results shown in this status (`denied`: done with a denial)."
    )


class ResultsQuery(QueryModel):
    """GET /batches/<id>/results: JSON lines (the default) or CSV."""

    format: ChoiceParam[ExportFormat] | None = Field(
        None,
        description="`jsonl`: one JSON object per item, as without it; `csv`: a header, then one "
        "row per item, structured fields flattened into `structured.<path>` columns. Either "
        "given, the answer is a download (`Content-Disposition: attachment`).",
    )


class CompareItemsQuery(QueryModel):
    """GET /batches/<a>/compare/<b>/items: which items, and as JSON lines or CSV."""

    show: ChoiceParam[CompareShow] | None = Field(
        None,
        description="Only items of this outcome, or `changed`: the answers differ or only one "
        "run succeeded (default: every item).",
    )
    format: ChoiceParam[ExportFormat] | None = Field(
        None, description="`jsonl` (the default) or `csv`; either given, a download."
    )


class ComparePageQuery(OffsetQuery):
    """The comparison page: its items from ``offset``, optionally of one outcome."""

    show: ChoiceParam[CompareShow] | None = Field(None, description="As for the items' route.")


class ListQuery(OffsetQuery):
    """GET /batches; with its filters, GET /conversations and GET /notifications."""

    limit: IntegerParam = Field(50, ge=1, le=200, description="Page size.")


class ConversationsPageQuery(OffsetQuery):
    """The conversations page."""

    status: ChoiceParam[ListedStatus] | None = Field(
        None,
        description="Only conversations in this status (`failed`: the last turn failed and "
        "nothing runs since).",
    )
    q: Annotated[str, STRIPPED] = Field(
        "", max_length=200, description="Only those whose title, id or metadata contains this."
    )

    def where(self) -> ConversationFilter:
        return ConversationFilter(status=self.status, search=self.q)


class ConversationsQuery(ConversationsPageQuery, ListQuery):
    """GET /conversations."""


class HistoryQuery(OffsetQuery):
    """GET /conversations/<id>/history."""

    limit: IntegerParam = Field(100, ge=1, le=1000, description="Page size.")


class HistoryPageQuery(QueryModel):
    """The page of one conversation: its steps from ``offset``, else the latest ones."""

    offset: Offset | None = None


class InboxPageQuery(InboxFilter, OffsetQuery):
    """The approvals inbox page."""


class NotificationsQuery(InboxPageQuery, ListQuery):
    """GET /notifications."""


class AuditPageQuery(QueryModel):
    """The audit page."""

    before: StreamIdParam | None = Field(
        None, description="Only entries older than this id (`next_before` of the previous page)."
    )
    actor: Annotated[str | None, STRIPPED] = Field(
        None, max_length=200, description="Only by this user or token."
    )
    tool: Annotated[str | None, STRIPPED] = Field(
        None, max_length=200, description="Only calls of this tool."
    )
    batch_id: Annotated[str | None, STRIPPED] = Field(
        None, max_length=200, description="Only this batch's."
    )
    decision: ChoiceParam[AuditDecision] | None = Field(
        None,
        description="Only this decision (allow, deny, submit) or outcome (expired, cancelled).",
    )

    def where(self) -> AuditFilter:
        return AuditFilter(
            actor=self.actor,
            tool=self.tool,
            batch_id=self.batch_id,
            decision=self.decision.value if self.decision else None,
        )

    def filters(self) -> dict[str, str]:
        """The filters that are set, as query parameters (for the pager's links)."""
        found = {"actor": self.actor, "tool": self.tool, "batch_id": self.batch_id}
        if self.decision:
            found["decision"] = self.decision.value
        return {name: value for name, value in found.items() if value}


class AuditQuery(AuditPageQuery):
    """GET /audit."""

    limit: IntegerParam = Field(100, ge=1, le=500, description="Page size.")


class PolicyLogQuery(QueryModel):
    """GET /policy/log."""

    limit: IntegerParam = Field(100, ge=1, le=500, description="Entries.")


class RuleScopeQuery(QueryModel):
    """DELETE /policy/rules/<tool>: an empty scope is refused, not read as none (that would
    remove the global rule).
    """

    batch_id: Annotated[str | None, EMPTY_IS_A_VALUE] = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="The rule's batch, if scoped (not with `label`: no rule has both, so that "
        "is a 404).",
    )
    label: Annotated[str | None, EMPTY_IS_A_VALUE] = Field(
        None, pattern=LABEL_PATTERN, description="The rule's label, if scoped."
    )


class FileQuery(QueryModel):
    """GET /conversations/<id>/files."""

    path: str = Field(
        min_length=1,
        description="Relative to the workspace root, with '/'; with several roots it may start "
        "with a root's directory name.",
    )


class UsageQuery(QueryModel):
    """GET /usage and the usage page: any two UTC days, inclusive."""

    start: DayParam | None = Field(
        None, description=f"First UTC day; default {DEFAULT_DAYS - 1} days before end."
    )
    end: DayParam | None = Field(None, description="Last UTC day, inclusive; default today.")

    def days(self) -> tuple[date, date]:
        """Start and end; by default the `DEFAULT_DAYS` days up to today.

        Any two days are a range; `shared.usage_report.covered_days` says which of its days
        a report reads.
        """
        end = self.end or datetime.now(UTC).date()
        if self.start is not None:
            return self.start, end
        before = DEFAULT_DAYS - 1
        return (end - timedelta(days=before) if end.toordinal() > before else date.min), end


class EventsQuery(QueryModel):
    """GET /conversations/<id>/events: where a reconnecting client's replay starts."""

    last_event_id_header: Annotated[str | None, HEADER, AN_ID] = Field(
        None,
        alias="Last-Event-ID",
        pattern=f"^(?:{STREAM_ID})?$",
        description="Replay the events after this one, then follow (empty, as EventSource's "
        "reset id: none).",
    )
    last_event_id: StreamIdParam | None = Field(
        None, description="Like the Last-Event-ID header, which wins when both are sent."
    )

    @property
    def after(self) -> str | None:
        """The header (EventSource reconnects), else the query; none if empty; ``0`` is ``0-0``."""
        raw = self.last_event_id_header or self.last_event_id
        if not raw:
            return None
        return "0-0" if raw == "0" else raw

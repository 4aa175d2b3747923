"""/batches/<a>/compare/<b>: two runs of the same inputs, item by item (summary and items)."""

from __future__ import annotations

import json

from flask import Blueprint, Response

from shared.batches.compare import compare_csv_lines
from shared.batches.export import MEDIA_TYPES
from shared.models.batches import ExportFormat
from shared.models.users import Role
from shared.store.comparisons import BatchComparison
from webui.api.batches import chunked
from webui.api.models import BatchComparisonSummary, ItemComparison
from webui.api.replies import reply
from webui.auth import requires
from webui.operations import operation
from webui.queries import CompareItemsQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
@operation(
    "Compare two runs of the same inputs: counts by outcome, each structured field's agreement "
    "rate, tokens and cost (reads every item of both)",
    response=BatchComparisonSummary,
    errors=(404, 422),
)
def summary(bid: str, other: str) -> Response:
    comparison = BatchComparison(services().batches, bid, other)
    return reply(BatchComparisonSummary.model_validate(comparison.summary()))


@requires(Role.VIEWER)
@operation(
    "Two runs of the same inputs item by item, in input order (streamed): both sides, the "
    "outcome, a word-level diff of the answers, structured fields compared",
    response=ItemComparison,
    media_type=MEDIA_TYPES[ExportFormat.JSONL],
    text_media_types=(MEDIA_TYPES[ExportFormat.CSV],),
    query=CompareItemsQuery,
    errors=(404, 422),
)
def items(bid: str, other: str) -> Response:
    query = CompareItemsQuery.read()
    comparison = BatchComparison(services().batches, bid, other)
    comparison.check_aligned()  # 404 or 422 before the stream starts
    chosen = query.format or ExportFormat.JSONL
    compared = comparison.items(query.show)
    if chosen is ExportFormat.CSV:
        lines = compare_csv_lines(compared)
    else:
        lines = (json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n" for c in compared)
    response = Response(chunked(lines, bid), mimetype=MEDIA_TYPES[chosen])
    response.headers["X-Accel-Buffering"] = "no"
    if query.format is not None:
        name = f"compare-{bid}-{other}.{chosen.value}"
        response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def blueprint() -> Blueprint:
    bp = Blueprint("comparisons", __name__)
    bp.add_url_rule("/batches/<id:bid>/compare/<id:other>", view_func=summary, methods=["GET"])
    bp.add_url_rule("/batches/<id:bid>/compare/<id:other>/items", view_func=items, methods=["GET"])
    return bp

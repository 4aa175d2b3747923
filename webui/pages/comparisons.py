"""Two runs of the same inputs side by side: what differs, item by item, and what each cost."""

from __future__ import annotations

from itertools import islice

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from shared.models.batches import CompareShow
from shared.models.prices import format_cost
from shared.models.steps import UsageMetadata
from shared.models.users import Role
from shared.store.comparisons import BatchComparison
from webui.auth import requires
from webui.batches.results import SCAN_LIMIT
from webui.queries import ComparePageQuery
from webui.services import services

__all__ = ["blueprint"]

PAGE_SIZE = 25


@requires(Role.VIEWER)
def view(bid: str, other: str) -> ResponseReturnValue:
    """The summary of the first `SCAN_LIMIT` items, and a page of them (`show`: which)."""
    query = ComparePageQuery.read()
    comparison = BatchComparison(services().batches, bid, other)
    comparison.check_aligned()
    summary = comparison.summary(limit=SCAN_LIMIT)
    shown = islice(comparison.items(query.show, limit=SCAN_LIMIT), query.offset, None)
    found = list(islice(shown, PAGE_SIZE + 1))
    return render_template(
        "compare.html",
        first=bid,
        second=other,
        summary=summary,
        costs={
            side: format_cost(UsageMetadata.model_validate(run["usage"]))
            for side, run in summary["batches"].items()
        },
        items=found[:PAGE_SIZE],
        more=len(found) > PAGE_SIZE,
        offset=query.offset,
        show=query.show,
        shows=list(CompareShow),
        page_size=PAGE_SIZE,
    )


def blueprint() -> Blueprint:
    bp = Blueprint("comparisons", __name__)
    bp.add_url_rule("/batches/<id:bid>/compare/<id:other>", view_func=view)
    return bp

"""Batches: the list with progress, one batch with its counts, approvals and results, cancel."""

from __future__ import annotations

from itertools import islice
from typing import Any

from flask import Blueprint, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from shared.errors import SignoffError
from shared.store.users import Role
from webui.auth import requires
from webui.batch_overview import batch_detail, batch_page
from webui.queries import OffsetQuery
from webui.services import services
from webui.unreadable import skip_unreadable

__all__ = ["blueprint"]

PAGE_SIZE = 25
RESULTS_PAGE = 50
APPROVALS_SHOWN = 5


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    page = batch_page(services(), offset=OffsetQuery.read().offset, limit=PAGE_SIZE)
    return render_template("batches.html", page=page)


def _results(bid: str, offset: int) -> tuple[list[dict[str, Any]], bool]:
    """One page of results (read from the start: the store reads in input order only)."""
    store = services().batches
    rows = list(islice(store.results(bid, offset=offset), RESULTS_PAGE + 1))
    for row in rows:
        row["conversation_id"] = store.conversation_id(bid, row["id"])
    return rows[:RESULTS_PAGE], len(rows) > RESULTS_PAGE


@requires(Role.VIEWER)
def view(bid: str) -> ResponseReturnValue:
    svc = services()
    batch = batch_detail(svc, bid)
    offset = OffsetQuery.read().offset
    results, more = _results(bid, offset)
    return render_template(
        "batch.html",
        batch=batch,
        approvals=svc.notifications.load(
            svc.notifications.pending_ids(batch_id=bid, limit=APPROVALS_SHOWN),
            on_corrupt=skip_unreadable,
        ),
        results=results,
        offset=offset,
        more=more,
        page_size=RESULTS_PAGE,
    )


@requires(Role.SUBMITTER)
def cancel(bid: str) -> ResponseReturnValue:
    try:
        stopped = services().batches.cancel(bid)
    except SignoffError as exc:
        flash(exc.message, "error")
    else:
        flash(f"Batch cancelled: {stopped} conversations stopped.", "info")
    return redirect(url_for(".view", bid=bid))


def blueprint() -> Blueprint:
    bp = Blueprint("batches", __name__)
    bp.add_url_rule("/batches", view_func=index)
    bp.add_url_rule("/batches/<id:bid>", view_func=view)
    bp.add_url_rule("/batches/<id:bid>/cancel", view_func=cancel, methods=["POST"])
    return bp

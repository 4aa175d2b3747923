"""Batches: the list with progress, one batch with its counts, approvals and results, cancel."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from shared.errors import SignoffError
from shared.store.users import Role
from webui.auth import current_principal, requires
from webui.batch_overview import batch_detail, batch_page
from webui.batch_results import ResultStatus, results_page
from webui.gate import check_batch_owner
from webui.queries import BatchPageQuery, OffsetQuery
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


@requires(Role.VIEWER)
def view(bid: str) -> ResponseReturnValue:
    svc = services()
    batch = batch_detail(svc, bid)
    query = BatchPageQuery.read()
    results = results_page(svc, bid, offset=query.offset, limit=RESULTS_PAGE, status=query.status)
    return render_template(
        "batch.html",
        batch=batch,
        approvals=svc.notifications.load(
            svc.notifications.pending_ids(batch_id=bid, limit=APPROVALS_SHOWN),
            on_corrupt=skip_unreadable,
        ),
        results=results,
        offset=query.offset,
        status=query.status,
        statuses=list(ResultStatus),
        page_size=RESULTS_PAGE,
    )


@requires(Role.SUBMITTER)
def cancel(bid: str) -> ResponseReturnValue:
    """Only the batch's creator or an operator may cancel it (403 otherwise), as in the API."""
    check_batch_owner(current_principal(), services().batches, bid)
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

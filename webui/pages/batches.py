"""Batches: the list with progress, one batch with its counts, approvals and results, cancel
and retry."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from shared.errors import SignoffError
from shared.gate import check_batch_owner
from shared.models.batches import MAX_ERROR_FILTER, BatchState, RetryFilter, RetryStatus
from shared.models.users import Role
from shared.store.batch_retry import BatchRetry
from webui.auth import current_principal, requires
from webui.batches.overview import batch_detail, batch_page
from webui.batches.results import ResultStatus, results_page
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
        retry_statuses=list(RetryStatus),
        retryable=batch.counts[BatchState.FAILED]
        + batch.counts[BatchState.CANCELLED]
        + batch.denied,
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


@requires(Role.SUBMITTER)
def retry(bid: str) -> ResponseReturnValue:
    """Runs the ended items the form chooses again; who may is as for cancel, as in the API."""
    svc = services()
    check_batch_owner(current_principal(), svc.batches, bid)
    try:
        report = BatchRetry(svc.batches).retry(bid, _retry_filter())
    except SignoffError as exc:
        flash(exc.message, "error")
    except ValueError:  # pydantic's ValidationError is one too
        longest = f"an error text is at most {MAX_ERROR_FILTER} characters"
        flash(f"Tick statuses from the list; {longest}; a tool is a tool's name.", "error")
    else:
        skipped = f"; {len(report.skipped)} could not be" if report.skipped else ""
        flash(f"Retrying {report.retried} items as new attempts{skipped}.", "info")
    return redirect(url_for(".view", bid=bid))


def _retry_filter() -> RetryFilter:
    """The form's ticked statuses (none ticked: all), its error text and tool (blank: any) and
    the items ticked in the results (none: every item the rest takes)."""
    statuses = frozenset(RetryStatus(value) for value in request.form.getlist("status"))
    error = request.form.get("error", "").strip() or None
    tool = request.form.get("tool", "").strip() or None
    items = frozenset(request.form.getlist("item")) or None
    return RetryFilter(
        statuses=statuses or frozenset(RetryStatus), error=error, tool=tool, items=items
    )


def blueprint() -> Blueprint:
    bp = Blueprint("batches", __name__)
    bp.add_url_rule("/batches", view_func=index)
    bp.add_url_rule("/batches/<id:bid>", view_func=view)
    bp.add_url_rule("/batches/<id:bid>/cancel", view_func=cancel, methods=["POST"])
    bp.add_url_rule("/batches/<id:bid>/retry", view_func=retry, methods=["POST"])
    return bp

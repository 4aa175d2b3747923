"""/batches: submit a batch of prompts, follow it, cancel it, and stream its results."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

from flask import Blueprint, Response, url_for
from pydantic import ValidationError

from shared.errors import Conflict, StorageError
from shared.store.batches import BatchStatus, BatchStore
from shared.store.users import Role
from webui.api.models import (
    BatchCancelled,
    BatchDetail,
    BatchList,
    BatchResult,
    BatchSubmitted,
    InvalidItem,
    NewBatch,
)
from webui.api.replies import reply
from webui.auth import Principal, current_principal, requires
from webui.batch_input import batch_config, batch_lines
from webui.batch_overview import batch_detail, batch_page
from webui.errors import invalid_body
from webui.gate import check_batch_owner, check_chosen_id, check_tool_options, is_operator
from webui.operations import operation
from webui.params import json_body
from webui.queries import ListQuery
from webui.services import Services, services

__all__ = ["NDJSON", "blueprint", "result_lines"]

log = logging.getLogger(__name__)

NDJSON = "application/x-ndjson"
_LINES_PER_CHUNK = 200


def _check_caller(svc: Services, caller: Principal, body: NewBatch) -> None:
    """A submitter adds to its own batches only, in its namespace, tightening the policy only."""
    options = body.config.conversation
    if body.batch_id is not None and svc.batches.exists(body.batch_id):
        check_batch_owner(caller, svc.batches, body.batch_id)
    else:
        check_chosen_id(caller, body.batch_id, "batch_id")
    check_tool_options(
        caller,
        svc.policies,
        tools=options.tools,
        allow_all=options.allow_all,
        labels=options.labels,
        batch_id=body.batch_id,
        prefix="config.conversation.",
    )


def _submit(svc: Services, caller: Principal, body: NewBatch) -> BatchSubmitted:
    _check_caller(svc, caller, body)
    try:
        config = batch_config(
            svc.settings,
            body.config,
            policy_may_loosen=is_operator(caller),
            agents=svc.stores.agents,
        )
    except ValidationError as exc:
        raise invalid_body(exc) from None
    bid = svc.batches.create(config, batch_id=body.batch_id, created_by=caller.name)
    if svc.batches.info(bid).status is BatchStatus.CANCELLED:
        raise Conflict(f"batch {bid} was cancelled; submit to a new batch")
    lines = list(batch_lines(body.items, svc.settings))  # as many as the body already holds
    report = svc.batches.submit(bid, lines)
    svc.batches.finish_submission(bid)
    ids = {line.line: line.id for line in lines if line.error}
    invalid = [
        InvalidItem(index=index, id=ids[index], error=error) for index, error in report.invalid
    ]
    return BatchSubmitted(
        batch=batch_detail(svc, bid),
        submitted=report.submitted,
        skipped=report.skipped,
        invalid=invalid,
    )


@requires(Role.SUBMITTER)
@operation(
    "Submit a batch: one conversation per item; malformed items are reported, the rest run",
    request=NewBatch,
    response=BatchSubmitted,
    status=201,
    errors=(400, 403, 409, 413, 422),
)
def create() -> Response:
    svc = services()
    submitted = _submit(svc, current_principal(), json_body(NewBatch))
    location = url_for(".get", bid=submitted.batch.id)
    return reply(submitted, 201, headers={"Location": location})


@requires(Role.VIEWER)
@operation("List batches, newest first", response=BatchList, query=ListQuery, errors=(400,))
def list_() -> Response:
    query = ListQuery.read()
    return reply(batch_page(services(), offset=query.offset, limit=query.limit))


@requires(Role.VIEWER)
@operation("A batch: status, counts by state, usage", response=BatchDetail, errors=(404,))
def get(bid: str) -> Response:
    return reply(batch_detail(services(), bid))


@requires(Role.SUBMITTER)
@operation(
    "Cancel a batch: queued items at once, running and waiting ones are aborted",
    response=BatchCancelled,
    status=202,
    errors=(403, 404),
)
def cancel(bid: str) -> Response:
    svc = services()
    check_batch_owner(current_principal(), svc.batches, bid)
    stopped = svc.batches.cancel(bid)
    return reply(BatchCancelled(batch=batch_detail(svc, bid), stopped=stopped), 202)


def result_lines(store: BatchStore, bid: str) -> Iterator[str]:
    """The results as NDJSON, in input order, a few hundred lines per chunk (bounded memory)."""
    chunk: list[str] = []
    try:
        for result in store.results(bid):
            chunk.append(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n")
            if len(chunk) >= _LINES_PER_CHUNK:
                yield "".join(chunk)
                chunk = []
    except StorageError:
        # The status line is sent: break the chunked body so the client sees it incomplete.
        log.warning("results of batch %s cut short by a storage error", bid)
        raise
    if chunk:
        yield "".join(chunk)


@requires(Role.VIEWER)
@operation(
    "The results, one JSON line per item in input order (streamed, finished or not)",
    response=BatchResult,
    media_type=NDJSON,
    errors=(404,),
)
def results(bid: str) -> Response:
    store = services().batches
    store.config(bid)  # 404 before the stream starts
    response = Response(result_lines(store, bid), mimetype=NDJSON)
    response.headers["X-Accel-Buffering"] = "no"
    return response


def blueprint() -> Blueprint:
    bp = Blueprint("batches", __name__)
    bp.add_url_rule("/batches", view_func=create, methods=["POST"])
    bp.add_url_rule("/batches", endpoint="list", view_func=list_, methods=["GET"])
    bp.add_url_rule("/batches/<id:bid>", view_func=get, methods=["GET"])
    bp.add_url_rule("/batches/<id:bid>/cancel", view_func=cancel, methods=["POST"])
    bp.add_url_rule("/batches/<id:bid>/results", view_func=results, methods=["GET"])
    return bp

"""/batches: submit a batch of prompts, follow it, cancel it, retry what ended badly, re-run
it with another agent or model, and stream its results."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from flask import Blueprint, Response, url_for
from pydantic import ValidationError

from shared.batches.export import MEDIA_TYPES, export_lines
from shared.batches.lines import BatchLine
from shared.errors import Conflict, StorageError
from shared.gate import check_batch_owner, check_chosen_id, check_tool_options, is_operator
from shared.models.batches import BatchStatus, ExportFormat
from shared.models.users import Role
from shared.store.batch_retry import BatchRetry
from shared.store.reruns import BatchRerun
from webui.api.models import (
    BatchCancelled,
    BatchDetail,
    BatchList,
    BatchRerunStarted,
    BatchResult,
    BatchRetried,
    BatchSubmitted,
    InvalidItem,
    NewBatch,
    RerunBody,
    RetryBody,
)
from webui.api.replies import reply
from webui.auth import Principal, current_principal, requires
from webui.batches.input import batch_config, batch_lines, csv_lines
from webui.batches.overview import batch_detail, batch_page
from webui.errors import invalid_body
from webui.operations import operation
from webui.params import json_body
from webui.policy.gate import check_item_keys
from webui.queries import ListQuery, ResultsQuery
from webui.services import Services, services

__all__ = ["NDJSON", "blueprint", "chunked"]

log = logging.getLogger(__name__)

NDJSON = MEDIA_TYPES[ExportFormat.JSONL]
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
    check_item_keys(caller, svc.policies, body.items or [], batch_id=body.batch_id)


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
    lines = _lines(svc, body)  # checked before anything is created
    bid = svc.batches.create(config, batch_id=body.batch_id, created_by=caller.name)
    if svc.batches.info(bid).status is BatchStatus.CANCELLED:
        raise Conflict(f"batch {bid} was cancelled; submit to a new batch")
    report = svc.batches.submit(bid, lines)
    svc.batches.finish_submission(bid)
    ids = {line.line: line.id for line in lines}
    invalid = [
        InvalidItem(index=index, id=ids[index], error=error) for index, error in report.invalid
    ]
    return BatchSubmitted(
        batch=batch_detail(svc, bid),
        submitted=report.submitted,
        skipped=report.skipped,
        invalid=invalid,
    )


def _lines(svc: Services, body: NewBatch) -> list[BatchLine]:
    """The body's items or CSV rows (as many as the body already holds) as batch lines."""
    if body.csv is not None:
        return csv_lines(body.csv, body.template, svc.settings)
    return list(batch_lines(body.items or [], svc.settings))


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


@requires(Role.SUBMITTER)
@operation(
    "Run a batch's ended items again (failed, denied, cancelled or expired, or some of them), "
    "each as a new attempt, under the batch's cap and budget",
    request=RetryBody,
    response=BatchRetried,
    status=202,
    errors=(403, 404, 409, 422),
)
def retry(bid: str) -> Response:
    svc = services()
    body = json_body(RetryBody)
    check_batch_owner(current_principal(), svc.batches, bid)
    report = BatchRetry(svc.batches).retry(bid, body.retry_filter())
    skipped = [f"{item}: {why}" if item else why for item, why in report.skipped]
    answer = BatchRetried(batch=batch_detail(svc, bid), retried=report.retried, skipped=skipped)
    return reply(answer, 202)


@requires(Role.SUBMITTER)
@operation(
    "Re-run a batch: a new batch of its inputs with another agent, agent version, model or "
    "model settings, linked to it (its `source`)",
    request=RerunBody,
    response=BatchRerunStarted,
    status=201,
    errors=(403, 404, 409, 422),
)
def rerun(bid: str) -> Response:
    svc, caller = services(), current_principal()
    body = json_body(RerunBody)
    check_batch_owner(caller, svc.batches, bid)
    check_chosen_id(caller, body.batch_id, "batch_id")
    new, report = BatchRerun(svc.batches, svc.stores.agents).rerun(
        bid, body.changes(), created_by=caller.name, batch_id=body.batch_id
    )
    started = BatchRerunStarted(
        batch=batch_detail(svc, new),
        source=bid,
        submitted=report.submitted,
        skipped=report.skipped,
        invalid=len(report.invalid),
    )
    return reply(started, 201, headers={"Location": url_for(".get", bid=new)})


def chunked(lines: Iterable[str], bid: str) -> Iterator[str]:
    """Lines joined a few hundred at a time, so a body of any size is sent in bounded pieces."""
    chunk: list[str] = []
    try:
        for line in lines:
            chunk.append(line)
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
    "The results, one per item in input order (streamed, finished or not): JSON lines, or CSV",
    response=BatchResult,
    media_type=NDJSON,
    text_media_types=(MEDIA_TYPES[ExportFormat.CSV],),
    query=ResultsQuery,
    errors=(404,),
)
def results(bid: str) -> Response:
    fmt = ResultsQuery.read().format
    store = services().batches
    schema = store.config(bid).conversation.response_schema  # 404 before the stream starts
    chosen = fmt or ExportFormat.JSONL
    lines = export_lines(store.results(bid), chosen, schema=schema)
    response = Response(chunked(lines, bid), mimetype=MEDIA_TYPES[chosen])
    response.headers["X-Accel-Buffering"] = "no"
    if fmt is not None:
        name = f"batch-{bid}.{fmt.value}"  # an id: letters, digits, _ . -
        response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def blueprint() -> Blueprint:
    bp = Blueprint("batches", __name__)
    bp.add_url_rule("/batches", view_func=create, methods=["POST"])
    bp.add_url_rule("/batches", endpoint="list", view_func=list_, methods=["GET"])
    bp.add_url_rule("/batches/<id:bid>", view_func=get, methods=["GET"])
    bp.add_url_rule("/batches/<id:bid>/cancel", view_func=cancel, methods=["POST"])
    bp.add_url_rule("/batches/<id:bid>/retry", view_func=retry, methods=["POST"])
    bp.add_url_rule("/batches/<id:bid>/rerun", view_func=rerun, methods=["POST"])
    bp.add_url_rule("/batches/<id:bid>/results", view_func=results, methods=["GET"])
    return bp

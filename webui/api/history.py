"""/conversations/<id>/history: retained steps a page at a time."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.models.users import Role
from webui.api.models import HistoryResponse
from webui.api.replies import reply
from webui.auth import requires
from webui.operations import operation
from webui.queries import HistoryQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
@operation(
    "Retained steps, with turn starts and compactions",
    response=HistoryResponse,
    query=HistoryQuery,
    errors=(400, 404),
)
def history(cid: str) -> Response:
    svc = services()
    svc.store.get(cid)  # 404 for an unknown conversation, not an empty page
    query = HistoryQuery.read()
    page = svc.history(cid).page(query.offset, query.limit)
    return reply(
        HistoryResponse(
            conversation_id=cid,
            offset=page.offset,
            limit=query.limit,
            total=page.total,
            trimmed=page.trimmed,
            steps=page.steps,
            turn_start_indices=page.turn_start_indices,
            compaction_indices=page.compaction_indices,
        )
    )


def blueprint() -> Blueprint:
    bp = Blueprint("history", __name__)
    bp.add_url_rule("/conversations/<id:cid>/history", view_func=history, methods=["GET"])
    return bp

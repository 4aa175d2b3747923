"""/conversations/<id>/history: retained steps a page at a time."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.users import Role
from webui.api.models import HistoryResponse
from webui.api.replies import reply
from webui.auth import requires
from webui.operations import OFFSET, integer, operation
from webui.services import services

__all__ = ["blueprint"]

HISTORY_LIMIT = integer("limit", "Page size.", default=100, low=1, high=1000)


@requires(Role.VIEWER)
@operation(
    "Retained steps, with turn starts and compactions",
    response=HistoryResponse,
    params=(OFFSET, HISTORY_LIMIT),
    errors=(400, 404),
)
def history(cid: str) -> Response:
    svc = services()
    svc.store.get(cid)  # 404 for an unknown conversation, not an empty page
    offset, limit = OFFSET.integer(), HISTORY_LIMIT.integer()
    page = svc.history(cid).page(offset, limit)
    return reply(
        HistoryResponse(
            conversation_id=cid,
            offset=page.offset,
            limit=limit,
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

"""/audit: every resolution of a notification, newest first."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.users import Role
from webui.api.models import AuditList
from webui.api.replies import reply
from webui.audit import read_audit
from webui.auth import requires
from webui.operations import Param, integer, operation
from webui.params import stream_id_param
from webui.services import services
from webui.stream_ids import STREAM_ID_PATTERN

__all__ = ["BEFORE", "blueprint"]

BEFORE = Param(
    "before",
    {"type": "string", "pattern": STREAM_ID_PATTERN},
    "Only entries older than this id (`next_before` of the previous page).",
)
AUDIT_LIMIT = integer("limit", "Page size.", default=100, low=1, high=500)


@requires(Role.VIEWER)
@operation(
    "Resolutions: who, when, what, arguments before and after, reason; newest first",
    response=AuditList,
    params=(BEFORE, AUDIT_LIMIT),
    errors=(400,),
)
def audit() -> Response:
    page = read_audit(
        services().notifications,
        before=stream_id_param("before"),
        limit=AUDIT_LIMIT.integer(),
    )
    return reply(page)


def blueprint() -> Blueprint:
    bp = Blueprint("audit", __name__)
    bp.add_url_rule("/audit", view_func=audit, methods=["GET"])
    return bp

"""/audit: every resolution of a notification, newest first."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.models.users import Role
from webui.api.models import AuditList
from webui.api.replies import reply
from webui.audit import read_audit
from webui.auth import requires
from webui.operations import operation
from webui.queries import AuditQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
@operation(
    "Resolutions: who, when, what, arguments before and after, reason; newest first",
    response=AuditList,
    query=AuditQuery,
    errors=(400,),
)
def audit() -> Response:
    query = AuditQuery.read()
    return reply(
        read_audit(
            services().notifications, before=query.before, limit=query.limit, where=query.where()
        )
    )


def blueprint() -> Blueprint:
    bp = Blueprint("audit", __name__)
    bp.add_url_rule("/audit", view_func=audit, methods=["GET"])
    return bp

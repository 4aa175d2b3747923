"""The audit log: every resolution, newest first, with the arguments before and after."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from shared.models.users import Role
from webui.audit import AuditDecision, arguments_diff, read_audit
from webui.auth import requires
from webui.queries import AuditPageQuery
from webui.services import services

__all__ = ["blueprint"]

PAGE_SIZE = 50


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    query = AuditPageQuery.read()
    page = read_audit(
        services().notifications, before=query.before, limit=PAGE_SIZE, where=query.where()
    )
    return render_template(
        "audit.html",
        page=page,
        before=query.before,
        query=query,
        decisions=list(AuditDecision),
        diff=arguments_diff,
    )


def blueprint() -> Blueprint:
    bp = Blueprint("audit", __name__)
    bp.add_url_rule("/audit", view_func=index)
    return bp

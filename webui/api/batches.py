"""/batches: a placeholder until the batch issue lands; every request answers 501."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.users import Role
from webui.api.models import ErrorResponse
from webui.api.operations import operation
from webui.auth import requires
from webui.errors import HttpProblem

__all__ = ["blueprint"]

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@requires(Role.VIEWER)
@operation("Batches: not available yet", response=ErrorResponse, status=501)
def not_yet(rest: str = "") -> Response:
    raise HttpProblem(501, "not_implemented", "batches arrive with the batch issue")


def blueprint() -> Blueprint:
    bp = Blueprint("batches", __name__)
    bp.add_url_rule("/batches", view_func=not_yet, methods=_METHODS)
    bp.add_url_rule("/batches/<path:rest>", endpoint="rest", view_func=not_yet, methods=_METHODS)
    return bp

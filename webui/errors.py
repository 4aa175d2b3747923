"""Every error becomes one response shape here, and nowhere else.

The JSON API answers ``{"error": {"code": ..., "message": ...}}``; pages answer an
HTML error page, and a page request without a signed-in user goes to sign-in.
Signoff's own errors map to statuses by class (the first match in `_STATUSES`).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify, render_template, request, url_for
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from shared.errors import (
    Conflict,
    ConversationClosed,
    CorruptRecord,
    Forbidden,
    InvalidInput,
    NotConfigured,
    NotFound,
    PathRefused,
    PayloadTooLarge,
    ProviderError,
    SignoffError,
    StorageError,
)
from webui.body_limit import LIMIT_KEY, too_large

__all__ = ["HttpProblem", "init_app", "invalid_body"]

log = logging.getLogger(__name__)

RETRY_AFTER_S = "1"

_STATUSES: tuple[tuple[type[SignoffError], int], ...] = (
    (PathRefused, 403),  # a workspace path leading out, or naming no readable file
    (Forbidden, 403),  # the caller's role or ownership
    (PayloadTooLarge, 413),
    (InvalidInput, 422),
    (NotFound, 404),
    (NotConfigured, 404),  # e.g. no workspace roots: there is nothing to read
    (Conflict, 409),
    (ConversationClosed, 409),
    (CorruptRecord, 500),  # the record is wrong, not Redis: retrying will not help
    (StorageError, 503),
    (ProviderError, 502),
)


class HttpProblem(Exception):
    """Raised by the web layer for an HTTP error with a machine-readable code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}


def invalid_body(exc: ValidationError) -> HttpProblem:
    """A request body that failed validation: 400 when it is not JSON at all, else 422."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    if any(error["type"] == "json_invalid" for error in errors):
        return HttpProblem(400, "malformed_json", f"request body is not valid JSON: {exc}")
    details = [{"loc": list(e["loc"]), "message": e["msg"]} for e in errors]
    first = details[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return HttpProblem(422, "invalid_input", f"{where}: {first['message']}", details=details)


def _wants_json() -> bool:
    """The API, the MCP endpoint and /metrics answer JSON; pages answer HTML (or go to
    sign-in)."""
    return request.path.startswith("/api/") or request.path in ("/mcp", "/metrics")


def _respond(problem: HttpProblem) -> Response:
    if _wants_json():
        body: dict[str, Any] = {"code": problem.code, "message": problem.message}
        if problem.details:
            body["details"] = problem.details
        response = jsonify(error=body)
    elif problem.status == 401:
        target = url_for("pages.session.sign_in", next=request.full_path.rstrip("?"))
        return Response(status=302, headers={"Location": target})
    else:
        response = Response(render_template("error.html", problem=problem))
    response.status_code = problem.status
    response.headers.update(problem.headers)
    return response


def _from_signoff(exc: SignoffError) -> Response:
    status = next((code for cls, code in _STATUSES if isinstance(exc, cls)), 500)
    if status >= 500:
        log.error("%s answering %s %s: %s", exc.code, request.method, request.path, exc)
    # Redis unreachable or every connection busy: transient, so say when to come back.
    headers = {"Retry-After": RETRY_AFTER_S} if status == 503 else None
    fields = exc.fields if isinstance(exc, Forbidden) else ()
    details = [{"field": field} for field in fields] or None
    return _respond(HttpProblem(status, exc.code, exc.message, details=details, headers=headers))


def _from_http(exc: HTTPException) -> Response:
    status = exc.code or 500
    code = "payload_too_large" if status == 413 else exc.name.lower().replace(" ", "_")
    headers = {k: v for k, v in exc.get_headers() if k.lower() == "allow"}
    message = exc.description or exc.name
    if status == 413 and message == RequestEntityTooLarge.description:  # werkzeug's own cap
        message = too_large(request.environ.get(LIMIT_KEY) or request.max_content_length or 0)
    return _respond(HttpProblem(status, code, message, headers=headers))


def _from_unexpected(exc: Exception) -> Response:
    log.exception("unexpected error answering %s %s", request.method, request.path)
    return _respond(HttpProblem(500, "internal_error", "internal error; see the server log"))


def init_app(app: Flask) -> None:
    app.register_error_handler(HttpProblem, _respond)
    app.register_error_handler(SignoffError, _from_signoff)
    app.register_error_handler(HTTPException, _from_http)
    app.register_error_handler(Exception, _from_unexpected)

"""The OpenAPI 3.1 document, generated from the routes and what each view declares.

Paths come from the app's URL map, so a route cannot be served yet missing here
unless its view declares no `Operation` (a test guards that). Schemas come from
the pydantic models of the request and response bodies.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from shared.keys import ID_PATTERN
from shared.users import Role
from webui.api.models import ErrorResponse
from webui.api.operations import Operation, operation, operation_of
from webui.auth import required_role, requires

__all__ = ["PREFIX", "blueprint", "build_document"]

PREFIX = "/api/v1"
_REF = "#/components/schemas/{model}"
_PATH_ARG = re.compile(r"<(?:([^:<>]+):)?([^<>]+)>")
# A path argument's schema by its converter: `id` takes what `shared.keys.check_id` takes.
_CONVERTED = {"id": {"type": "string", "pattern": f"^{ID_PATTERN}$"}}
_STRING = {"type": "string"}
_ERRORS = {
    400: "Malformed JSON or a bad parameter",
    401: "No or invalid credentials",
    403: "The caller's role does not allow this, or the CSRF token is missing",
    404: "No such conversation, turn, notification or batch",
    409: "Conflict: the state moved on (e.g. a bulk count changed), or it is closed/cancelled",
    413: "The prompt or the request body is too large",
    422: "The body is valid JSON but not a valid request",
    503: "Redis is unreachable",
}
_MULTIPART = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "media": {
            "type": "array",
            "items": {"type": "string", "contentMediaType": "application/octet-stream"},
        },
    },
}


PathArgs = dict[str, dict[str, Any]]


def _path_args(rule: str) -> PathArgs:
    """Each argument of a URL rule with its schema, in name order."""
    found = {m[2]: _CONVERTED.get(m[1] or "", _STRING) for m in _PATH_ARG.finditer(rule)}
    return dict(sorted(found.items()))


def _operations(app: Flask) -> list[tuple[str, str, PathArgs, Operation, Role | None]]:
    found = []
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        declared = operation_of(view)
        if not rule.rule.startswith(PREFIX) or declared is None:
            continue
        path = _PATH_ARG.sub(r"{\2}", rule.rule)
        arguments = _path_args(rule.rule)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((path, method.lower(), arguments, declared, required_role(view)))
    return found


def _schemas(ops: list[Operation]) -> tuple[dict[Any, Any], dict[str, Any]]:
    """JSON schemas of every body, keyed by (model, mode), and their shared definitions."""
    wanted: set[tuple[type[BaseModel], JsonSchemaMode]] = {(ErrorResponse, "serialization")}
    for op in ops:
        if op.request is not None:
            wanted.add((op.request, "validation"))
        if op.response is not None:
            wanted.add((op.response, "serialization"))
    ordered = sorted(wanted, key=lambda pair: (pair[0].__name__, pair[1]))
    refs, defs = models_json_schema(ordered, ref_template=_REF)
    return dict(refs), defs.get("$defs", {})


def _request_body(op: Operation, refs: dict[Any, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": refs[(op.request, "validation")]}}
    if op.multipart:
        content["multipart/form-data"] = {"schema": _MULTIPART}
    return {"required": True, "content": content}


def _responses(op: Operation, refs: dict[Any, Any], role: Role | None) -> dict[str, Any]:
    if op.stream:
        ok: dict[str, Any] = {
            "description": "An SSE stream: id = Redis stream id, event = kind, data = event JSON",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    else:
        schema = {"type": "object"} if op.response is None else refs[(op.response, "serialization")]
        ok = {"description": op.summary, "content": {op.media_type: {"schema": schema}}}
    responses: dict[str, Any] = {str(op.status): ok}
    error = {"application/json": {"schema": refs[(ErrorResponse, "serialization")]}}
    for status in sorted({*op.errors, *((401, 403) if role is not None else ())}):
        responses[str(status)] = {"description": _ERRORS.get(status, "Error"), "content": error}
    return responses


def _operation_object(
    op: Operation, arguments: PathArgs, role: Role | None, refs: dict[Any, Any]
) -> dict[str, Any]:
    params = [
        {"name": name, "in": "path", "required": True, "schema": schema}
        for name, schema in arguments.items()
    ]
    params += [
        {
            "name": p.name,
            "in": p.located,
            "required": False,
            "schema": p.schema,
            "description": p.description,
        }
        for p in op.params
    ]
    body: dict[str, Any] = {"summary": op.summary, "responses": _responses(op, refs, role)}
    if params:
        body["parameters"] = params
    if op.request is not None:
        body["requestBody"] = _request_body(op, refs)
    if role is not None:
        body["security"] = [{"bearer": []}, {"session": []}]
        body["x-required-role"] = role.value
    return body


def build_document(app: Flask) -> dict[str, Any]:
    found = _operations(app)
    refs, defs = _schemas([op for *_, op, _ in found])
    paths: dict[str, dict[str, Any]] = {}
    for path, method, arguments, op, role in found:
        paths.setdefault(path, {})[method] = _operation_object(op, arguments, role, refs)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Signoff API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {"type": "apiKey", "in": "cookie", "name": "signoff_session"},
            },
        },
    }


@requires(Role.VIEWER)
@operation("This document")
def document() -> Response:
    return jsonify(build_document(current_app))


def blueprint() -> Blueprint:
    bp = Blueprint("openapi", __name__)
    bp.add_url_rule("/openapi.json", view_func=document)
    return bp

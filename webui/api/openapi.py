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
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from shared.models.users import Role
from shared.settings import Settings
from webui.api import prompt_body
from webui.api.models import ErrorResponse
from webui.auth import required_role, requires
from webui.converters import CONVERTERS
from webui.operations import Operation, operation, operation_of
from webui.services import EXTENSION

__all__ = ["PREFIX", "blueprint", "build_document"]

PREFIX = "/api/v1"
_REF = "#/components/schemas/{model}"
_PATH_ARG = re.compile(r"<(?:([^:<>]+):)?([^<>]+)>")
# A path argument's schema by its converter (werkzeug's default takes any text without "/").
_CONVERTED = {name: converter.schema for name, converter in CONVERTERS.items()}
_STRING = {"type": "string"}
# One event of a text/event-stream answer (as OpenAPI 3.2 reads its schema: each event).
_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "id": {"type": "string", "description": "The Redis stream id: send it as Last-Event-ID"},
        "event": {"type": "string", "description": "The event's kind"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "The event, as JSON",
        },
        "retry": {"type": "integer", "minimum": 0},
    },
}
_ERRORS = {
    400: "Malformed JSON or a bad parameter",
    401: "No or invalid credentials",
    403: "The caller's role does not allow this, the CSRF token is missing, or a workspace path "
    "is refused (it leads outside the roots or names no readable file)",
    404: "No such conversation, turn, notification, batch or workspace file (or no workspace)",
    409: "Conflict: the state moved on (e.g. a bulk count changed), or it is closed/cancelled",
    413: "The prompt or the request body is too large",
    422: "The body is valid JSON but not a valid request",
    503: "Redis is unreachable",
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


class _ExactSchema(GenerateJsonSchema):
    """Schemas that say what pydantic rejects, not only what it reads."""

    def dict_schema(self, schema: core_schema.DictSchema) -> dict[str, Any]:
        # Keys with a pattern: a key that does not match is an error, not an extra.
        found = super().dict_schema(schema)
        if "patternProperties" in found:
            found.setdefault("additionalProperties", False)
        return found


def _require_tags(node: Any, defs: dict[str, Any]) -> None:
    """A discriminated union needs its tag in every member, even one with a default."""
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        _require_tags(child, defs)
    if not isinstance(node, dict) or "discriminator" not in node:
        return
    tag = node["discriminator"]["propertyName"]
    for ref in node["discriminator"].get("mapping", {}).values():
        required = defs[ref.rsplit("/", 1)[-1]].setdefault("required", [])
        if tag not in required:
            required.insert(0, tag)


def _schemas(ops: list[Operation]) -> tuple[dict[Any, Any], dict[str, Any]]:
    """JSON schemas of every body, keyed by (model, mode), and their shared definitions."""
    wanted: set[tuple[type[BaseModel], JsonSchemaMode]] = {(ErrorResponse, "serialization")}
    for op in ops:
        if op.request is not None:
            wanted.add((op.request, "validation"))
        if op.response is not None:
            wanted.add((op.response, "serialization"))
    ordered = sorted(wanted, key=lambda pair: (pair[0].__name__, pair[1]))
    refs, defs = models_json_schema(ordered, ref_template=_REF, schema_generator=_ExactSchema)
    found = defs.get("$defs", {})
    _require_tags(found, found)
    return dict(refs), found


def _request_body(op: Operation, refs: dict[Any, Any], settings: Settings) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": refs[(op.request, "validation")]}}
    if op.multipart:
        content["multipart/form-data"] = prompt_body.multipart(settings)
    return {"required": True, "content": content}


def _apply_limits(defs: dict[str, Any], settings: Settings) -> None:
    """The keywords settings decide (prompt sizes, media types), into the schemas they belong to."""
    for name, properties in prompt_body.limits(settings).items():
        if name in defs:
            for prop, keywords in properties.items():
                defs[name]["properties"][prop].update(keywords)


def _responses(op: Operation, refs: dict[Any, Any], role: Role | None) -> dict[str, Any]:
    if op.stream:
        ok: dict[str, Any] = {
            "description": "An SSE stream: id = Redis stream id, event = kind, data = event JSON",
            "content": {"text/event-stream": {"schema": _EVENT}},
        }
    else:
        schema = {"type": "object"} if op.response is None else refs[(op.response, "serialization")]
        ok = {"description": op.summary, "content": {op.media_type: {"schema": schema}}}
        ok["content"].update({media: {"schema": _STRING} for media in op.text_media_types})
    responses: dict[str, Any] = {str(op.status): ok}
    error = {"application/json": {"schema": refs[(ErrorResponse, "serialization")]}}
    # A body that is not JSON (`json_body`) and a bad parameter are 400s, whatever the view lists.
    malformed = op.query is not None or op.request is not None
    implied = {*((401, 403) if role is not None else ()), *((400,) if malformed else ())}
    for status in sorted({*op.errors, *implied}):
        responses[str(status)] = {"description": _ERRORS.get(status, "Error"), "content": error}
    return responses


def _operation_object(
    op: Operation, arguments: PathArgs, role: Role | None, refs: dict[Any, Any], settings: Settings
) -> dict[str, Any]:
    params = [
        {"name": name, "in": "path", "required": True, "schema": schema}
        for name, schema in arguments.items()
    ]
    params += op.query.parameters() if op.query is not None else []
    body: dict[str, Any] = {"summary": op.summary, "responses": _responses(op, refs, role)}
    if op.description:
        body["description"] = op.description
    if params:
        body["parameters"] = params
    if op.request is not None:
        body["requestBody"] = _request_body(op, refs, settings)
    if role is not None:
        body["security"] = [{"bearer": []}, {"session": []}]
        body["x-required-role"] = role.value
    return body


def build_document(app: Flask) -> dict[str, Any]:
    settings: Settings = app.extensions[EXTENSION].settings
    found = _operations(app)
    refs, defs = _schemas([op for *_, op, _ in found])
    _apply_limits(defs, settings)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, arguments, op, role in found:
        operation_object = _operation_object(op, arguments, role, refs, settings)
        paths.setdefault(path, {})[method] = operation_object
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

"""Answering with a pydantic model as JSON."""

from __future__ import annotations

from flask import Response
from pydantic import BaseModel

__all__ = ["reply"]


def reply(body: BaseModel, status: int = 200, *, headers: dict[str, str] | None = None) -> Response:
    """`body` as JSON (pydantic's own encoding: enums as values, bytes as base64)."""
    response = Response(body.model_dump_json(), status=status, mimetype="application/json")
    response.headers.update(headers or {})
    return response

"""Answering with a pydantic model as JSON, and a creation with where to find what it made."""

from __future__ import annotations

from typing import Any

from flask import Response, url_for
from pydantic import BaseModel

__all__ = ["created", "reply"]


def reply(body: BaseModel, status: int = 200, *, headers: dict[str, str] | None = None) -> Response:
    """`body` as JSON (pydantic's own encoding: enums as values, bytes as base64)."""
    response = Response(body.model_dump_json(), status=status, mimetype="application/json")
    response.headers.update(headers or {})
    return response


def created(body: BaseModel, endpoint: str, **values: Any) -> Response:
    """A 201 with what was made, and its Location: the URL of `endpoint` with `values`."""
    return reply(body, 201, headers={"Location": url_for(endpoint, **values)})

"""Query parameters and request bodies, read strictly: a bad one is a 400 or 422 naming it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from shared.errors import InvalidInput
from webui.errors import HttpProblem, invalid_body
from webui.sse import parse_stream_id
from webui.usage_report import day_range

__all__ = [
    "date_param",
    "day_range_params",
    "enum_param",
    "int_param",
    "json_body",
    "last_event_id",
    "stream_id_param",
]

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", bound=Enum)


def _bad(name: str, message: str) -> HttpProblem:
    return HttpProblem(400, "bad_parameter", f"query parameter {name!r} {message}")


def int_param(name: str, default: int, *, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, f"must be an integer, got {raw[:30]!r}") from None
    if not low <= value <= high:
        raise _bad(name, f"must be between {low} and {high}, got {value}")
    return value


def enum_param(name: str, kind: type[E]) -> E | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in kind)
        raise _bad(name, f"must be one of {allowed}, got {raw[:30]!r}") from None


def date_param(name: str, default: date) -> date:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise _bad(name, f"must be a date like 2025-01-31, got {raw[:30]!r}") from None


def day_range_params(default_days: int) -> tuple[date, date]:
    """``?start=&end=`` (UTC days, inclusive); by default the last `default_days` days."""
    end = date_param("end", datetime.now(UTC).date())
    start = date_param("start", end - timedelta(days=default_days - 1))
    try:
        day_range(start, end)
    except InvalidInput as exc:
        raise HttpProblem(400, "bad_parameter", exc.message) from None
    return start, end


def last_event_id() -> str | None:
    """The Last-Event-ID header (EventSource reconnects), else ``?last_event_id=``."""
    raw = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    if not raw:
        return None
    try:
        parse_stream_id(raw)
    except InvalidInput as exc:
        raise HttpProblem(400, "bad_parameter", exc.message) from None
    return "0-0" if raw == "0" else raw


def stream_id_param(name: str) -> str | None:
    """A Redis stream id like ``1700000000000-0`` (an entry of the audit log, say)."""
    raw = request.args.get(name)
    if not raw:
        return None
    try:
        parse_stream_id(raw)
    except InvalidInput:
        raise _bad(name, f"must be an id like 1700000000000-0, got {raw[:30]!r}") from None
    return raw


def json_body(model: type[M]) -> M:
    """The request's JSON body as `model` (400: not JSON; 422: not valid)."""
    if not request.is_json:
        raise HttpProblem(
            400, "expected_json", "send a JSON body with Content-Type: application/json"
        )
    try:
        return model.model_validate_json(request.get_data() or b"")
    except ValidationError as exc:
        raise invalid_body(exc) from None

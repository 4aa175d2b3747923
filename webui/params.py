"""Query parameters and request bodies, read strictly: a bad one is a 400 or 422 naming it."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from shared.errors import InvalidInput
from webui.errors import HttpProblem, invalid_body
from webui.sse import parse_stream_id
from webui.usage_report import EARLIEST_DAY, MAX_DAYS

__all__ = [
    "date_param",
    "day_range_params",
    "enum_param",
    "int_param",
    "json_body",
    "last_event_id",
    "number_value",
    "stream_id_param",
]

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", bound=Enum)

# Matched whole, ASCII only: Python's int() and float() also take "1_000", " 5", "1e3", "inf"
# and digits of other scripts.
_INTEGER = re.compile(r"-?[0-9]{1,30}")
_NUMBER = re.compile(r"-?[0-9]{1,19}(?:\.[0-9]{1,19})?")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _bad(name: str, message: str) -> HttpProblem:
    return _bad_value(f"query parameter {name!r}", message)


def _bad_value(name: str, message: str) -> HttpProblem:
    return HttpProblem(400, "bad_parameter", f"{name} {message}")


def int_param(name: str, default: int, *, low: int, high: int) -> int:
    """An integer in ``low..high`` written in plain ASCII digits (no ``1e3``, no ``1_000``)."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    value = int(raw) if _INTEGER.fullmatch(raw) else None
    if value is None or not low <= value <= high:
        raise _bad(name, f"must be an integer from {low} to {high}, got {raw[:30]!r}")
    return value


def number_value(name: str, raw: str, *, low: float, high: float) -> float:
    """A finite number in ``low..high`` (not `nan`, `inf`, ``1e999``), from a query or a form."""
    value = float(raw) if _NUMBER.fullmatch(raw) else math.nan
    if not math.isfinite(value):
        raise _bad_value(name, f"must be a number like 60 or 2.5, got {raw[:30]!r}")
    if not low <= value <= high:
        raise _bad_value(name, f"must be between {low:g} and {high:g}, got {raw[:30]}")
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
    """A UTC day like 2025-01-31, between EARLIEST_DAY and a year from today."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        day = date.fromisoformat(raw) if _DAY.fullmatch(raw) else None
    except ValueError:
        day = None
    if day is None:
        raise _bad(name, f"must be a date like 2025-01-31, got {raw[:30]!r}")
    latest = _today() + timedelta(days=MAX_DAYS)
    if not EARLIEST_DAY <= day <= latest:
        raise _bad(name, f"must be between {EARLIEST_DAY} and {latest}, got {raw}")
    return day


def day_range_params(default_days: int) -> tuple[date, date]:
    """``?start=&end=`` (UTC days, inclusive); by default the last `default_days` days."""
    end = date_param("end", _today())
    start = date_param("start", max(end - timedelta(days=default_days - 1), EARLIEST_DAY))
    if end < start:
        raise _bad("end", f"must not be before start {start}, got {end}")
    days = (end - start).days + 1
    if days > MAX_DAYS:
        raise _bad("start", f"and 'end' may span at most {MAX_DAYS} days; they span {days}")
    return start, end


def _today() -> date:
    return datetime.now(UTC).date()


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

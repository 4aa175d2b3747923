"""Query parameters and request bodies, read strictly: a bad one is a 400 or 422 naming it."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from webui.errors import HttpProblem, invalid_body
from webui.stream_ids import STREAM_ID

__all__ = [
    "MAX_OFFSET",
    "date_param",
    "day_range_params",
    "enum_param",
    "int_param",
    "json_body",
    "last_event_id",
    "number_value",
    "required_param",
    "stream_id_param",
]

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", bound=Enum)

MAX_OFFSET = 10**9

# Matched whole, ASCII only: Python's int() and float() also take "1_000", " 5", "inf", "0x10"
# and digits of other scripts. A number is a JSON number (``2.5``, ``1e-05``).
_INTEGER = re.compile(r"-?[0-9]{1,30}")
_NUMBER = re.compile(r"-?[0-9]{1,30}(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,4})?")
_STREAM_ID = re.compile(STREAM_ID)
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


def required_param(name: str) -> str:
    """A query parameter that must be given and not empty."""
    raw = request.args.get(name)
    if not raw:
        raise _bad(name, "is required")
    return raw


def number_value(name: str, raw: str, *, low: float, high: float) -> float:
    """A JSON number in ``low..high`` (not `nan`, `inf`, ``1e999``), from a query or a form."""
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
    """A day like 2025-01-31 (any year from 0001 to 9999)."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    day = _day(raw)
    if day is None:
        raise _bad(name, f"must be a date like 2025-01-31, got {raw[:30]!r}")
    return day


def _day(raw: str) -> date | None:
    if not _DAY.fullmatch(raw):
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:  # 2025-02-30
        return None


def day_range_params(default_days: int) -> tuple[date, date]:
    """``?start=&end=`` (UTC days, inclusive); by default the `default_days` days up to today.

    Any two days are a range; `webui.usage_report.covered_days` says which of its days
    a report reads.
    """
    end = date_param("end", _today())
    start = date_param("start", _days_before(end, default_days - 1))
    return start, end


def _days_before(day: date, days: int) -> date:
    return day - timedelta(days=days) if day.toordinal() > days else date.min


def _today() -> date:
    return datetime.now(UTC).date()


def last_event_id() -> str | None:
    """The Last-Event-ID header (EventSource reconnects), else ``?last_event_id=``; empty: none."""
    raw = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    if not raw:
        return None
    if not _STREAM_ID.fullmatch(raw):
        message = f"event id {raw[:50]!r} is not a Redis stream id like 1700000000000-0"
        raise HttpProblem(400, "bad_parameter", message)
    return "0-0" if raw == "0" else raw


def stream_id_param(name: str) -> str | None:
    """A Redis stream id like ``1700000000000-0`` (an entry of the audit log, say)."""
    raw = request.args.get(name)
    if not raw:
        return None
    if not _STREAM_ID.fullmatch(raw):
        raise _bad(name, f"must be an id like 1700000000000-0, got {raw[:30]!r}")
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

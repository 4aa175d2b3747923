"""What each API view declares about itself for the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from webui.params import MAX_OFFSET, int_param

__all__ = ["LIMIT", "OFFSET", "Operation", "Param", "integer", "operation", "operation_of"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Param:
    """A query or header parameter; the view reads it as the schema declares it."""

    name: str
    schema: dict[str, Any]
    description: str
    located: str = "query"
    # ``?name=`` reads as unset (HTML forms send empty fields): `allowEmptyValue` in the document.
    allow_empty: bool = True
    required: bool = False  # absent (or empty, unless `allow_empty`) is a 400 naming it

    def integer(self) -> int:
        """This integer's value, within the bounds the document declares (400 outside them)."""
        schema = self.schema
        return int_param(
            self.name, schema["default"], low=schema["minimum"], high=schema["maximum"]
        )


@dataclass(frozen=True)
class Operation:
    summary: str
    response: type[BaseModel] | None = None
    status: int = 200
    request: type[BaseModel] | None = None
    multipart: bool = False  # also accepts multipart/form-data (text + media files)
    stream: bool = False  # answers text/event-stream
    media_type: str = "application/json"  # of the answer (for NDJSON, `response` is one line)
    errors: tuple[int, ...] = ()
    params: tuple[Param, ...] = field(default_factory=tuple)
    description: str = ""  # more than the summary: rules a reader needs


def operation(summary: str, **details: Any) -> Callable[[F], F]:
    """Attaches an Operation to a view."""

    def mark(view: F) -> F:
        view.openapi = Operation(summary, **details)  # type: ignore[attr-defined]
        return view

    return mark


def operation_of(view: Callable[..., Any]) -> Operation | None:
    found: Operation | None = getattr(view, "openapi", None)
    return found


def integer(name: str, description: str, *, default: int, low: int, high: int) -> Param:
    """An integer query parameter from `low` to `high`; `Param.integer` reads it."""
    schema = {"type": "integer", "minimum": low, "maximum": high, "default": default}
    return Param(name, schema, description)


OFFSET = integer("offset", "Items to skip.", default=0, low=0, high=MAX_OFFSET)
LIMIT = integer("limit", "Page size.", default=50, low=1, high=200)

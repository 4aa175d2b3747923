"""What each API view declares about itself for the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["Operation", "Param", "operation", "operation_of"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Param:
    """A query or header parameter."""

    name: str
    schema: dict[str, Any]
    description: str
    located: str = "query"


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


def operation(summary: str, **details: Any) -> Callable[[F], F]:
    """Attaches an Operation to a view."""

    def mark(view: F) -> F:
        view.openapi = Operation(summary, **details)  # type: ignore[attr-defined]
        return view

    return mark


def operation_of(view: Callable[..., Any]) -> Operation | None:
    found: Operation | None = getattr(view, "openapi", None)
    return found


OFFSET = Param("offset", {"type": "integer", "minimum": 0, "default": 0}, "Items to skip.")
LIMIT = Param(
    "limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, "Page size."
)

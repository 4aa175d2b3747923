"""What each API view declares about itself for the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from webui.params import QueryModel

__all__ = ["Operation", "operation", "operation_of"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Operation:
    summary: str
    response: type[BaseModel] | None = None
    status: int = 200
    request: type[BaseModel] | None = None
    multipart: bool = False  # also accepts multipart/form-data (text + media files)
    stream: bool = False  # answers text/event-stream
    media_type: str = "application/json"  # of the answer (for NDJSON, `response` is one line)
    text_media_types: tuple[str, ...] = ()  # other media types it may answer in, as text
    errors: tuple[int, ...] = ()
    query: type[QueryModel] | None = None  # its parameters, which the view reads with `read()`
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

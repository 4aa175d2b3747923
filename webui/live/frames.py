"""The Server-Sent Events wire format. Pure: no I/O."""

from __future__ import annotations

from shared.models.events import EventBase

__all__ = ["comment", "event_frame", "retry_frame"]


def event_frame(event: EventBase) -> str:
    """One SSE message: ``id`` is the stream id, ``event`` the kind, ``data`` the event JSON.
    A live-only event has no stream id and no ``id`` line: the reader's Last-Event-ID stays."""
    data = event.model_dump_json(exclude_none=True)
    kind = getattr(event, "kind", "message")
    if not event.id:
        return f"event: {kind}\ndata: {data}\n\n"
    return f"id: {event.id}\nevent: {kind}\ndata: {data}\n\n"


def comment(text: str) -> str:
    """A comment line: ignored by EventSource, keeps proxies and idle clients honest."""
    return f": {text}\n\n"


def retry_frame(milliseconds: int) -> str:
    """Tells EventSource how long to wait before reconnecting."""
    return f"retry: {milliseconds}\n\n"

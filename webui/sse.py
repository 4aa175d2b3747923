"""The Server-Sent Events wire format, and ordering of Redis stream ids. Pure: no I/O."""

from __future__ import annotations

import re

from shared.errors import InvalidInput
from shared.events import EventBase

__all__ = ["comment", "event_frame", "is_after", "parse_stream_id", "retry_frame"]

# Matched whole (`$` would allow a final "\n"), ASCII digits only, each part a 64-bit number.
_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_U64_MAX = 2**64 - 1


def event_frame(event: EventBase) -> str:
    """One SSE message: ``id`` is the stream id, ``event`` the kind, ``data`` the event JSON."""
    data = event.model_dump_json(exclude_none=True)
    return f"id: {event.id}\nevent: {getattr(event, 'kind', 'message')}\ndata: {data}\n\n"


def comment(text: str) -> str:
    """A comment line: ignored by EventSource, keeps proxies and idle clients honest."""
    return f": {text}\n\n"


def retry_frame(milliseconds: int) -> str:
    """Tells EventSource how long to wait before reconnecting."""
    return f"retry: {milliseconds}\n\n"


def parse_stream_id(value: str) -> tuple[int, int]:
    """A Redis stream id as (milliseconds, sequence); ``0`` alone means the start."""
    if value == "0":
        return (0, 0)
    match = _STREAM_ID.fullmatch(value)
    parts = (0, 0) if match is None else (int(match[1]), int(match[2]))
    if match is None or max(parts) > _U64_MAX:
        raise InvalidInput(f"event id {value[:50]!r} is not a Redis stream id like 1700000000000-0")
    return parts


def is_after(stream_id: str, reference: str) -> bool:
    """Whether `stream_id` comes strictly after `reference` (numerically, not as text)."""
    return parse_stream_id(stream_id) > parse_stream_id(reference)

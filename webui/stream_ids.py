"""Redis stream ids: the pattern a parameter takes, parsing, and their order. Pure: no I/O."""

from __future__ import annotations

import re

from shared.errors import InvalidInput

__all__ = ["STREAM_ID", "STREAM_ID_PATTERN", "is_after", "parse_stream_id"]

# A Redis stream id as a parameter takes it (``0`` alone means the start); 19 digits a part
# keep every value below 2**64, so the pattern alone says what is accepted.
STREAM_ID = r"0|[0-9]{1,19}-[0-9]{1,19}"
STREAM_ID_PATTERN = f"^(?:{STREAM_ID})$"

# Matched whole (`$` would allow a final "\n"), ASCII digits only, each part a 64-bit number.
_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_U64_MAX = 2**64 - 1


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

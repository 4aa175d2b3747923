"""A turn's trace outlives the process that started it: its ids are chosen when the turn
starts, kept in the turn's checkpoint, and its root span is recorded with those ids by
whichever worker ends the turn.

The SDK chooses a new span's ids from its id generator; `TurnIds` hands it the stored
ones while `preset` is in force, and random ones otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

__all__ = ["TurnIds", "new_ids", "preset"]

_PRESET: ContextVar[tuple[int, int] | None] = ContextVar("signoff_trace_ids", default=None)


def new_ids() -> tuple[int, int]:
    """A trace id and a root span id, as the SDK's random generator makes them."""
    return random.getrandbits(128) or 1, random.getrandbits(64) or 1


@contextmanager
def preset(trace_id: int, span_id: int) -> Iterator[None]:
    """The next root span started inside gets these ids."""
    token = _PRESET.set((trace_id, span_id))
    try:
        yield
    finally:
        _PRESET.reset(token)


class TurnIds(RandomIdGenerator):
    """Random ids, except the preset ones for the span a `preset` block starts."""

    def generate_trace_id(self) -> int:
        found = _PRESET.get()
        return found[0] if found is not None else super().generate_trace_id()

    def generate_span_id(self) -> int:
        found = _PRESET.get()
        if found is None:
            return super().generate_span_id()
        _PRESET.set(None)  # one span takes them
        return found[1]

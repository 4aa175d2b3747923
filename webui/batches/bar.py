"""A batch's items as one stacked bar: done, denied, failed, cancelled, waiting, running, queued.

An item that ended with a tool call denied counts as `denied`, not `done`: it is not a
success to show in green. The segments are SVG rectangles (the page's policy allows no
inline style), in percent of the batch's items.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models.batches import BatchState
from webui.api.models import BatchSummary

__all__ = ["BarSegment", "bar_segments", "result_status"]

_ORDER = ("done", "denied", "failed", "cancelled", "invalid", "waiting", "running", "queued")


@dataclass(frozen=True)
class BarSegment:
    state: str
    count: int
    x: float  # percent
    width: float  # percent


def _counts(batch: BatchSummary) -> dict[str, int]:
    counts = {state.value: batch.counts.get(state, 0) for state in BatchState}
    denied = min(batch.denied, counts["done"])
    return {**counts, "done": counts["done"] - denied, "denied": denied}


def bar_segments(batch: BatchSummary) -> list[BarSegment]:
    """Every state in bar order with its count; a state with no items has width 0."""
    counts, total = _counts(batch), max(batch.total, 1)
    segments, x = [], 0.0
    for state in _ORDER:
        width = 100.0 * counts[state] / total
        segments.append(BarSegment(state, counts[state], round(x, 3), round(width, 3)))
        x += width
    return segments


def result_status(result: dict[str, object]) -> str:
    """A result row's status as shown: a done item with a denied tool call is `denied`."""
    status = str(result.get("status"))
    return "denied" if status == "done" and result.get("denied") else status

"""The trace context of the caller, in the headers of the `advance` message it queues.

Celery's instrumentation reads `traceparent` from a task's headers, so the worker's task
span (and through it the turn's trace, by a link) points back to the web request or
trigger that queued it. Nothing is added when there is no span.
"""

from __future__ import annotations

from opentelemetry import propagate, trace

__all__ = ["trace_headers"]


def trace_headers() -> dict[str, str]:
    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier

"""Traces of a Celery process (a worker or beat): sent when an endpoint is set, with Celery's
own instrumentation making a span per task sent and run (`advance` legs included)."""

from __future__ import annotations

from opentelemetry.instrumentation.celery import CeleryInstrumentor

from shared.settings import Settings
from shared.tracing.setup import configure

__all__ = ["trace_celery"]


def trace_celery(settings: Settings, *, service: str) -> bool:
    """Starts tracing this process, if configured; whether it did."""
    if not configure(settings, service=service):
        return False
    CeleryInstrumentor().instrument()
    return True

"""Tracing for one process: an OTLP/HTTP exporter when an endpoint is set, nothing otherwise.

`SIGNOFF_OTEL_ENDPOINT` names the collector; without it the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) does, with the exporter's other
standard variables (headers, timeout). Off, the API's no-op tracer makes every span call
cost next to nothing.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from shared.settings import Settings
from shared.tracing.ids import TurnIds

__all__ = ["configure", "enabled"]

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def enabled(settings: Settings) -> bool:
    """Whether spans are sent anywhere."""
    return bool(settings.otel_endpoint) or any(os.environ.get(name) for name in _ENDPOINTS)


def configure(settings: Settings, *, service: str) -> bool:
    """Sends this process's spans to the collector, as `signoff-<service>`; False when off."""
    if not enabled(settings):
        return False
    endpoint = settings.otel_endpoint.rstrip("/")
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces" if endpoint else None)
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"signoff-{service}"}),
        id_generator=TurnIds(),
        # Requests and tasks that start a trace, at the turns' ratio; a child follows its parent.
        sampler=ParentBased(TraceIdRatioBased(settings.otel_sample_ratio)),
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True

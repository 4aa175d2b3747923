"""OpenTelemetry traces: off unless an OTLP endpoint is set (`setup.py`); the ids a turn's trace
keeps across legs (`ids.py`); the trace context an `advance` message carries (`carrier.py`).

The worker's spans of a turn are in `worker/tracing.py`; docs/observability.md, "Traces".
"""

"""The WSGI entry point for gunicorn: ``gunicorn -k gthread 'webui.wsgi:app'``.

The only module that builds an app when imported; nothing but gunicorn imports it.
"""

from __future__ import annotations

from opentelemetry.instrumentation.flask import FlaskInstrumentor

from shared.logs import configure
from shared.settings import load_settings
from shared.tracing.setup import configure as configure_tracing
from webui import create_app

settings = load_settings()
configure(settings, process="web")

app = create_app(settings)
if configure_tracing(settings, service="web"):  # in each worker: the exporter's thread is its own
    FlaskInstrumentor().instrument_app(app, excluded_urls="healthz,metrics")

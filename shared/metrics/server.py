"""`/metrics` on a port of its own, for the worker and beat (the web serves it itself).

Off unless a port is set. It binds `SIGNOFF_METRICS_HOST` (127.0.0.1 unless set): metrics
say what runs and what it costs, so reaching them from elsewhere is an operator's choice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import start_http_server

from shared.metrics.runs import RunDir, registry
from shared.settings import Settings

__all__ = ["serving"]

log = logging.getLogger(__name__)


@contextmanager
def serving(settings: Settings, role: str, port: int) -> Iterator[RunDir | None]:
    """While inside: this run's metrics directory (for its children too) and its port.

    With `port` 0, nothing: the processes count in memory, and nobody reads it.
    """
    if not port:
        yield None
        return
    run = RunDir(settings, role).open()
    server, thread = start_http_server(port, addr=settings.metrics_host, registry=registry())
    log.info("metrics of this %s on http://%s:%d/metrics", role, settings.metrics_host, port)
    try:
        yield run
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        run.close()

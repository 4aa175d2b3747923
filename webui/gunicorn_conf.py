"""gunicorn's configuration for `signoff web` (`--config python:webui.gunicorn_conf`).

Its workers die with their master, even a SIGKILLed one: on their own they would serve
open event streams for up to the graceful timeout after `signoff up` is gone. A worker
that stopped cleanly exits without the interpreter's teardown (half a second of freeing
the modules it loaded), so that a SIGTERM stops the web process sooner.

Its error and access logs take the settings' format (`shared/logs`). The master also
makes this run's metrics directory (`shared/metrics/runs.py`) before it loads anything
that records a value, so every worker's counts reach `/metrics`, whichever worker is
scraped; it removes the directory as it exits.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from gunicorn import glogging

from shared.local.children import die_with_parent
from shared.logs import adopt
from shared.metrics.runs import RunDir
from shared.settings import load_settings

__all__ = ["Logger", "logger_class", "on_exit", "post_fork", "worker_exit"]

_settings = load_settings()
_metrics = RunDir(_settings, "web").open()  # in the master, before any worker forks


class Logger(glogging.Logger):
    """gunicorn's error and access logs in the settings' format, secrets masked."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        adopt(_settings, [self.error_log, self.access_log], process="web")


logger_class = Logger

_die_with_master = die_with_parent()  # made in the master, before it forks workers


def post_fork(server: Any, worker: Any) -> None:
    """Runs in each new worker: it gets SIGKILL when the master dies."""
    if _die_with_master is not None:
        _die_with_master()


def worker_exit(server: Any, worker: Any) -> None:
    """Runs in a worker as it exits: after a clean stop, exit at once (logs flushed)."""
    leaving = sys.exc_info()[1]  # gunicorn calls this while the worker's SystemExit unwinds
    if isinstance(leaving, SystemExit) and leaving.code in (0, None):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def on_exit(server: Any) -> None:
    """Runs in the master as it exits: this run's metrics go with it."""
    _metrics.close()

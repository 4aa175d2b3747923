"""Celery's log lines in the settings' format: its handlers adopted, its prints replaced.

Celery makes its own handlers when a worker or beat starts; they take the settings'
format, the redaction and the conversation and turn of each line (`shared/logs`). With
JSON logs, the few lines Celery prints rather than logs (its banner, and what its signal
handlers say, such as "worker: Warm shutdown") would break the one-object-a-line promise:
the banner is turned off (`--quiet`) and the signal handlers' printer writes a JSON line,
with one `os.write` as Celery's own does (logging is not safe in a signal handler).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, TextIO

import celery.apps.worker
from celery.signals import after_setup_logger, after_setup_task_logger

from shared.logs import adopt
from shared.logs.redact import Redactor
from shared.logs.setup import JsonFormatter
from shared.settings import LogFormat, Settings

__all__ = ["adopt_celery_logging", "quiet"]


def adopt_celery_logging(settings: Settings, process: str) -> None:
    """Celery's handlers (made as it starts) follow the settings; Python's warnings too."""
    logging.captureWarnings(True)
    # No format shows a record's thread, and naming it costs, per line, a dummy Thread made
    # for the greenlet (each task of the gevent pool is one).
    logging.logThreads = False

    def adopt_handlers(logger: logging.Logger, **_: Any) -> None:
        adopt(settings, [logger], process=process)

    after_setup_logger.connect(adopt_handlers, weak=False)
    after_setup_task_logger.connect(adopt_handlers, weak=False)
    if settings.log_format is LogFormat.JSON:
        celery.apps.worker.safe_say = _json_say(settings, process)


def quiet(settings: Settings) -> list[str]:
    """Celery's global option that drops its banner, when every line must be JSON."""
    return ["--quiet"] if settings.log_format is LogFormat.JSON else []


def _json_say(settings: Settings, process: str) -> Any:
    formatter = JsonFormatter(Redactor.for_settings(settings), process=process)
    write = getattr(celery.apps.worker, "_original_os_write", os.write)  # never gevent's

    def say(msg: str, f: TextIO = sys.__stderr__) -> None:  # type: ignore[assignment]
        record = logging.LogRecord("celery.apps.worker", logging.WARNING, "", 0, msg, None, None)
        with contextlib.suppress(OSError, ValueError):  # as Celery's: a lost line never
            write(f.fileno(), (formatter.format(record) + "\n").encode())  # aborts a shutdown

    return say

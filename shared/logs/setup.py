"""How a process logs: its handlers' formatters, JSON or text, both through the redactor.

`configure` sets up a process that owns its logging (the web's workers, `signoff worker`'s
parent, the CLI). `adopt` takes over handlers that someone else made (Celery's, gunicorn's):
same format, same redaction, same context fields.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable

from shared.logs.context import FIELDS, ContextFilter
from shared.logs.redact import Redactor
from shared.settings import LogFormat, Settings

__all__ = ["JsonFormatter", "RedactingFormatter", "adopt", "configure"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, process, message, the
    conversation and turn where there is one, and the exception's traceback if any."""

    def __init__(self, redact: Redactor, *, process: str) -> None:
        super().__init__()
        self.redact = redact
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "process": self.process,
            "pid": record.process,
            "message": self.redact(record.getMessage()),
        }
        for name in FIELDS:
            value = getattr(record, name, "")
            if value:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = self.redact(record.exc_text)
        return json.dumps(line, ensure_ascii=False, default=str)


class RedactingFormatter(logging.Formatter):
    """Another formatter's line, with secrets masked."""

    def __init__(self, inner: logging.Formatter, redact: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(self.inner.format(record))


def _iso(created: float) -> str:
    millis = int(created * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{millis:03d}Z"


def formatter(settings: Settings, *, process: str, text: logging.Formatter) -> logging.Formatter:
    """The formatter a handler of this process uses: JSON, or `text`, both redacted."""
    redact = Redactor.for_settings(settings)
    if settings.log_format is LogFormat.JSON:
        return JsonFormatter(redact, process=process)
    if isinstance(text, RedactingFormatter | JsonFormatter):
        return text
    return RedactingFormatter(text, redact)


def configure(
    settings: Settings, *, process: str, level: int = logging.INFO, text_format: str = TEXT_FORMAT
) -> None:
    """Logs of this process go to stderr, one line each, in the settings' format."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(settings, process=process, text=logging.Formatter(text_format)))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def adopt(settings: Settings, loggers: Iterable[logging.Logger], *, process: str) -> None:
    """Gives the handlers of `loggers` the settings' format, redaction and context fields."""
    for logger in loggers:
        for handler in logger.handlers:
            text = handler.formatter or logging.Formatter(TEXT_FORMAT)
            handler.setFormatter(formatter(settings, process=process, text=text))
            if not any(isinstance(f, ContextFilter) for f in handler.filters):
                handler.addFilter(ContextFilter())

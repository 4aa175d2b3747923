"""Records a listing leaves out because they do not parse, so one cannot take the list down.

Each is logged at WARNING with the key it names, once per request: a page may read
the same record twice (a listing and a count), and a log line per read is noise.
"""

from __future__ import annotations

import logging

from flask import g, has_request_context, request

from shared.errors import CorruptRecord

__all__ = ["skip_unreadable"]

log = logging.getLogger(__name__)


def skip_unreadable(error: CorruptRecord) -> None:
    """Notes a record left out of a listing: its key at WARNING, once per request."""
    if not has_request_context():
        log.warning("left out of a listing: %s", error.message)
        return
    seen: set[str] = g.setdefault("unreadable_records", set())
    if error.message in seen:
        return
    seen.add(error.message)
    log.warning("left out of %s %s: %s", request.method, request.path, error.message)

"""The check of a pooled connection before it is lent, without gevent's machinery when it
finds nothing to read.

redis-py checks every connection it takes from a pool for data left unread (a reply cut off
when its caller was killed), with `select.poll()` at a zero timeout. Under gevent (the worker
and the web) `select.poll` is gevent's, which starts watchers and a timer for that check, and
then the pool's queue: together a tenth of a one-turn leg's CPU. A zero-timeout poll never
blocks, so the process's original `poll` answers the usual case (nothing to read) exactly as
gevent's would; a connection with anything to read goes to redis-py's own check.
"""

from __future__ import annotations

import select
import sys
from collections.abc import Callable
from typing import Any

from redis._parsers import _HiredisParser
from redis.utils import HIREDIS_AVAILABLE

__all__ = ["parser_options"]

_poll: Callable[[], Any] | None = None


def _original_poll() -> Callable[[], Any]:
    """`select.poll` as it was before gevent patched it (if it did), found at the first check:
    the web's gevent workers patch after the modules are imported."""
    global _poll
    if _poll is None:
        monkey = sys.modules.get("gevent.monkey")
        _poll = select.poll if monkey is None else monkey.get_original("select", "poll")
    return _poll


class LendCheckParser(_HiredisParser):
    """redis-py's hiredis parser, whose zero-timeout `can_read` polls without gevent."""

    def can_read(self, timeout: float = 0) -> bool:
        # both are set when it connects, None once it disconnects
        reader, sock = getattr(self, "_reader", None), getattr(self, "_sock", None)
        quiet = timeout == 0 and reader is not None and sock is not None and not reader.has_data()
        pending = getattr(sock, "pending", None)  # TLS: bytes decrypted above the socket
        if quiet and not (pending is not None and pending()):
            try:
                poller = _original_poll()()
                poller.register(sock, select.POLLIN)
                if not poller.poll(0):
                    return False
            except (OSError, ValueError):
                pass  # redis-py's check says what it makes of the socket
        return super().can_read(timeout)


def parser_options() -> dict[str, Any]:
    """A sync client's options for the parser with this check (none without hiredis)."""
    return {"parser_class": LendCheckParser} if HIREDIS_AVAILABLE else {}

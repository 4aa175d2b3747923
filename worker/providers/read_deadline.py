"""Read timeouts of model-server connections, kept by one thread per process.

A socket timeout makes every blocking read arm a timer and cancel it again; under gevent
that is a `Timeout` made, started and closed per read. A streamed answer is one read per
token, and with a thousand calls streaming those timers were a twenty-fifth of the
worker's CPU (`python -m bench latency`). Here the sockets wait without a timeout, each
connection notes when its last byte came, and one thread looks over the connections that
wait on their server: one silent for longer than its read timeout is shut for reading,
which ends the read it waits in, and the reader raises the timeout.

A timeout fires between its length and that plus `tick` (a tenth of the shortest timeout
watched, between 10 ms and half a second).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Protocol

from worker.process_thread import ProcessThread

__all__ = ["Watched", "unwatch", "watch"]

MIN_TICK_S = 0.01
MAX_TICK_S = 0.5


class Watched(Protocol):
    sock: socket.socket
    read_timeout: float
    last_byte: float  # time.monotonic() of the last byte read (or of the wait's start)
    expired: bool


_watched: dict[int, Watched] = {}
_lock = threading.Condition()
_thread: ProcessThread | None = None


def watch(conn: Watched, timeout: float) -> None:
    """`conn` waits on its server from now, for at most `timeout` between bytes."""
    global _thread
    conn.read_timeout = timeout
    conn.last_byte = time.monotonic()
    conn.expired = False
    with _lock:
        _watched[id(conn)] = conn
        if _thread is None:
            _thread = ProcessThread("model-read-deadlines", _watch_forever, _lock)
        _thread.ensure_running()


def unwatch(conn: Watched) -> None:
    """`conn` waits no more (its answer ended, or it is closed); never expired after this."""
    with _lock:
        _watched.pop(id(conn), None)


def _watch_forever() -> None:
    while True:
        with _lock:
            watched = list(_watched.values())
        tick = min((c.read_timeout / 10 for c in watched), default=MAX_TICK_S)
        time.sleep(min(max(tick, MIN_TICK_S), MAX_TICK_S))
        now = time.monotonic()
        late = [c for c in watched if now - c.last_byte > c.read_timeout]
        if late:
            with _lock:
                for conn in late:
                    if _watched.pop(id(conn), None) is conn:
                        _expire(conn)


def _expire(conn: Watched) -> None:
    conn.expired = True
    with contextlib.suppress(OSError):  # closed meanwhile
        conn.sock.shutdown(socket.SHUT_RD)  # the waiting read returns: end of stream

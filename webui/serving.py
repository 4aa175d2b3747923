"""The web process's gunicorn worker: a greenlet per connection, with deadlines on clients.

`signoff web` runs gunicorn with this worker class (`cli/web_server.py`). It is
gunicorn's gevent worker (the whole app is served by greenlets, and the worker
monkey-patches the standard library, so redis-py, Celery's producer, the live feed's
thread and the SSE queues all yield instead of blocking), plus what serving untrusted
clients needs:

- **Deadlines on reads.** A new connection has `SIGNOFF_WEB_HEADER_TIMEOUT_S` to send a
  request's line and headers; on a kept-alive connection the clock starts at the request's
  first byte (before it, the connection may stay idle for the keep-alive time). A body
  has `SIGNOFF_WEB_BODY_TIMEOUT_S`. A client past its deadline is disconnected, so a
  slowloris holds a greenlet for seconds, never a thread, and never for long.
- **A deadline on writes.** A client that takes none of a response for
  `SIGNOFF_WEB_SEND_TIMEOUT_S` is disconnected: a stalled event-stream reader frees
  its greenlet, and its subscription with it.
- **A fast, graceful stop.** On SIGTERM the worker stops accepting, ends every event
  stream at once (each gets a closing comment, then its response ends), closes idle
  kept-alive connections, and gives requests in flight the graceful timeout
  (`SIGNOFF_WEB_SHUTDOWN_TIMEOUT_S`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import socket
import time
import warnings
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.lock
from gevent.monkey import MonkeyPatchWarning
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

from shared.local.open_files import raise_open_files_limit
from webui.services import EXTENSION, Services

__all__ = ["Connection", "Limits", "Worker"]

log = logging.getLogger(__name__)

# Requests whose work (all but a stream's body) runs at once in one worker; more wait in order.
REQUESTS_AT_ONCE = 32


@dataclass(frozen=True)
class Limits:
    """How long a client may take, in seconds."""

    header_s: float
    body_s: float
    send_s: float
    keepalive_s: float


class Connection:
    """A client socket whose reads and writes have deadlines; everything else is the socket's.

    gunicorn reads requests with `recv` and writes responses with `sendall`. Between
    requests the connection is *idle*: the wait for a first byte is bounded by the header
    deadline (a new connection) or the keep-alive time (a reused one). From that byte on,
    the head must arrive by the header deadline; from `begin_request` on, the body by the
    body deadline. A read past its deadline answers end-of-file, which gunicorn treats as a
    client that left; the connection is then closed.
    """

    def __init__(self, sock: Any, limits: Limits) -> None:
        self._sock = sock
        self._limits = limits
        self._deadline: float | None = None  # None: waiting for a request's first byte
        self._served = 0
        self._in_request = False
        self._closing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    @property
    def idle(self) -> bool:
        """Between requests, with nothing of the next one received."""
        return self._deadline is None and not self._in_request

    def recv(self, size: int) -> bytes:
        if self._closing:
            return b""
        if self._deadline is None:
            wait = self._limits.keepalive_s if self._served else self._limits.header_s
            data = self._recv(size, wait, "to start a request" if self._served else "headers")
            if data and not self._in_request:
                self._deadline = time.monotonic() + self._limits.header_s
            return data
        what = "the body" if self._in_request else "headers"
        return self._recv(size, self._deadline - time.monotonic(), what)

    def _recv(self, size: int, timeout: float, what: str) -> bytes:
        if timeout > 0:
            self._sock.settimeout(timeout)
            try:
                return bytes(self._sock.recv(size))
            except TimeoutError:
                pass
        if what != "to start a request":
            log.info("disconnecting %s: %s not received in time", self._peer(), what)
        self._closing = True
        return b""

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._limits.send_s)
        try:
            self._sock.sendall(data)
        except TimeoutError:
            log.info(
                "disconnecting %s: it took no data for %.0f s", self._peer(), self._limits.send_s
            )
            self._closing = True
            raise BrokenPipeError(errno.EPIPE, "the client stopped reading") from None

    def begin_request(self) -> None:
        """The head is read: the body (if any) is due by the body deadline."""
        self._in_request = True
        self._deadline = time.monotonic() + self._limits.body_s

    def end_request(self) -> None:
        """The response is sent: the connection waits for the next request."""
        self._in_request = False
        self._deadline = None
        self._served += 1

    def close_if_idle(self) -> None:
        """Ends a connection that is waiting for a request (at shutdown)."""
        if self.idle and not self._closing:
            self._closing = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes the greenlet waiting in recv

    def _peer(self) -> str:
        try:
            host, port = self._sock.getpeername()[:2]
        except OSError:
            return "a client"
        return f"{host}:{port}"


class Worker(GeventWorker):
    """gunicorn's gevent worker, with deadlines on clients and a stop that ends streams."""

    wsgi: Any
    limits: Limits
    _services: Services | None = None

    def patch(self) -> None:
        # The master imported the app's modules (and `ssl`) before the fork; the web reaches
        # `ssl` only through redis-py's synchronous connections, which look the patched
        # module up at call time (docs/architecture.md, "Serving"): no warning in every boot.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Monkey-patching ssl", MonkeyPatchWarning)
            super().patch()

    def init_process(self) -> None:
        raise_open_files_limit(self.cfg.worker_connections + 256)
        self._connections: set[Connection] = set()
        super().init_process()

    def run(self) -> None:
        """gevent's worker loop, acting on a SIGTERM at once instead of at its next 1 s tick.

        Then: stop accepting, and wait (checking every 50 ms) for the connections to end,
        at most the graceful timeout; streams end as soon as the SIGTERM arrives.
        """
        self._stopping = gevent.event.Event()
        ssl_args = {"ssl_context": ssl_context(self.cfg)} if self.cfg.is_ssl else {}
        servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            handle = functools.partial(self.handle, listener)
            server = StreamServer(
                listener, handle=handle, spawn=Pool(self.worker_connections), **ssl_args
            )
            if self.cfg.workers > 1:
                server.max_accept = 1
            server.start()
            servers.append(server)
        while self.alive:
            self.notify()
            self._stopping.wait(1.0)
        for server in servers:
            server.close()  # stop accepting
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while any(server.pool.free_count() != server.pool.size for server in servers):
            if time.monotonic() >= deadline:
                self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
                for server in servers:
                    server.stop(timeout=1)
                return
            self.notify()
            gevent.sleep(0.05)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        services = getattr(self.wsgi, "extensions", {}).get(EXTENSION)
        self.wsgi = _one_at_a_time(self.wsgi, REQUESTS_AT_ONCE)
        self._services = services
        settings = services.settings if services is not None else None
        self.limits = Limits(
            header_s=settings.web_header_timeout_s if settings else 10.0,
            body_s=settings.web_body_timeout_s if settings else 30.0,
            send_s=settings.web_send_timeout_s if settings else 30.0,
            keepalive_s=float(self.cfg.keepalive),
        )

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        connection = Connection(client, self.limits)
        self._connections.add(connection)
        try:
            super().handle(listener, connection, addr)
        finally:
            self._connections.discard(connection)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        sock.begin_request()
        try:
            super().handle_request(listener_name, req, sock, addr)
        finally:
            sock.end_request()
        if not self.alive:
            raise StopIteration  # stopping: close the connection instead of waiting on it
        if _body_left_unread(req):
            # Answered without reading it all (a 401, a 413): rather than wait for the rest
            # of a body that may never come, close (the client learns it from the answer).
            raise StopIteration

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: stop accepting (the run loop sees `alive`), end streams and idle clients."""
        super().handle_exit(sig, frame)
        gevent.spawn(self._end_streams)  # out of the signal handler: it may block

    def _end_streams(self) -> None:
        self._stopping.set()
        if self._services is not None:
            self._services.broadcaster.close()  # each stream sends its closing comment
        for connection in list(self._connections):
            connection.close_if_idle()


def _body_left_unread(req: Any) -> bool:
    """Whether some of the request's body has not reached the server yet (chunked: unknown)."""
    reader = getattr(getattr(req, "body", None), "reader", None)
    if isinstance(reader, LengthReader):
        return bool(reader.length > 0)
    if isinstance(reader, ChunkedReader):
        return reader.parser is not None
    return False


def _one_at_a_time(app: Any, most: int) -> Any:
    """`app`, called by at most `most` greenlets at once; the others wait their turn, in order.

    The call is the request's work (authentication, the view, a whole response but a
    stream's body, which is iterated after the call returns). Without the bound, a burst of
    requests is served all at once: each gets a slice in turn, and all finish late.
    """
    gate = gevent.lock.BoundedSemaphore(most)

    def gated(environ: Any, start_response: Any) -> Any:
        with gate:
            return app(environ, start_response)

    return gated

"""A lean HTTP/1.1 transport under the openai SDK's client, for model servers on plain http.

Why: a streamed answer arrives one HTTP chunk per token, and httpcore and h11 handled each
in five layers of state machines. Against a local model server that was a quarter of the
worker's CPU per turn (`python -m bench latency`). This transport reads the same bytes
with a buffer and a chunk parser, and keeps its connections in one list per origin, so
taking one costs the same with ten or a thousand open.

Scope: plain ``http://`` with no proxy, the self-hosted servers (vLLM, llama.cpp, Ollama)
a worker keeps a thousand calls open on. ``https://`` and proxied URLs keep httpx's own
transport (`uses_plain_http`), with its TLS and proxy settings. The SDK above is
unchanged: it builds the request, maps statuses and errors, and decodes the SSE events.

Semantics kept from httpx: at most `max_connections` requests at once (a request beyond
waits up to the pool timeout, then `PoolTimeout`); connections kept alive and reused
until the server closes them; a reused connection that the server had closed before it
answered anything is replaced once (the request never reached a handler); timeouts and
socket errors raise httpx's exceptions, which the SDK maps to its own.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial

import httpx2

from worker.providers import read_deadline

__all__ = ["PlainHTTPTransport", "uses_plain_http"]

_READ = 65536
_MAX_HEAD = 65536
_MAX_LINE = 4096


def uses_plain_http(base_url: str) -> bool:
    """Whether calls to `base_url` go through `PlainHTTPTransport`: plain http, no proxy."""
    url = httpx2.URL(base_url)
    if url.scheme != "http":
        return False
    proxies = urllib.request.getproxies()
    if not ({"http", "all"} & set(proxies)):
        return True
    return bool(urllib.request.proxy_bypass(url.host))


class PlainHTTPTransport(httpx2.BaseTransport):
    """HTTP/1.1 over pooled keep-alive sockets; one request per connection at a time."""

    def __init__(self, max_connections: int) -> None:
        self._slots = _Slots(max_connections)
        self._max_idle = max_connections
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme != "http":
            raise httpx2.UnsupportedProtocol(f"only http is served here: {request.url}")
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        if not self._slots.acquire(timeout=timeouts.get("pool")):
            raise httpx2.PoolTimeout("no connection to the model server was free in time")
        try:
            return self._send(request, timeouts)
        except BaseException:
            self._slots.release()
            raise

    def close(self) -> None:
        for connections in self._idle.values():
            while connections:
                connections.pop().close()

    def _send(self, request: httpx2.Request, timeouts: dict[str, float | None]) -> httpx2.Response:
        origin = (request.url.host, request.url.port or 80)
        payload = request.read()
        message = _head(request, len(payload)) + payload
        for attempt in range(2):
            conn, reused = self._connection(origin, timeouts.get("connect"))
            try:
                conn.send(message, timeouts.get("write"))
                status, reason, headers = conn.read_head(timeouts.get("read"))
                pieces = _framing(conn, request.method, status, headers)
            except _Stale:
                conn.close()
                if reused and attempt == 0:
                    continue  # the server closed it while idle; the request never arrived
                raise httpx2.RemoteProtocolError(
                    "the server disconnected without sending a response"
                ) from None
            except BaseException:
                conn.close()
                raise
            body = _Body(self, origin, conn, pieces)
            return httpx2.Response(
                status,
                headers=headers,
                stream=body,
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(
        self, origin: tuple[str, int], timeout: float | None
    ) -> tuple[_Connection, bool]:
        idle = self._idle.get(origin)
        if idle:
            return idle.pop(), True
        return _Connection.open(origin, timeout), False

    def _release(self, origin: tuple[str, int], conn: _Connection | None) -> None:
        """A response is over: its connection back to the pool (or None: it was closed)."""
        if conn is not None:
            idle = self._idle.setdefault(origin, [])
            if len(idle) < self._max_idle:
                idle.append(conn)
            else:
                conn.close()
        self._slots.release()


class _Slots:
    """The bound on requests at once. `threading.Semaphore` notifies at every release, which
    under gevent costs a hub switch (its condition's plain lock is checked by acquiring it);
    this notifies only when a caller waits."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting = 0
        self._changed = threading.Condition()

    def acquire(self, timeout: float | None) -> bool:
        with self._changed:
            if not self._free:
                self._waiting += 1
                try:
                    if not self._changed.wait_for(lambda: self._free > 0, timeout):
                        return False
                finally:
                    self._waiting -= 1
            self._free -= 1
            return True

    def release(self) -> None:
        with self._changed:
            self._free += 1
            if self._waiting:
                self._changed.notify()


def _readable_waiter(sock: socket.socket) -> Callable[[], None] | None:
    """gevent's wait for `sock` to be readable, or None for a blocking socket.

    gevent's `recv` first tries the read and, finding nothing, raises and clears an error
    before it waits: at a model's pace (a token each 20 ms) that is every read, about 1% of
    the worker's CPU. Waiting first when the last read drained the socket skips it."""
    wait, event = getattr(sock, "_wait", None), getattr(sock, "_read_event", None)
    return None if wait is None or event is None else partial(wait, event)


class _Stale(Exception):
    """The connection ended before any byte of a response."""


class _Connection:
    """A socket with a read buffer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.keep_alive = True
        # the read timeout, kept by `read_deadline` (not a timer per read)
        self.read_timeout = 0.0
        self.last_byte = 0.0
        self.expired = False
        self._wait_readable = _readable_waiter(sock)
        self._drained = True  # the last read took all there was: wait before the next one

    @classmethod
    def open(cls, origin: tuple[str, int], timeout: float | None) -> _Connection:
        try:
            sock = socket.create_connection(origin, timeout=timeout)
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"connecting to {origin[0]}:{origin[1]}: {exc}") from exc
        except OSError as exc:
            raise httpx2.ConnectError(f"connecting to {origin[0]}:{origin[1]}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def close(self) -> None:
        self.keep_alive = False
        read_deadline.unwatch(self)
        self.sock.close()

    def send(self, data: bytes, timeout: float | None) -> None:
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise httpx2.WriteTimeout(f"sending the request: {exc}") from exc
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _Stale() from exc
        except OSError as exc:
            raise httpx2.WriteError(f"sending the request: {exc}") from exc

    def read_head(self, timeout: float | None) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The status and headers of the final response (informational ones are skipped).
        Reads wait at most `timeout` between bytes, until `done_reading`."""
        self.sock.settimeout(None)
        if timeout is not None:
            read_deadline.watch(self, timeout)
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    raise httpx2.RemoteProtocolError("the response's head is too long")
                if not self._fill(stale_if_empty=not self.buffer):
                    raise httpx2.RemoteProtocolError("the server closed the connection mid-head")
                continue
            head = bytes(self.buffer[:end])
            del self.buffer[: end + 4]
            if head.startswith(b"HTTP/1.0"):
                self.keep_alive = False  # a 1.0 server closes after each response
            status, reason, headers = _parse_head(head)
            if not 100 <= status < 200:
                return status, reason, headers

    def done_reading(self) -> None:
        read_deadline.unwatch(self)

    def _fill(self, *, stale_if_empty: bool = False) -> bool:
        """Reads more into the buffer; False at the end of the stream."""
        try:
            if self._drained and self._wait_readable is not None:
                self._wait_readable()
            data = self.sock.recv(_READ)
            self._drained = len(data) < _READ
        except OSError as exc:
            # an expired read ends as the end of the stream, or (gevent) a cancelled wait
            if self.expired:
                raise self._timed_out() from exc
            if isinstance(exc, TimeoutError):
                raise httpx2.ReadTimeout(f"waiting for the model server: {exc}") from exc
            if stale_if_empty and isinstance(exc, ConnectionResetError):
                raise _Stale() from exc
            raise httpx2.ReadError(f"reading the response: {exc}") from exc
        if not data:
            if self.expired:
                raise self._timed_out()
            if stale_if_empty:
                raise _Stale()
            return False
        self.last_byte = time.monotonic()
        self.buffer += data
        return True

    def _timed_out(self) -> httpx2.ReadTimeout:
        self.keep_alive = False
        return httpx2.ReadTimeout(
            f"waiting for the model server: nothing for {self.read_timeout:g} s"
        )

    def line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > _MAX_LINE:
                raise httpx2.RemoteProtocolError("a chunk size line is too long")
            if not self._fill():
                raise httpx2.RemoteProtocolError("the server closed the connection mid-body")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise httpx2.RemoteProtocolError("the server closed the connection mid-body")
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def chunked(self) -> Iterator[bytes]:
        while True:
            line = self.line()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx2.RemoteProtocolError(f"bad chunk size line {line[:40]!r}") from None
            if size == 0:
                while self.line():  # trailers, up to the blank line
                    pass
                return
            yield self.exactly(size)
            if self.exactly(2) != b"\r\n":
                raise httpx2.RemoteProtocolError("a chunk did not end with CRLF")

    def counted(self, length: int) -> Iterator[bytes]:
        while length > 0:
            if not self.buffer and not self._fill():
                raise httpx2.RemoteProtocolError("the server closed the connection mid-body")
            data = bytes(self.buffer[:length])
            del self.buffer[: len(data)]
            length -= len(data)
            yield data

    def finish_arrived(self, pieces: Iterator[bytes]) -> bool:
        """Reads the rest of a body its reader stopped short of, as far as it has arrived,
        never waiting: True when the body ended, so the connection can serve the next call.

        A stream's reader stops at its ``[DONE]`` event, and the body's last chunk comes
        with it. Left unread, it cost the connection: every call opened a new one (a
        thirtieth of the worker's CPU per call against a local server, and a connection
        accepted each time by the server).
        """
        self.sock.settimeout(0.0)
        read = 0
        try:
            for piece in pieces:
                read += len(piece)
                if read > _MAX_HEAD:
                    return False  # more than an end's worth: not worth keeping it for
        except httpx2.HTTPError:  # would wait, or the connection broke
            return False
        return True

    def until_close(self) -> Iterator[bytes]:
        self.keep_alive = False
        while self.buffer or self._fill():
            data = bytes(self.buffer)
            self.buffer.clear()
            yield data


def _head(request: httpx2.Request, length: int) -> bytes:
    """The request line and headers; the body goes whole, with its length (httpx marks a
    body it was given as an iterator chunked)."""
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    framing = (b"content-length", b"transfer-encoding")
    lines += [
        name + b": " + value for name, value in request.headers.raw if name.lower() not in framing
    ]
    if length or request.method not in ("GET", "HEAD"):
        lines.append(b"Content-Length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _parse_head(head: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    status_line, *header_lines = head.split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx2.RemoteProtocolError(f"not an HTTP/1.1 status line: {status_line[:60]!r}")
    headers = []
    for line in header_lines:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx2.RemoteProtocolError(f"bad header line {line[:60]!r}")
        headers.append((name.strip(), value.strip()))
    reason = parts[2] if len(parts) == 3 else b""
    return int(parts[1]), reason, headers


def _framing(
    conn: _Connection, method: str, status: int, headers: list[tuple[bytes, bytes]]
) -> Iterator[bytes]:
    """The body's pieces, as the response frames them; marks the connection not reusable
    when it closes after the body."""
    fields: dict[bytes, bytes] = {name.lower(): value for name, value in headers}
    if b"close" in fields.get(b"connection", b"").lower():
        conn.keep_alive = False
    if method == "HEAD" or status in (204, 304):
        return iter(())
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        return conn.chunked()
    if b"content-length" in fields:
        try:
            length = int(fields[b"content-length"])
        except ValueError:
            raise httpx2.RemoteProtocolError("a Content-Length that is not a number") from None
        return conn.counted(length)
    return conn.until_close()


class _Body(httpx2.SyncByteStream):
    """The response body; closing it returns a fully read connection to the pool."""

    def __init__(
        self,
        transport: PlainHTTPTransport,
        origin: tuple[str, int],
        conn: _Connection,
        pieces: Iterator[bytes],
    ) -> None:
        self._transport = transport
        self._origin = origin
        self._conn = conn
        self._pieces = pieces
        self._read_all = False
        self._broken = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        # not `yield from`: a reader that stops early closes this generator, and the
        # pieces must stay open for `close` to finish reading them
        while True:
            try:
                piece = next(self._pieces)
            except StopIteration:
                self._read_all = True
                return
            except BaseException:
                self._broken = True
                raise
            yield piece

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn: _Connection | None = self._conn
        self._conn.done_reading()
        if not (self._read_all or self._broken) and self._conn.keep_alive:
            self._read_all = self._conn.finish_arrived(self._pieces)
        reusable = self._conn.keep_alive and not self._conn.expired and not self._conn.buffer
        if not (self._read_all and reusable):
            self._conn.close()
            conn = None
        self._transport._release(self._origin, conn)

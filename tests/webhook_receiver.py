"""A webhook receiver on a loopback socket: verifies each delivery's signature, answers as
scripted (500 twice, then 200, say), and records what arrived."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.webhooks.signing import SignatureRefused, verify


@dataclass
class Arrival:
    msg_id: str
    status: int  # what the receiver answered
    body: dict[str, Any]
    verified: bool
    at: float = field(default_factory=time.time)


class Receiver:
    """Answers the first `failures` deliveries of each webhook-id with 500, then 200."""

    def __init__(self, secret: str, *, failures: int = 0) -> None:
        self.secret = secret
        self.failures = failures
        self.arrivals: list[Arrival] = []
        self.hold = threading.Event()  # cleared: requests wait until it is set
        self.hold.set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def _answer(self, headers: dict[str, str], raw: str) -> int:
        try:
            verified = verify(self.secret, headers, raw, now=time.time(), tolerance_s=300)
        except SignatureRefused:
            self._record(Arrival(headers.get("webhook-id", ""), 401, {}, False))
            return 401
        with self._lock:
            seen = sum(a.msg_id == verified.msg_id for a in self.arrivals)
        status = 500 if seen < self.failures else 200
        self._record(Arrival(verified.msg_id, status, json.loads(raw), True))
        return status

    def _record(self, arrival: Arrival) -> None:
        with self._lock:
            self.arrivals.append(arrival)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
                receiver.hold.wait(30)
                status = receiver._answer({k.lower(): v for k, v in self.headers.items()}, raw)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        return Handler

    def of(self, kind: str) -> list[Arrival]:
        with self._lock:
            return [a for a in self.arrivals if a.body.get("type") == kind]

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        self._thread.start()
        try:
            yield self
        finally:
            self.hold.set()
            self._server.shutdown()
            self._server.server_close()

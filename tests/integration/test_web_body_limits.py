"""Body limits hold whatever the framing, against the real `signoff web`, over raw sockets.

A body sent with `Transfer-Encoding: chunked` is capped like one with a `Content-Length`:
a trigger's event at its 1 MB, every other route at the app's cap, before authentication,
and the server stops reading at the cap (it answers while the client is still sending).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.triggers import TriggerRequest
from shared.settings import Settings
from shared.store.bundle import Stores
from shared.store.triggers import TriggerStore
from shared.store.users import TokenStore
from shared.webhooks.signing import new_secret, signed_headers
from tests.integration.test_web_serving import signoff_web
from tests.stack import state_store
from webui import request_body_limit

SECRET = new_secret()
PIECE = 64 * 1024
APP_CAP = request_body_limit(Settings(max_prompt_media_bytes=1_000_000))  # as the web is run


@pytest.fixture(scope="module")
def web(redis_server: EmbeddedRedis) -> Iterator[tuple[int, str]]:
    """`signoff web` with a small app cap, a trigger `issues`, and a submitter token."""
    prefix = "bodycap"
    settings = Settings(redis_url=redis_server.url, key_prefix=prefix)
    client, _ = state_store(redis_server.url, settings.key_prefix)
    stores = Stores.build(client, settings, None)
    stores.agents.create(NewAgent(name="triage"), actor="test")
    request = TriggerRequest(name="issues", agent="triage", template="Go.", secret=SECRET)
    TriggerStore(client, stores.keys).create(request, actor="test")
    submitter = TokenStore(client, stores.keys).create("sub", "submitter")
    with signoff_web(
        redis_server, prefix, max_prompt_media_bytes="1000000", web_body_timeout_s="20"
    ) as (_, port, _viewer, _cid):
        yield port, submitter
    client.close()


def _head(path: str, headers: dict[str, str]) -> bytes:
    headers = {"content-type": "application/json"} | {k.lower(): v for k, v in headers.items()}
    lines = [f"POST {path} HTTP/1.1", "Host: test"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunks(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), PIECE):
        piece = body[start : start + PIECE]
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


def _answer(sock: socket.socket, timeout_s: float = 15.0) -> tuple[int, dict[str, object]]:
    """The status and JSON body of the server's answer, read until it closes."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            break
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    assert head, "no answer"
    return int(head.split(b" ")[1]), json.loads(body)


class Sender(threading.Thread):
    """Sends a chunked body of `total` bytes, never its end, counting what the server took."""

    def __init__(self, sock: socket.socket, total: int) -> None:
        super().__init__(daemon=True)
        self.sock, self.total, self.sent, self.stopped_by = sock, total, 0, ""

    def run(self) -> None:
        piece = f"{PIECE:x}\r\n".encode() + b"x" * PIECE + b"\r\n"
        try:
            while self.sent < self.total:
                self.sock.sendall(piece)
                self.sent += PIECE
        except OSError as exc:
            self.stopped_by = type(exc).__name__


def _open(port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    sock.sendall(head)
    return sock


def test_a_signed_chunked_event_over_a_megabyte_is_a_413(web: tuple[int, str]) -> None:
    port, _ = web
    event = json.dumps({"issue": {"title": "big"}, "pad": "x" * 1_500_000})
    signed = signed_headers(SECRET, "evt-big", int(time.time()), event)
    head = _head("/api/v1/triggers/issues", {**signed, "Transfer-Encoding": "chunked"})
    with _open(port, head) as sock:
        for chunk in _chunks(event.encode()):
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server answered and closed at the cap
        else:
            sock.sendall(b"0\r\n\r\n")
        status, body = _answer(sock)
    assert status == 413, body
    assert "1,000,000 bytes" in str(body), body


def test_an_event_under_the_cap_still_fires_chunked(web: tuple[int, str]) -> None:
    port, _ = web
    event = json.dumps({"issue": {"title": "small"}, "pad": "x" * 200_000})
    signed = signed_headers(SECRET, "evt-small", int(time.time()), event)
    head = _head("/api/v1/triggers/issues", {**signed, "Transfer-Encoding": "chunked"})
    with _open(port, head) as sock:
        for chunk in _chunks(event.encode()):
            sock.sendall(chunk)
        sock.sendall(b"0\r\n\r\n")
        status, body = _answer(sock)
    assert status == 202, body


def test_an_unauthenticated_30_mb_chunked_body_is_cut_at_the_cap(web: tuple[int, str]) -> None:
    """The server answers while the body is still coming, and never reads it to the end."""
    port, _ = web
    head = _head("/api/v1/triggers/no-such-trigger", {"Transfer-Encoding": "chunked"})
    with _open(port, head) as sock:
        sender = Sender(sock, 30_000_000)
        sender.start()
        status, body = _answer(sock)
        sender.join(timeout=30)
    assert status == 413, body
    assert "1,000,000 bytes" in str(body["error"]), body
    assert sender.stopped_by, "the server read all 30 MB"
    assert sender.sent < 15_000_000, sender.sent  # the cap, plus what sockets buffer


def test_every_route_caps_chunked_bodies_before_authentication(web: tuple[int, str]) -> None:
    port, token = web
    for headers in ({}, {"Authorization": f"Bearer {token}"}):
        head = _head("/api/v1/conversations", {**headers, "Transfer-Encoding": "chunked"})
        with _open(port, head) as sock:
            sender = Sender(sock, 30_000_000)
            sender.start()
            status, body = _answer(sock)
            sender.join(timeout=30)
        assert status in (401, 413), body  # never read to the end: 401 reads nothing
        assert sender.stopped_by and sender.sent < 20_000_000, sender.sent
        if headers:
            assert status == 413 and f"{APP_CAP:,} bytes" in str(body), body
    length = {"Content-Length": str(APP_CAP + 1)}
    with _open(port, _head("/api/v1/conversations", length)) as sock:
        status, body = _answer(sock)  # at once: not a byte of the body was sent
    assert status == 413 and f"{APP_CAP:,} bytes" in str(body), body

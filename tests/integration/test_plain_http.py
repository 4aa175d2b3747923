"""The openai provider's plain-http transport against a raw server on a real socket.

The server answers each request with scripted bytes, so framing, keep-alive, a server
closing an idle connection, and broken answers are exactly what a test says.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from worker.providers.plain_http import PlainHTTPTransport, uses_plain_http

Answer = Callable[[socket.socket, bytes], bool]  # writes a response; False closes the socket


class RawServer:
    """Accepts connections; each request (head and Content-Length body) gets the next answer."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.connections = 0
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    try:
                        data = conn.recv(65536)
                    except ConnectionResetError:  # the client went away
                        return
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                buffer = buffer[length:]
                try:
                    if not self.answers.pop(0)(conn, head):
                        return
                except (BrokenPipeError, ConnectionResetError):  # the client left mid-answer
                    return

    def close(self) -> None:
        self._sock.close()


def chunked(*pieces: bytes, status: bytes = b"200 OK", keep: bool = True) -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")
        return keep

    return answer


def counted(body: bytes, *, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(
            version + b" 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)
        )
        return version == b"HTTP/1.1"

    return answer


def raw(data: bytes, *, keep: bool = False, hold_s: float = 0.0) -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(data)
        time.sleep(hold_s)
        return keep

    return answer


@pytest.fixture
def client_for() -> Iterator[Callable[..., httpx2.Client]]:
    made: list[httpx2.Client] = []

    def make(server: RawServer, connections: int = 4, timeout: float = 5.0) -> httpx2.Client:
        client = httpx2.Client(
            base_url=server.url, transport=PlainHTTPTransport(connections), timeout=timeout
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_a_chunked_stream_arrives_piece_by_piece_and_the_connection_is_reused(
    client_for: Callable[..., httpx2.Client],
) -> None:
    server = RawServer(chunked(b"data: one\n\n", b"data: two\n\n"), counted(b'{"ok": true}'))
    client = client_for(server)
    with client.stream("POST", "/v1/chat", json={"model": "m"}) as response:
        assert response.status_code == 200
        assert list(response.iter_bytes()) == [b"data: one\n\n", b"data: two\n\n"]
    assert client.post("/v1/chat", content=b"x").json() == {"ok": True}
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/chat HTTP/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:" in first.lower()
    assert first.endswith(b'{"model":"m"}')


def test_a_server_that_closed_an_idle_connection_gets_the_request_on_a_new_one(
    client_for: Callable[..., httpx2.Client],
) -> None:
    # The server closes after answering without saying so, as at a keep-alive timeout.
    server = RawServer(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"), counted(b"again"))
    client = client_for(server)
    assert client.get("/a").text == "first"
    time.sleep(0.1)
    assert client.get("/b").text == "again"
    assert server.connections == 2
    assert server.requests[1].startswith(b"GET /b ")


def test_http_1_0_and_connection_close_are_not_reused(
    client_for: Callable[..., httpx2.Client],
) -> None:
    server = RawServer(
        counted(b"old", version=b"HTTP/1.0"),
        counted(b"closing", extra=b"Connection: close\r\n"),
        counted(b"third"),
    )
    client = client_for(server)
    transport = client._transport
    assert isinstance(transport, PlainHTTPTransport)
    assert client.get("/").text == "old"
    assert not any(transport._idle.values())  # not pooled, so not tried again
    assert [client.get("/").text for _ in range(2)] == ["closing", "third"]
    assert server.connections == 3


def test_a_body_read_until_close_and_a_gzip_body_are_decoded(
    client_for: Callable[..., httpx2.Client],
) -> None:
    packed = gzip.compress(b'{"a": 1}')
    server = RawServer(
        raw(b"HTTP/1.1 200 OK\r\n\r\nuntil the end"),
        counted(packed, extra=b"Content-Encoding: gzip\r\n"),
    )
    client = client_for(server)
    assert client.get("/").text == "until the end"
    assert client.get("/").json() == {"a": 1}


def test_an_error_status_body_is_read_and_the_connection_kept(
    client_for: Callable[..., httpx2.Client],
) -> None:
    server = RawServer(
        chunked(b'{"error": "slow down"}', status=b"429 Too Many Requests"), counted(b"ok")
    )
    client = client_for(server)
    response = client.get("/")
    assert (response.status_code, response.json()) == (429, {"error": "slow down"})
    assert client.get("/").text == "ok"
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer, message",
    [
        (raw(b"garbage\r\n\r\n"), "not an HTTP/1.1 status line"),
        (raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), "bad chunk size"),
        (raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), "mid-body"),
        (raw(b"HTTP/1.1 200 OK\r\nContent-Le"), "mid-head"),
        (raw(b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n"), "not a number"),
        (raw(b""), "disconnected without sending a response"),
    ],
)
def test_a_broken_answer_is_a_protocol_error_naming_what_broke(
    client_for: Callable[..., httpx2.Client], answer: Answer, message: str
) -> None:
    client = client_for(RawServer(answer))
    with pytest.raises(httpx2.RemoteProtocolError, match=message):
        client.get("/")


def test_a_silent_server_is_a_read_timeout_and_a_closed_port_a_connect_error(
    client_for: Callable[..., httpx2.Client],
) -> None:
    client = client_for(RawServer(raw(b"", hold_s=2.0)), timeout=0.3)
    with pytest.raises(httpx2.ReadTimeout):
        client.get("/")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(httpx2.ConnectError, match=f"127.0.0.1:{port}"):
        httpx2.Client(transport=PlainHTTPTransport(1)).get(f"http://127.0.0.1:{port}/")


def test_the_read_timeout_is_between_bytes_and_a_stalled_stream_times_out_mid_body(
    client_for: Callable[..., httpx2.Client],
) -> None:
    def trickle(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"one ", b"two ", b"three"):
            time.sleep(0.2)  # each gap under the timeout, all of them over it
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")
        return True

    def stall(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nhalf\r\n")
        time.sleep(1.5)
        return False

    server = RawServer(trickle, stall, counted(b"after"))
    client = client_for(server, timeout=0.35)
    assert client.get("/").text == "one two three"
    started = time.monotonic()
    with client.stream("GET", "/") as response:
        pieces = response.iter_raw()
        assert next(pieces) == b"half"
        with pytest.raises(httpx2.ReadTimeout):
            next(pieces)
    assert 0.3 < time.monotonic() - started < 1.2
    assert client.get("/").text == "after"
    assert server.connections == 2  # the stalled one was not lent again


def test_a_request_beyond_the_connection_bound_waits_then_times_out_and_a_slot_frees(
    client_for: Callable[..., httpx2.Client],
) -> None:
    server = RawServer(chunked(b"held"), counted(b"after"))
    client = client_for(server, connections=1, timeout=0.3)
    with client.stream("GET", "/") as held:
        started = time.monotonic()
        with pytest.raises(httpx2.PoolTimeout):
            client.get("/")
        assert time.monotonic() - started >= 0.25
        assert held.read() == b"held"
    assert client.get("/").text == "after"  # the slot came back when the response closed


def test_a_response_closed_before_its_end_closes_its_connection(
    client_for: Callable[..., httpx2.Client],
) -> None:
    def first_then_rest(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        time.sleep(0.3)  # the rest is not there when the reader stops
        conn.sendall(b"1\r\nb\r\n0\r\n\r\n")
        return True

    server = RawServer(first_then_rest, counted(b"fresh"))
    client = client_for(server)
    with client.stream("GET", "/") as response:
        assert next(response.iter_raw()) == b"a"
    assert client.get("/").text == "fresh"
    assert server.connections == 2  # the half-read one was not lent again


def test_a_stream_stopped_at_its_last_event_keeps_its_connection_when_the_end_has_arrived(
    client_for: Callable[..., httpx2.Client],
) -> None:
    # A reader stops at `[DONE]`; the body's last chunk came with it and is read on close.
    server = RawServer(
        chunked(b"data: one\n\n", b"data: [DONE]\n\n", b": trailing comment\n\n"),
        counted(b"next answer"),
    )
    client = client_for(server)
    with client.stream("POST", "/v1/chat", json={"model": "m"}) as response:
        pieces = response.iter_raw()
        assert [next(pieces), next(pieces)] == [b"data: one\n\n", b"data: [DONE]\n\n"]
        time.sleep(0.1)  # the rest of the body reaches the socket
    assert client.get("/").text == "next answer"  # not the first body's leftovers
    assert server.connections == 1


def test_only_plain_http_without_a_proxy_takes_this_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert uses_plain_http("http://127.0.0.1:8080/v1")
    assert not uses_plain_http("https://api.openai.com/v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert not uses_plain_http("http://models.internal/v1")
    monkeypatch.setenv("NO_PROXY", "models.internal")
    assert uses_plain_http("http://models.internal/v1")


def test_a_body_given_as_an_iterator_goes_whole_with_its_length(
    client_for: Callable[..., httpx2.Client],
) -> None:
    server = RawServer(counted(b"got it"))
    client = client_for(server)
    assert client.post("/", content=iter([b"part one, ", b"part two"])).text == "got it"
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert body == b"part one, part two"
    assert b"content-length: 18" in head.lower()
    assert b"transfer-encoding" not in head.lower()


_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, socket, sys, time, gevent, httpx2
from worker.providers.plain_http import PlainHTTPTransport
server = socket.create_server(("127.0.0.1", 0))
def answer_half_then_stall(conn):
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n4\\r\\nhalf\\r\\n")
    time.sleep(5)
def serve():
    while True:
        gevent.spawn(answer_half_then_stall, server.accept()[0])
gevent.spawn(serve)
client = httpx2.Client(transport=PlainHTTPTransport(4), timeout=0.4)
def call():
    with client.stream("GET", f"http://127.0.0.1:{server.getsockname()[1]}/") as response:
        try:
            list(response.iter_raw())
        except httpx2.ReadTimeout as exc:
            return f"ReadTimeout: {exc}"
    return "no timeout"
started = time.monotonic()
calls = [gevent.spawn(call) for _ in range(3)]
gevent.joinall(calls)
print(json.dumps([[c.value for c in calls], time.monotonic() - started]))
"""


def test_a_stalled_stream_times_out_in_a_gevent_worker_as_in_threads() -> None:
    # Under gevent, shutting a socket cancels its reader's wait instead of ending its read.
    outcomes, elapsed_s = _run_under_gevent(_UNDER_GEVENT)
    assert outcomes == ["ReadTimeout: waiting for the model server: nothing for 0.4 s"] * 3
    assert 0.4 <= elapsed_s < 3.0  # long before the server's five seconds of silence


_PACED_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, socket, time, gevent, gevent.socket, httpx2
import gevent._socketcommon as common
from worker.providers.plain_http import PlainHTTPTransport
failed_reads = 0
clear = common.exc_clear
def counted():
    global failed_reads
    failed_reads += 1
    clear()
common.exc_clear = counted  # gevent's recv calls it after each read that found nothing
server = socket.create_server(("127.0.0.1", 0))
def answer_paced(conn):
    gevent.socket.wait_read(conn.fileno())  # the server's own reads do not count
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n")
    for n in range(8):
        time.sleep(0.03)
        conn.sendall(b"6\\r\\npiece%d\\r\\n" % n)
    conn.sendall(b"0\\r\\n\\r\\n")
    time.sleep(5)
def serve():
    while True:
        gevent.spawn(answer_paced, server.accept()[0])
gevent.spawn(serve)
client = httpx2.Client(transport=PlainHTTPTransport(4), timeout=5)
with client.stream("GET", f"http://127.0.0.1:{server.getsockname()[1]}/") as response:
    body = b"".join(response.iter_raw())
print(json.dumps([body.decode(), failed_reads]))
"""


def test_a_paced_stream_under_gevent_waits_instead_of_failing_reads() -> None:
    body, failed_reads = _run_under_gevent(_PACED_UNDER_GEVENT)
    assert body == "".join(f"piece{n}" for n in range(8))
    assert failed_reads == 0  # gevent's recv tried no read before data came (eight pauses)


def _run_under_gevent(script: str) -> Any:
    """What `script` (monkey-patched by gevent, in a process of its own) prints, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)

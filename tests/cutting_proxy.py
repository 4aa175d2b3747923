"""A TCP proxy in front of a Redis that can lose one reply or one request.

Losing a reply, it passes a command on, lets Redis run it, then closes the client's
connection instead of passing the reply back: the connection drops after the command was
carried out, as after a network cut or a primary failing between a write and its answer.
Losing a request, it closes the connection without passing the command on: the write never
happened, and the client cannot tell that either."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["CuttingProxy"]


class CuttingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._armed: bytes | None = None
        self._forward = True  # whether the armed command reaches Redis
        self.cuts = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_reply_to(self, marker: bytes) -> None:
        """The next command whose bytes hold `marker` runs, and its reply is lost."""
        with self._lock:
            self._armed, self._forward = marker, True

    def drop_request(self, marker: bytes) -> None:
        """The next command whose bytes hold `marker` never reaches Redis."""
        with self._lock:
            self._armed, self._forward = marker, False

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            cut = threading.Event()  # set: this connection's replies are dropped
            pair = (client, server, cut)
            threading.Thread(target=self._upstream, args=pair, daemon=True).start()
            threading.Thread(target=self._downstream, args=pair, daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                forward = True
                with self._lock:
                    if self._armed is not None and self._armed in data:
                        self._armed, forward = None, self._forward
                        self.cuts += 1
                        cut.set()
                if forward:
                    server.sendall(data)
                if cut.is_set():
                    time.sleep(0.1)  # Redis runs it; its reply is never passed on
                    break
        except OSError:
            pass
        _close(client, server)

    def _downstream(
        self, client: socket.socket, server: socket.socket, cut: threading.Event
    ) -> None:
        try:
            while (data := server.recv(65536)) and not cut.is_set():
                client.sendall(data)
        except OSError:
            pass
        if not cut.is_set():
            _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

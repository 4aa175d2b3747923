"""The embedded Redis starts though a port picked for it is taken before it binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis

from shared.errors import StorageError
from shared.local import embedded_redis
from shared.local.embedded_redis import EmbeddedRedis


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as when another process's connection takes the picked port on a busy machine
    with _bound() as taken:
        busy = taken.getsockname()[1]
        picks = iter([busy])
        free_port = embedded_redis.free_port
        monkeypatch.setattr(embedded_redis, "free_port", lambda: next(picks, None) or free_port())
        server = EmbeddedRedis().start()
        try:
            assert server.port != busy
            client = redis.Redis(port=server.port)
            try:
                assert client.ping()
            finally:
                client.close()
        finally:
            server.stop()


def test_a_port_given_is_not_changed_and_its_refusal_is_clear(tmp_path: Path) -> None:
    with _bound() as taken:
        busy = taken.getsockname()[1]
        server = EmbeddedRedis(port=busy, data_dir=tmp_path)
        with pytest.raises(StorageError, match="redis-server exited at start"):
            server.start()
        assert server.port == busy


def _bound() -> socket.socket:
    """A socket bound to a free port, not listening: as an outgoing connection holds one."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock

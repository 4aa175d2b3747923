"""A pooled connection is checked before it is lent: one its server closed is connected again,
one with nothing to read is lent as it is (shared/store/lend_check.py)."""

from __future__ import annotations

import select

import redis

from shared.settings import Settings
from shared.store.connection import WORKER_POOL, connect
from shared.store.lend_check import LendCheckParser


def _pool(client: redis.Redis) -> redis.ConnectionPool:
    return client.connection_pool


def test_clients_check_with_the_quick_parser(settings: Settings) -> None:
    for client in (connect(settings), connect(settings, pool=WORKER_POOL)):
        client.ping()
        connection = _pool(client).get_connection()
        assert isinstance(connection._parser, LendCheckParser)
        _pool(client).release(connection)


def test_a_clean_connection_is_lent_again(settings: Settings) -> None:
    client = connect(settings, pool=WORKER_POOL)
    client.ping()
    first = _pool(client).get_connection()
    socket = first._sock
    _pool(client).release(first)
    again = _pool(client).get_connection()
    assert again is first and again._sock is socket  # not reconnected
    assert not again.can_read()
    _pool(client).release(again)


def test_a_connection_its_server_closed_is_connected_again_before_it_is_lent(
    settings: Settings,
) -> None:
    client, admin = connect(settings, pool=WORKER_POOL), connect(settings)
    connection = _pool(client).get_connection()
    connection.send_command("CLIENT", "ID")
    killed, socket = connection.read_response(), connection._sock
    _pool(client).release(connection)
    admin.client_kill_filter(_id=killed)
    select.select([socket], [], [], 5)  # the close reaches this end
    lent = _pool(client).get_connection()
    assert lent._sock is not None and lent._sock is not socket  # connected again, not dead
    lent.send_command("CLIENT", "ID")
    assert lent.read_response() != killed
    _pool(client).release(lent)

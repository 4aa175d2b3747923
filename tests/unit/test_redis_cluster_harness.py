"""The Redis Cluster harness forms a real cluster that refuses what only a cluster refuses."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import ClusterCrossSlotError

from shared.local import embedded_cluster
from shared.local.embedded_cluster import SLOTS, RedisClusterNodes

CROSS_SLOT_SCRIPT = "return redis.call('MGET', KEYS[1], KEYS[2])"


@pytest.fixture
def cluster3() -> Iterator[RedisClusterNodes]:
    with RedisClusterNodes(primaries=3) as cluster:
        yield cluster


def _tag_in(first: int, last: int) -> str:
    """A hash tag whose slot lies in [first, last]."""
    for n in range(100_000):
        tag = f"t{n}"
        if first <= key_slot(tag.encode()) <= last:
            return tag
    raise AssertionError(f"no tag found for slots {first}-{last}")


def _cross_slot_eval(node: redis.Redis) -> str:
    """The error a node answers to a script declaring keys of two different slots.

    redis-py raises ClusterCrossSlotError for exactly the replies whose code is CROSSSLOT, and
    keeps only the text after the code.
    """
    a, b = "{a}x", "{b}x"
    assert key_slot(a.encode()) != key_slot(b.encode())
    with pytest.raises(ClusterCrossSlotError) as refused:
        node.eval(CROSS_SLOT_SCRIPT, 2, a, b)
    return str(refused.value)


def test_three_primaries_split_the_slots_and_refuse_cross_slot(
    cluster3: RedisClusterNodes,
) -> None:
    client = cluster3.client()
    try:
        for index, port in enumerate(cluster3.ports):
            first, last = cluster3.slot_range(index)
            tag = _tag_in(first, last)
            key = f"{{{tag}}}:k"
            assert client.set(key, str(index))
            assert client.get(key) == str(index)
            node = redis.Redis(port=port, decode_responses=True)
            try:
                slot = key_slot(key.encode())
                assert node.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 1
                others = [p for p in cluster3.ports if p != port]
                for other_port in others:
                    other = redis.Redis(port=other_port)
                    try:
                        assert other.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 0
                    finally:
                        other.close()
                assert "same slot" in _cross_slot_eval(node)
            finally:
                node.close()
    finally:
        client.close()


def test_one_primary_owns_every_slot_and_still_refuses_cross_slot() -> None:
    with RedisClusterNodes(primaries=1) as cluster:
        assert cluster.slot_range(0) == (0, SLOTS - 1)
        node = redis.Redis(port=cluster.ports[0], decode_responses=True)
        try:
            info = node.execute_command("CLUSTER INFO")
            assert info["cluster_slots_assigned"] == str(SLOTS)
            assert info["cluster_state"] == "ok"
            assert "same slot" in _cross_slot_eval(node)
        finally:
            node.close()
        client = cluster.client()
        try:
            assert client.set("k", "v")
            assert client.get("k") == "v"
        finally:
            client.close()


def test_a_port_taken_before_its_node_binds_it_is_picked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as when another process's connection takes a picked port on a busy machine
    with _bound() as taken:
        busy = taken.getsockname()[1]
        picked: list[list[int]] = []
        free_ports = embedded_cluster._free_ports

        def bus_port_taken_at_first(count: int) -> list[int]:
            ports = free_ports(count)
            if not picked:
                ports[-1] = busy  # the last node's bus port
            picked.append(ports)
            return ports

        monkeypatch.setattr(embedded_cluster, "_free_ports", bus_port_taken_at_first)
        with RedisClusterNodes(primaries=1) as cluster:
            assert len(picked) == 2 and busy not in cluster.ports + cluster.bus_ports
            node = redis.Redis(port=cluster.ports[0], decode_responses=True)
            try:
                assert node.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
            finally:
                node.close()


def _bound() -> socket.socket:
    """A socket bound to a free port, not listening: as an outgoing connection holds one."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock

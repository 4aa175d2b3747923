"""Lease renewal against a real Redis: held leases renewed together, a replaced one lost."""

from __future__ import annotations

import time
from typing import Any

import redis

from shared.store.keys import KeySpace
from worker.lease import Lease, _renew_all, _Renewer


class _Counting(redis.Connection):
    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        _Counting.sent += 1
        super().send_packed_command(command, check_health)


def test_leases_are_renewed_in_one_pipeline_and_a_replaced_one_is_lost(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    kwargs = real_redis.connection_pool.connection_kwargs
    counted = redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=_Counting, **kwargs)
    )
    leases = [Lease(counted, keys, f"r{n}", f"tok{n}", 30_000) for n in range(20)]
    for lease in leases:
        real_redis.set(keys.lease(lease.cid), lease.token, px=1_000)
    real_redis.set(keys.lease("r3"), "another worker", px=1_000)
    leases[5].stop()
    counted.ping()  # the connection's handshake is not a renewal
    before = _Counting.sent
    held = _renew_all(leases)
    assert _Counting.sent - before == 1  # one pipeline for all of them
    assert held == [n not in (3, 5) for n in range(20)]
    assert leases[3].lost.is_set() and not leases[0].lost.is_set()
    assert all(real_redis.pttl(keys.lease(f"r{n}")) > 20_000 for n in range(20) if n not in (3, 5))
    assert real_redis.pttl(keys.lease("r5")) <= 1_000


def test_a_lease_due_before_the_others_wakes_the_renewer_and_later_ones_wait_their_turn(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    renewer = _Renewer()
    slow = Lease(real_redis, keys, "slow", "tok-slow", 60_000)  # first renewal in 20 s
    real_redis.set(keys.lease("slow"), "tok-slow", px=60_000)
    renewer.add(slow)
    time.sleep(0.1)  # the thread now waits for the slow lease's turn
    quick = Lease(real_redis, keys, "quick", "tok-quick", 600)  # renewed every 200 ms
    real_redis.set(keys.lease("quick"), "tok-quick", px=600)
    renewer.add(quick)
    time.sleep(1.5)  # without a renewal it would have lapsed twice over
    assert real_redis.get(keys.lease("quick")) == "tok-quick"
    assert real_redis.pttl(keys.lease("slow")) < 60_000  # not renewed before its turn
    quick.stop()
    slow.stop()

"""The bounded pools' free-connection queue serves waiting callers in arrival order."""

from __future__ import annotations

import threading
import time
from queue import Empty

import pytest
import redis

from shared.settings import Settings
from shared.store.connection import CLIENT_POOL, connect
from shared.store.fair_queue import FairLifoQueue


def waiting(queue: FairLifoQueue, count: int) -> None:
    """Until `count` callers stand in the queue's line."""
    deadline = time.monotonic() + 5
    while len(queue._line) < count:
        assert time.monotonic() < deadline, "the callers did not start waiting"
        time.sleep(0.005)


def getter(queue: FairLifoQueue, name: str, got: list[tuple[str, object]]) -> threading.Thread:
    def run() -> None:
        got.append((name, queue.get(timeout=5)))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_newcomer_cannot_take_what_was_put_back_for_a_waiting_caller() -> None:
    queue = FairLifoQueue()
    got: list[tuple[str, object]] = []
    waiter = getter(queue, "waiter", got)
    waiting(queue, 1)
    queue.put_nowait("connection")
    with pytest.raises(Empty):
        queue.get(timeout=0.01)  # a newcomer: the waiter is first in line
    waiter.join(timeout=5)
    assert got == [("waiter", "connection")]


def test_waiting_callers_are_served_in_the_order_they_came() -> None:
    queue = FairLifoQueue()
    got: list[tuple[str, object]] = []
    threads = []
    for n, name in enumerate("abcde"):
        threads.append(getter(queue, name, got))
        waiting(queue, n + 1)
    for item in range(5):
        queue.put_nowait(item)
    for thread in threads:
        thread.join(timeout=5)
    assert [name for name, _ in got] == list("abcde")
    assert sorted(item for _, item in got) == [0, 1, 2, 3, 4]


def test_a_caller_that_gives_up_passes_its_turn_on() -> None:
    queue = FairLifoQueue()
    got: list[tuple[str, object]] = []
    gave_up: list[bool] = []

    def give_up() -> None:
        try:
            queue.get(timeout=0.2)
        except Empty:
            gave_up.append(True)

    impatient = threading.Thread(target=give_up)
    impatient.start()
    waiting(queue, 1)
    patient = getter(queue, "patient", got)
    waiting(queue, 2)
    impatient.join(timeout=5)
    assert gave_up == [True]
    queue.put_nowait("connection")
    patient.join(timeout=5)
    assert got == [("patient", "connection")]
    assert not queue._line


def test_items_stay_last_in_first_out_and_an_idle_get_does_not_wait() -> None:
    queue = FairLifoQueue()
    for item in ("cold", "warm"):
        queue.put_nowait(item)
    started = time.monotonic()
    assert queue.get(timeout=5) == "warm"
    assert queue.get(block=False) == "cold"
    assert time.monotonic() - started < 0.5
    with pytest.raises(Empty):
        queue.get(block=False)


def test_bounded_pools_use_the_fair_queue(real_redis: redis.Redis, settings: Settings) -> None:
    client = connect(settings, pool=CLIENT_POOL)
    try:
        assert isinstance(client.connection_pool.pool, FairLifoQueue)  # type: ignore[attr-defined]
        assert client.ping() is True
    finally:
        client.close()

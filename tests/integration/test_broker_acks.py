"""The worker's broker channel: acks free their place at once, and records are kept exactly.

A gevent worker's consumer keeps its channel across a reconnect. Before the fix, each
task that ended while Redis restarted kept a place of the channel's prefetch window
taken, and after `concurrency` of them the worker never fetched again: the batch of
`faults --only redis_restart` stalled with its items counted running. Here the channel
is the worker's own (`worker.broker.install`), the broker a real redis-server killed
and started again on its append-only file.
"""

from __future__ import annotations

import json
import time
from base64 import b64decode
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Message, Producer, Queue

from shared.local.embedded_redis import EmbeddedRedis
from worker.broker import install

QUEUE = "acks-test"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir=tmp_path / "broker", appendonly=True).start()
    yield server
    server.stop()


def test_an_ack_while_the_broker_is_away_frees_its_place_and_lands_once_it_is_back(
    broker: EmbeddedRedis,
) -> None:
    store = redis.Redis.from_url(broker.url)
    with Connection(broker.url, transport_options={"visibility_timeout": 1}) as connection:
        # a window of one place, as a worker of concurrency 1
        channel, _ = _filled(connection, messages=1, places=1)
        message = channel.basic_get(QUEUE, no_ack=False)
        assert message is not None
        assert not channel.qos.can_consume()  # the one place is taken by the delivery
        assert store.zcard("unacked_index") == 1

        broker.stop(kill=True)
        message.ack()
        assert channel.qos.can_consume(), "the ack left the only place taken"
        time.sleep(0.2)  # ticks that find the broker away keep the record's removal
        assert len(channel.acks) == 1

        broker.start()  # from its append-only file
        _wait_for(lambda: len(channel.acks) == 0 and store.zcard("unacked_index") == 0)
        time.sleep(1.2)  # past the visibility timeout: nothing is due again
        channel.qos.restore_visible(num=10, interval=0)
        assert channel.basic_get(QUEUE, no_ack=False) is None, "an acked message came back"


def test_a_closing_channel_removes_its_acks_records_and_puts_back_the_rest(
    broker: EmbeddedRedis,
) -> None:
    store = redis.Redis.from_url(broker.url)
    with Connection(broker.url, transport_options={"visibility_timeout": 3600}) as connection:
        channel, _ = _filled(connection, messages=3, places=3)
        taken = [channel.basic_get(QUEUE, no_ack=False) for _ in range(3)]
        assert all(m is not None for m in taken)
        taken[0].ack()  # type: ignore[union-attr]
        taken[1].ack()  # type: ignore[union-attr]
        channel.close()  # at once: the acks' removal had no tick to wait for
        assert store.zcard("unacked_index") == 0
        back = [json.loads(b64decode(json.loads(m)["body"])) for m in store.lrange(QUEUE, 0, -1)]
    assert back == [{"n": 2}]  # the one unacked, put back; the acked ones not


def _filled(connection: Connection, *, messages: int, places: int) -> tuple[Any, Queue]:
    """The worker's channel (`install`) on a queue holding `messages` ({"n": 0}, ...), with
    a prefetch window of `places`."""
    install(pool_wait_s=1.0)
    queue = Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)
    channel = connection.channel()
    queue(channel).declare()
    producer = Producer(channel, exchange=queue.exchange, routing_key=QUEUE)
    for n in range(messages):
        producer.publish({"n": n})
    channel.basic_qos(0, places, False)
    return channel, queue


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


def test_messages_taken_while_more_wait_are_recorded_by_the_fetch_and_come_back_unacked(
    broker: EmbeddedRedis,
) -> None:
    # The first message comes by BRPOP and kombu's record; the ones after it by the fetch
    # script, which records them itself. Both records must be what kombu restores from.
    options = {"visibility_timeout": 1, "global_keyprefix": "p:celery:"}
    store = redis.Redis.from_url(broker.url)
    with Connection(broker.url, transport_options=options) as connection:
        channel, queue = _filled(connection, messages=5, places=5)
        got: list[Message] = []
        with Consumer(channel, [queue], callbacks=[lambda _, message: got.append(message)]):
            deadline = time.monotonic() + 10
            while len(got) < 5 and time.monotonic() < deadline:
                connection.drain_events(timeout=1)
                if len(got) == 3:
                    store.script_flush()  # as a restart would: the script by digest is unknown
        assert sorted(m.decode()["n"] for m in got) == [0, 1, 2, 3, 4]
        calls = {k: v["calls"] for k, v in store.info("commandstats").items()}
        assert calls["cmdstat_evalsha"] >= 2 and calls["cmdstat_eval"] >= 2  # fetched by script
        assert store.zcard("p:celery:unacked_index") == 5
        records = [json.loads(v) for v in store.hgetall("p:celery:unacked").values()]
        bodies = [json.loads(b64decode(message["body"])) for message, _, _ in records]
        assert sorted(body["n"] for body in bodies) == [0, 1, 2, 3, 4]
        assert {(exchange, key) for _, exchange, key in records} == {(QUEUE, QUEUE)}

        got[0].ack()
        got[4].ack()
        _wait_for(lambda: store.zcard("p:celery:unacked_index") == 3)
        time.sleep(1.2)  # past the visibility timeout: the three unacked are due again
        channel.qos.restore_visible(num=10, interval=0)
        again = [channel.basic_get(QUEUE, no_ack=True) for _ in range(4)]
    assert sorted(m.decode()["n"] for m in again if m is not None) == sorted(
        m.decode()["n"] for m in got[1:4]
    )
    assert again[3] is None

"""An ack that finds the broker away frees its prefetch place; the message comes back later.

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
from collections.abc import Iterator
from pathlib import Path

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


def test_a_failed_ack_frees_its_place_and_the_message_is_delivered_again(
    broker: EmbeddedRedis,
) -> None:
    install(pool_wait_s=1.0)
    queue = Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)
    with Connection(broker.url, transport_options={"visibility_timeout": 1}) as connection:
        channel = connection.channel()
        queue(channel).declare()
        Producer(channel, exchange=queue.exchange, routing_key=QUEUE).publish({"n": 1})
        channel.basic_qos(0, 1, False)  # a window of one place, as a worker of concurrency 1
        message = channel.basic_get(QUEUE, no_ack=False)
        assert message is not None
        assert not channel.qos.can_consume()  # the one place is taken by the delivery

        broker.stop(kill=True)
        with pytest.raises(Exception, match="onnect"):
            message.ack()
        assert channel.qos.can_consume(), "the failed ack still holds the only place"

        broker.start()
        time.sleep(1.2)  # past the visibility timeout: the unconfirmed delivery is due again
        channel.qos.restore_visible(num=10, interval=0)
        again = channel.basic_get(QUEUE, no_ack=False)
        assert again is not None, "the message whose ack failed was lost"
        assert again.decode() == {"n": 1}
        again.ack()
        assert channel.basic_get(QUEUE, no_ack=False) is None


def test_messages_taken_while_more_wait_are_recorded_by_the_fetch_and_come_back_unacked(
    broker: EmbeddedRedis,
) -> None:
    # The first message comes by BRPOP and kombu's record; the ones after it by the fetch
    # script, which records them itself. Both records must be what kombu restores from.
    install(pool_wait_s=1.0)
    queue = Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)
    options = {"visibility_timeout": 1, "global_keyprefix": "p:celery:"}
    store = redis.Redis.from_url(broker.url)
    with Connection(broker.url, transport_options=options) as connection:
        channel = connection.channel()
        queue(channel).declare()
        producer = Producer(channel, exchange=queue.exchange, routing_key=QUEUE)
        for n in range(5):
            producer.publish({"n": n})
        channel.basic_qos(0, 5, False)
        got: list[Message] = []
        with Consumer(channel, [queue], callbacks=[lambda _, message: got.append(message)]):
            deadline = time.monotonic() + 10
            while len(got) < 5 and time.monotonic() < deadline:
                connection.drain_events(timeout=1)
        assert sorted(m.decode()["n"] for m in got) == [0, 1, 2, 3, 4]
        assert store.info("commandstats")["cmdstat_eval"]["calls"] >= 4  # fetched by script
        assert store.zcard("p:celery:unacked_index") == 5
        records = [json.loads(v) for v in store.hgetall("p:celery:unacked").values()]
        bodies = [json.loads(b64decode(message["body"])) for message, _, _ in records]
        assert sorted(body["n"] for body in bodies) == [0, 1, 2, 3, 4]
        assert {(exchange, key) for _, exchange, key in records} == {(QUEUE, QUEUE)}

        got[0].ack()
        got[4].ack()
        assert store.zcard("p:celery:unacked_index") == 3
        time.sleep(1.2)  # past the visibility timeout: the three unacked are due again
        channel.qos.restore_visible(num=10, interval=0)
        again = [channel.basic_get(QUEUE, no_ack=True) for _ in range(4)]
    assert sorted(m.decode()["n"] for m in again if m is not None) == sorted(
        m.decode()["n"] for m in got[1:4]
    )
    assert again[3] is None

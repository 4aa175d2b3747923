"""An ack that finds the broker away frees its prefetch place; the message comes back later.

A gevent worker's consumer keeps its channel across a reconnect. Before the fix, each
task that ended while Redis restarted kept a place of the channel's prefetch window
taken, and after `concurrency` of them the worker never fetched again: the batch of
`faults --only redis_restart` stalled with its items counted running. Here the channel
is the worker's own (`worker.broker.install`), the broker a real redis-server killed
and started again on its append-only file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection, Exchange, Producer, Queue

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

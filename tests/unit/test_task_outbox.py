"""The task outbox on a real Redis: state writes put their task in it when the broker is apart,
one relay at a time publishes it, and nothing taken is dropped unpublished."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from kombu.transport.native_delayed_delivery import calculate_routing_key

from shared.client import Client
from shared.client.broker import (
    BrokerKind,
    broker_config,
    broker_kind,
    countdown_for,
    uses_outbox,
)
from shared.client.outbox import OutboxTask
from shared.client.tasks import ADVANCE, celery_config
from shared.errors import SettingsError
from shared.metrics.state import StateCollector
from shared.settings import Settings, load_settings
from shared.store.keys import KeySpace
from shared.store.task_outbox import TaskOutbox
from worker.relay import Relay

RABBIT = "amqp://guest:guest@127.0.0.1:5672/signoff"


def entry(n: int) -> str:
    return OutboxTask(task=ADVANCE, args=[f"c{n}"], queue="q").model_dump_json()


@pytest.fixture
def outbox(real_redis: redis.Redis, keys: KeySpace) -> TaskOutbox:
    """Relays with a lease no stall of a loaded machine outlasts between two calls."""
    return TaskOutbox(real_redis, keys, 0, lease_ms=10_000)


def fill(outbox: TaskOutbox, count: int) -> None:
    for n in range(count):  # as the scripts push: LPUSH, the oldest at the right
        outbox.client.lpush(outbox.keys.task_outbox(0), entry(n))


def test_entries_are_taken_oldest_first_and_dropped_once_acknowledged(outbox: TaskOutbox) -> None:
    fill(outbox, 5)
    assert outbox.take("a", 3) == [entry(0), entry(1), entry(2)]
    assert outbox.take("a", 3) == [entry(0), entry(1), entry(2)]  # unacknowledged: again
    assert outbox.done("a", 2)
    assert outbox.take("a", 3) == [entry(2)]  # what is left of the batch comes first, alone
    assert outbox.done("a", 1)
    assert outbox.take("a", 3) == [entry(3), entry(4)]
    assert outbox.done("a", 2)
    assert outbox.take("a", 3) == [] and outbox.waiting() == 0


def test_one_relay_at_a_time_and_the_next_publishes_what_a_dead_one_took(
    outbox: TaskOutbox,
) -> None:
    fill(outbox, 2)
    short = TaskOutbox(outbox.client, outbox.keys, 0, lease_ms=200)  # a relay with a short lease
    assert short.take("dead", 10) == [entry(0), entry(1)]  # then it dies, unacknowledged
    assert outbox.take("next", 10) is None  # its lease still runs
    time.sleep(0.25)
    assert outbox.take("next", 10) == [entry(0), entry(1)]
    assert not outbox.done("dead", 2), "a relay that lost the lease dropped entries"
    assert outbox.take("next", 10) == [entry(0), entry(1)]
    assert outbox.done("next", 2, release=True)
    assert outbox.take("other", 10) == []  # released: no need to wait for the lease


def test_waiting_returns_when_an_entry_comes_and_consumes_nothing(outbox: TaskOutbox) -> None:
    started = time.monotonic()
    outbox.wait(0.2)
    assert time.monotonic() - started >= 0.15  # empty: it waited
    pusher = threading.Timer(0.1, fill, args=(outbox, 1))
    pusher.start()
    started = time.monotonic()
    outbox.wait(5)
    assert time.monotonic() - started < 2
    assert outbox.waiting() == 1 and outbox.take("a", 10) == [entry(0)]


def test_a_relay_acknowledges_what_it_published_before_a_failure(outbox: TaskOutbox) -> None:
    fill(outbox, 3)
    published: list[OutboxTask] = []

    def publish(task: OutboxTask) -> None:
        if task.args == ["c1"]:
            raise ConnectionError("broker away")
        published.append(task)

    relay = Relay(outbox, publish, token="r")
    with pytest.raises(ConnectionError):
        relay.step()
    assert [t.args for t in published] == [["c0"]]
    relay.publish = published.append
    assert relay.step() == 2  # the rest of the batch
    assert relay.step() == 0
    assert [t.args for t in published] == [["c0"], ["c1"], ["c2"]]


def test_an_entry_that_does_not_parse_is_dropped_not_blocking(outbox: TaskOutbox) -> None:
    outbox.client.lpush(outbox.keys.task_outbox(0), "not json")
    fill(outbox, 1)
    published: list[OutboxTask] = []
    assert Relay(outbox, published.append).step() == 2
    assert [t.args for t in published] == [["c0"]]


def test_a_prompt_with_a_broker_apart_writes_its_advance_to_the_outbox(
    real_redis: redis.Redis, settings: Settings
) -> None:
    own = settings.model_copy(
        update={"key_prefix": f"ob{uuid.uuid4().hex[:6]}", "broker_url": RABBIT}
    )
    with Client(own) as client:  # no broker is reached: the script writes the outbox

        def no_second_write(conversation_id: str) -> None:
            raise AssertionError(f"advance for {conversation_id} sent apart from its prompt")

        client.tasks.advance = no_second_write  # type: ignore[method-assign]
        conversation = client.new_conversation()
        conversation.send("first")
        raw = client.redis.lrange(client.keys.task_outbox(0), 0, -1)
        [task] = [OutboxTask.model_validate_json(r) for r in raw]
        assert task.task == ADVANCE and task.args == [conversation.conversation_id]
        assert task.queue == f"{own.key_prefix}.turns"


def test_the_broker_follows_the_url() -> None:
    state = Settings(redis_url="redis://h:6379/0")
    assert broker_kind(state) is BrokerKind.STATE_REDIS and not uses_outbox(state)
    same = state.model_copy(update={"broker_url": "redis://h:6379/0"})
    assert broker_kind(same) is BrokerKind.STATE_REDIS
    apart = state.model_copy(update={"broker_url": "redis://other:6379/0"})
    assert broker_kind(apart) is BrokerKind.REDIS and uses_outbox(apart)
    rabbit = state.model_copy(update={"broker_url": RABBIT})
    assert broker_kind(rabbit) is BrokerKind.RABBITMQ and uses_outbox(rabbit)


def test_rabbitmq_gets_quorum_queues_on_topic_exchanges_and_redis_what_it_had() -> None:
    rabbit = Settings(broker_url=RABBIT)
    config = celery_config(rabbit)
    assert config["broker_url"] == RABBIT
    assert config["task_default_queue_type"] == "quorum"
    assert config["broker_transport_options"] == {"confirm_publish": True}
    assert config["task_acks_late"] and config["task_default_delivery_mode"] == "persistent"
    for queue in config["task_queues"]:
        assert queue.queue_arguments == {"x-queue-type": "quorum"}
        assert queue.exchange.type == "topic"  # native delayed delivery needs it
    state = Settings(redis_url="redis://h:6379/0")
    assert broker_config(state, ["q"]) == {
        "broker_url": "redis://h:6379/0",
        "broker_transport_options": {
            "visibility_timeout": state.visibility_timeout_s,
            "global_keyprefix": "signoff:celery:",
            "unacked_mutex_expire": 30,  # not kombu's 5 minutes after a death holding it
        },
        "result_backend_transport_options": {
            "visibility_timeout": state.visibility_timeout_s,
            "global_keyprefix": "signoff:celery:",
            "unacked_mutex_expire": 30,
        },
    }


def test_countdowns_on_rabbitmq_are_whole_seconds_rounded_up() -> None:
    """Celery truncates a countdown to RabbitMQ's whole seconds and refuses one under 1 s: a
    half-second retry was never sent."""
    rabbit = Settings(broker_url=RABBIT)
    assert [countdown_for(rabbit, s) for s in (0, 0.2, 1.0, 1.5, 30)] == [None, 1, 1, 2, 30]
    routing = celery_config(rabbit)["task_queues"][0].routing_key
    calculate_routing_key(int(countdown_for(rabbit, 0.2) or 0), routing)  # what Celery does
    with pytest.raises(ValueError, match="positive"):  # what it did with 0.2 s as it was
        calculate_routing_key(int(0.2), routing)
    redis_apart = Settings(broker_url="redis://other:6379/0")
    assert [countdown_for(redis_apart, s) for s in (0, 0.2, 1.5)] == [None, 0.2, 1.5]


def test_an_unknown_broker_scheme_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_BROKER_URL", "kafka://somewhere")
    with pytest.raises(SettingsError, match="SIGNOFF_BROKER_URL"):
        load_settings()


def test_the_queue_depth_gauge_counts_the_outbox_of_a_broker_apart(
    outbox: TaskOutbox, keys: KeySpace
) -> None:
    fill(outbox, 3)
    apart = Settings(broker_url=RABBIT, key_prefix=keys.prefix)
    families = {f.name: f for f in StateCollector(outbox.client, keys, apart).collect()}
    depths = {s.labels["queue"]: s.value for s in families["signoff_queue_depth"].samples}
    assert depths == {"outbox": 3}

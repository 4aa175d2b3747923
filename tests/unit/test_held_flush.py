"""A held flush goes out with the writer's next round trip (the next flush, the model call's
reservation, or a tool call's claim), against a real Redis: one round trip, in order, and
fenced as one."""

from __future__ import annotations

import json
import socket
from typing import Any, cast

import pytest
import redis

from bench.common import counting_client, round_trips
from shared.errors import StorageError
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.events import EVENT, StepEvent
from shared.models.steps import Step, StepStatus
from shared.settings import Settings
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace
from worker.budget import RESERVE_SCRIPT, SCOPES
from worker.checkpoint import TurnCheckpoint
from worker.flush import Flush
from worker.leg import Leg
from worker.tool_ledger import _CLAIM as _CLAIM_CALL
from worker.tool_ledger import ToolLedger
from worker.writer import _FLUSH, LeaseLost, Writer

CID, TID, TOKEN = "c1", "t1", "7"


def _writer(client: redis.Redis, keys: KeySpace, settings: Settings) -> Writer:
    return Writer(
        client, keys, settings, CID, token=TOKEN, turn_id=TID, max_history_size=0, model="m"
    )


def _flush(writer: Writer, text: str) -> Flush:
    index = writer.next_position
    step = Step.model_response(turn_id=TID, index=index, status=StepStatus.DONE, content=text)
    event = StepEvent(conversation_id=CID, turn_id=TID, step_index=index, step=step)
    return Flush(steps=[step], events=[event])


def _reservation(keys: KeySpace) -> tuple[list[str], list[object]]:
    """reserve.lua's keys and args for the conversation's own budget, under TOKEN."""
    conversation = keys.conversation(CID)
    script_keys = [
        keys.prices(),
        *[conversation] * len(SCOPES),
        *[conversation] * len(SCOPES),
        keys.rate_pause("scripted"),
        keys.lease(CID),
    ]
    args: list[object] = ["scripted/m", 100, 50, json.dumps(["conversation"]), 60, "", TOKEN]
    return script_keys, args


def _texts(client: redis.Redis, keys: KeySpace) -> list[str]:
    found = [EVENT.validate_json(f["e"]) for _, f in client.xrange(keys.events(CID))]
    return [e.step.content for e in found]  # type: ignore[attr-defined]


@pytest.fixture
def counting(redis_server: EmbeddedRedis, real_redis: redis.Redis) -> redis.Redis:
    """A client counting its round trips, connected, with both scripts loaded."""
    client = counting_client(redis_server.url)
    for script in (_FLUSH, RESERVE_SCRIPT):
        assert client.script_load(script.body) == script.sha
    return client


def test_a_held_flush_rides_the_reservation_in_one_round_trip(
    counting: redis.Redis, real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = _writer(counting, keys, settings)
    writer.hold(_flush(writer, "started"))
    # counted as written at once (the context has it), though Redis has nothing yet
    assert writer.next_position == 1 and len(writer.written) == 1 and writer.unsent_steps == 1
    assert _texts(real_redis, keys) == []
    script_keys, args = _reservation(keys)
    replies: list[object] = []
    trips = round_trips(lambda: replies.append(writer.carrying(RESERVE_SCRIPT, script_keys, args)))
    assert trips == 1
    assert replies[0] == [1, None, 150, 0, 0]
    assert _texts(real_redis, keys) == ["started"]
    assert real_redis.hget(keys.conversation(CID), "reserved:tokens") == "150"
    assert writer.unsent_steps == 0 and writer.next_position == 1


def test_a_held_flush_goes_before_the_next_flush_in_the_same_round_trip(
    counting: redis.Redis, real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = _writer(counting, keys, settings)
    writer.hold(_flush(writer, "first"))
    trips = round_trips(lambda: writer.write(_flush(writer, "second")))
    assert trips == 1
    assert _texts(real_redis, keys) == ["first", "second"]
    positions = [json.loads(s)["step_index"] for s in real_redis.lrange(keys.steps(CID), 0, -1)]
    assert positions == [0, 1] and writer.next_position == 2
    assert [s.content for s in writer.written] == ["first", "second"]


def test_a_leg_that_lost_its_lease_writes_nothing_and_reserves_nothing(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), "8")  # another leg's
    writer = _writer(real_redis, keys, settings)
    writer.hold(_flush(writer, "stale"))
    with pytest.raises(LeaseLost):
        writer.carrying(RESERVE_SCRIPT, *_reservation(keys))
    assert _texts(real_redis, keys) == []
    assert real_redis.hget(keys.conversation(CID), "reserved:tokens") is None
    # the reservation alone checks the lease as well (worker/budget.py raises LeaseLost)
    assert writer.carrying(RESERVE_SCRIPT, *_reservation(keys)) == ["fenced"]
    assert real_redis.hget(keys.conversation(CID), "reserved:tokens") is None


def test_scripts_redis_lost_are_run_again_in_order(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = _writer(real_redis, keys, settings)
    writer.write(_flush(writer, "loaded"))
    real_redis.script_flush()  # as after a restart: neither script is known by its digest
    writer.hold(_flush(writer, "held"))
    reply = writer.carrying(RESERVE_SCRIPT, *_reservation(keys))
    assert reply[0] == 1
    writer.hold(_flush(writer, "held again"))
    real_redis.script_flush()
    writer.write(_flush(writer, "after"))
    assert _texts(real_redis, keys) == ["loaded", "held", "held again", "after"]
    assert real_redis.hget(keys.conversation(CID), "reserved:tokens") == "150"


def test_a_round_trip_that_fails_tells_the_held_flush(keys: KeySpace, settings: Settings) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = redis.Redis(port=port, decode_responses=True, socket_connect_timeout=0.5)
    writer = _writer(gone, keys, settings)
    told: list[str] = []
    writer.hold(_flush(writer, "lost"), if_unwritten=lambda: told.append("unwritten"))
    with pytest.raises(StorageError):
        writer.carrying(RESERVE_SCRIPT, *_reservation(keys))
    assert told == ["unwritten"]


def test_a_tool_calls_claim_carries_the_response_that_asked_for_it(
    counting: redis.Redis, real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = _writer(counting, keys, settings)
    ledger = ToolLedger(counting, keys, CID, by=TOKEN, carrier=writer)
    assert counting.script_load(_CLAIM_CALL.body) == _CLAIM_CALL.sha
    writer.hold(_flush(writer, "call the tool"))
    claimed: list[bool] = []
    assert round_trips(lambda: claimed.append(ledger.claim("call_1"))) == 1
    assert claimed == [True]
    assert _texts(real_redis, keys) == ["call the tool"]
    record = json.loads(real_redis.hget(keys.tool_results(CID), "call_1") or "{}")
    assert record == {"state": "started", "by": TOKEN}
    assert ledger.claim("call_1") is False  # claimed once: a later leg reuses its outcome


def test_a_leg_that_lost_its_lease_claims_no_tool_call(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), "8")
    writer = _writer(real_redis, keys, settings)
    ledger = ToolLedger(real_redis, keys, CID, by=TOKEN, carrier=writer)
    with pytest.raises(LeaseLost):
        ledger.claim("call_1")  # nothing held: the claim's own check
    writer.hold(_flush(writer, "stale"))
    with pytest.raises(LeaseLost):
        ledger.claim("call_1")
    assert not real_redis.exists(keys.tool_results(CID))
    assert _texts(real_redis, keys) == []


def _leg(writer: Writer, history: HistoryStore, settings: Settings, turn_start: int) -> Leg:
    """A leg with what its context and its turn's steps read: the writer and the history."""
    unused = cast(Any, None)
    return Leg(
        settings=settings,
        config=unused,
        turn=unused,
        lease=unused,
        writer=writer,
        history=history,
        tool_calls=unused,
        notifications=unused,
        batches=unused,
        checkpoint=TurnCheckpoint(turn_start=turn_start),
        policy=unused,
        deltas=unused,
        prices=unused,
    )


def test_the_context_and_the_turns_steps_have_a_held_flushs_steps_once(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = _writer(real_redis, keys, settings)
    leg = _leg(writer, HistoryStore(real_redis, keys, CID), settings, turn_start=0)
    writer.write(_flush(writer, "asked"))
    writer.hold(_flush(writer, "held"))
    assert [s.content for s in leg.context()] == ["asked", "held"]  # read with one in Redis
    writer.send_held()
    assert [s.content for s in leg.context()] == ["asked", "held"]
    assert [s.content for s in leg.turn_steps()] == ["asked", "held"]


def test_the_turns_steps_read_back_from_redis_have_the_held_ones(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), TOKEN)
    writer = Writer(
        real_redis, keys, settings, CID, token=TOKEN, turn_id=TID, max_history_size=2, model="m"
    )
    for text in ("asked", "thought", "answered"):
        writer.write(_flush(writer, text))
    # history keeps two steps: the turn's start is gone, so its steps are read back
    leg = _leg(writer, HistoryStore(real_redis, keys, CID), settings, turn_start=0)
    assert [s.step_index for s in leg.context()] == [1, 2]
    writer.hold(_flush(writer, "held"))
    assert [s.content for s in leg.turn_steps()] == ["thought", "answered", "held"]
    writer.send_held()
    assert [s.content for s in leg.turn_steps()] == ["answered", "held"]

"""The flush script against a real Redis: what a typed Flush writes, byte for byte."""

from __future__ import annotations

import time

import pytest
import redis

from shared.models.events import EVENT, ConversationStatus, StatusEvent, StepEvent, TurnStatus
from shared.models.notifications import DeliveryEntry, PassiveEvent
from shared.models.steps import Step, StepStatus, UsageMetadata
from shared.models.webhooks import WebhookEvent, WebhookEventKind
from shared.settings import Settings
from shared.store.keys import KeySpace
from worker.flush import Flush, TurnEnd
from worker.writer import FAILURES_KEPT, LeaseLost, Writer

CID, TID = "c1", "t1"


def writer(client: redis.Redis, keys: KeySpace, settings: Settings, token: str = "") -> Writer:
    return Writer(
        client, keys, settings, CID, token=token, turn_id=TID, max_history_size=0, model="m"
    )


def compaction_delivery() -> DeliveryEntry:
    return DeliveryEntry.passive(
        f"{CID}.{TID}-compaction",
        conversation_id=CID,
        turn_id=TID,
        event=PassiveEvent.COMPACTION,
        title="History compacted",
    )


def events(client: redis.Redis, keys: KeySpace) -> list[object]:
    return [EVENT.validate_json(fields["e"]) for _, fields in client.xrange(keys.events(CID))]


def test_steps_and_events_are_stored_as_pydantic_wrote_them(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    text = 'é ✓ 😀 "quoted" back\\slash \x00 </end> \u2028'
    step = Step.model_response(turn_id=TID, index=0, status=StepStatus.DONE, content=text)
    event = StepEvent(conversation_id=CID, turn_id=TID, step_index=0, step=step)
    writer(real_redis, keys, settings).write(Flush(steps=[step], events=[event]))
    assert real_redis.lrange(keys.steps(CID), 0, -1) == [step.model_dump_json()]
    assert real_redis.hget(keys.history_meta(CID), "last_response") == text
    assert events(real_redis, keys) == [event]


@pytest.mark.parametrize("closed", [False, True])
def test_an_ending_turn_leaves_the_conversation_idle_or_closed(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings, closed: bool
) -> None:
    real_redis.hset(keys.conversation(CID), mapping={"closed": int(closed), "active_turn": TID})
    flush = Flush(
        turn_status=TurnStatus.FAILED,
        end=TurnEnd(finished_at=12.5, error="boom"),
        conversation_status=ConversationStatus.IDLE,
    )
    writer(real_redis, keys, settings).write(flush)
    status = ConversationStatus.CLOSED if closed else ConversationStatus.IDLE
    conversation = real_redis.hgetall(keys.conversation(CID))
    assert conversation["status"] == status.value
    assert conversation["active_turn"] == conversation["parked_on"] == ""
    assert conversation["updated_at"] == "12.5"
    assert real_redis.hgetall(keys.turn(CID, TID)) == {
        "status": "failed",
        "finished_at": "12.5",
        "checkpoint": "",
        "error": "boom",
    }
    assert events(real_redis, keys) == [
        StatusEvent(conversation_id=CID, turn_id=TID, status=status)
    ]


def test_deliveries_go_to_both_streams_in_order(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    delivery = compaction_delivery()
    writer(real_redis, keys, settings).write(Flush(deliveries=[delivery]))
    for stream in (keys.conversation_notifications(CID), keys.notification_stream(0)):
        ((_, fields),) = real_redis.xrange(stream)
        assert list(fields.items()) == list(delivery.fields().items())


def test_a_fenced_flush_writes_nothing(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    real_redis.set(keys.lease(CID), "7")
    step = Step.to_user("late")
    with pytest.raises(LeaseLost):
        writer(real_redis, keys, settings, token="6").write(
            Flush(steps=[step], turn_status=TurnStatus.RUNNING, parked_on="")
        )
    assert real_redis.keys(f"{keys.prefix}:*") == [keys.lease(CID)]


def test_a_flush_after_redis_forgot_its_scripts_still_writes_once(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    """A flush is sent by digest; on NOSCRIPT (Redis restarted) its body goes, and it runs once."""
    delivery = compaction_delivery()
    flusher = writer(real_redis, keys, settings)
    step = Step.model_response(turn_id=TID, index=0, status=StepStatus.DONE, content="hi")
    flusher.write(Flush(steps=[step], deliveries=[delivery]))
    real_redis.script_flush()
    again = Step.model_response(turn_id=TID, index=1, status=StepStatus.DONE, content="again")
    flusher.write(Flush(steps=[again], deliveries=[delivery]))
    assert real_redis.lrange(keys.steps(CID), 0, -1) == [
        step.model_dump_json(),
        again.model_dump_json(),
    ]
    assert real_redis.xlen(keys.notification_stream(0)) == 2
    assert flusher.next_position == 2


def test_usage_is_counted_for_the_day_under_the_model_by_the_script(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    usage = UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7)
    flusher = writer(real_redis, keys, settings)
    step = Step.model_response(turn_id=TID, index=0, status=StepStatus.DONE, content="hi")
    flusher.write(Flush(steps=[step], usage=usage))
    real_redis.script_flush()  # a direct call survives a Redis that forgot the script too
    flusher.write(Flush(usage=usage))
    flusher.write(Flush(usage=UsageMetadata()))  # nothing to count
    [day] = real_redis.keys(keys.usage_by_day("*", 0))
    assert day == keys.usage_by_day(time.strftime("%Y-%m-%d", time.gmtime()), 0)
    assert real_redis.hgetall(day) == {
        "m:prompt_token_count": "6",
        "m:candidates_token_count": "8",
        "m:total_token_count": "14",
    }
    assert real_redis.hget(keys.history(CID)[4], "total_token_count") == "14"


@pytest.mark.parametrize("queued", [0, 1])
def test_a_turns_end_lets_the_lease_go_only_when_nothing_is_queued(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings, queued: int
) -> None:
    real_redis.set(keys.lease(CID), "6")
    if queued:
        real_redis.rpush(keys.inbox(CID), "t2")  # the next prompt, waiting for this turn
    flusher = writer(real_redis, keys, settings, token="6")
    flusher.write(Flush(turn_status=TurnStatus.RUNNING))  # not an end: the lease stays
    assert real_redis.get(keys.lease(CID)) == "6" and not flusher.released
    end = Flush(
        turn_status=TurnStatus.COMPLETED,
        end=TurnEnd(finished_at=1.0),
        conversation_status=ConversationStatus.IDLE,
    )
    assert flusher.write(end).released is (queued == 0)
    assert flusher.released is (queued == 0)
    assert real_redis.get(keys.lease(CID)) == (None if queued == 0 else "6")


def test_webhook_events_reach_the_outbox_only_when_an_endpoint_is_registered(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    def event(n: int) -> WebhookEvent:
        kind = WebhookEventKind.TURN_COMPLETED
        return WebhookEvent(event_id=f"turn.completed:{CID}:{n}", kind=kind, data={"n": n})

    flusher = writer(real_redis, keys, settings)
    flusher.write(Flush(webhooks=[event(1)]))
    assert not real_redis.exists(keys.webhook_outbox(0))
    real_redis.hset(keys.webhook_endpoints(), "wh_1", "{}")
    sent = [event(2), event(3)]
    flusher.write(Flush(webhooks=sent))
    kept = [fields["event"] for _, fields in real_redis.xrange(keys.webhook_outbox(0))]
    assert kept == [e.model_dump_json() for e in sent]


def test_a_failed_end_indexes_its_conversation_and_the_index_keeps_the_newest(
    real_redis: redis.Redis, keys: KeySpace, settings: Settings
) -> None:
    def end(cid: str, status: TurnStatus, at: float, kept: int) -> None:
        flusher = Writer(
            real_redis, keys, settings, cid, token="", turn_id=TID, max_history_size=0, model="m"
        )
        flusher.failures_kept = kept
        flusher.write(Flush(turn_status=TurnStatus.RUNNING))  # not an end: not indexed
        flusher.write(
            Flush(
                turn_status=status,
                end=TurnEnd(finished_at=at, error="boom"),
                conversation_status=ConversationStatus.IDLE,
            )
        )

    end("old", TurnStatus.FAILED, 10.0, kept=FAILURES_KEPT)
    end("fine", TurnStatus.COMPLETED, 11.0, kept=FAILURES_KEPT)
    end("cancelled", TurnStatus.CANCELLED, 12.0, kept=FAILURES_KEPT)
    assert real_redis.zrange(keys.failures(0), 0, -1, withscores=True) == [("old", 10.0)]
    end("newer", TurnStatus.FAILED, 20.0, kept=FAILURES_KEPT)
    end("old", TurnStatus.FAILED, 30.0, kept=FAILURES_KEPT)  # failed again: moved to the front
    assert real_redis.zrevrange(keys.failures(0), 0, -1) == ["old", "newer"]
    end("newest", TurnStatus.FAILED, 40.0, kept=2)
    assert real_redis.zrevrange(keys.failures(0), 0, -1) == ["newest", "old"]

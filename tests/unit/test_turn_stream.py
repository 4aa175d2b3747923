"""The sans-I/O followers: events and records in, reads and events out; no Redis, no clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from shared.client.drivers import drive, drive_async
from shared.client.follow import (
    BLOCK_MS,
    IdleWaiter,
    ReadEvents,
    ReadRecord,
    TurnFollower,
)
from shared.errors import Cancelled, TurnFailed
from shared.models.chunks import Text
from shared.models.events import (
    CancelledEvent,
    ChatResponse,
    CompletedEvent,
    EventBase,
    FailedEvent,
    StepEvent,
    TurnStartedEvent,
)
from shared.models.steps import Step, StepSource, StepTarget, StepType

CID = "c1"


def text_event(sid: str, text: str, *, turn_id: str = "t1") -> StepEvent:
    step = Step(
        source=StepSource.MODEL,
        target=StepTarget.USER,
        type=StepType.TEXT_RESPONSE,
        step_index=1,
        content_delta=text,
    )
    return StepEvent(id=sid, conversation_id=CID, turn_id=turn_id, step=step)


def completed(sid: str | None, *, turn_id: str = "t1", text: str = "done") -> CompletedEvent:
    response = ChatResponse(turn_id=turn_id, text=text)
    return CompletedEvent(id=sid, conversation_id=CID, turn_id=turn_id, response=response)


def completed_record(text: str = "from the record") -> dict[str, str]:
    return {
        "status": "completed",
        "response": ChatResponse(turn_id="t1", text=text).model_dump_json(),
    }


def test_follows_from_its_cursor_and_ends_at_the_terminal_event() -> None:
    follower = TurnFollower(CID, "t1", after="5-0")
    assert follower.next_read(0.0) == ReadEvents("5-0", BLOCK_MS)
    events: list[EventBase] = [
        TurnStartedEvent(id="6-0", conversation_id=CID, turn_id="t1"),
        text_event("7-0", "Hel"),
        completed("8-0"),
        text_event("9-0", "after the end", turn_id="t2"),
    ]
    assert follower.feed_events(events) == events[:3]
    assert follower.done and follower.after == "8-0"
    assert follower.next_read(1.0) is None
    assert follower.result().text == "done" and follower.error is None


def test_other_turns_events_pass_through_but_do_not_end_it() -> None:
    follower = TurnFollower(CID, "t1")
    other = [text_event("1-0", "theirs", turn_id="t0"), completed("2-0", turn_id="t0")]
    assert follower.feed_events(other) == other
    assert not follower.done and follower.after == "2-0"
    assert [follower.chunks(e) for e in other] == [[], []]
    assert follower.chunks(text_event("3-0", "ours")) == [Text(step_index=1, text="ours")]


def test_a_quiet_stream_reads_the_record_and_goes_on_while_the_turn_runs() -> None:
    follower = TurnFollower(CID, "t1", after="3-0")
    assert follower.feed_events([]) == []
    assert follower.next_read(0.0) == ReadRecord()
    assert follower.feed_record({"status": "running"}) == []
    assert follower.next_read(0.0) == ReadEvents("3-0", BLOCK_MS)


def test_a_trimmed_terminal_event_ends_the_turn_from_its_record() -> None:
    follower = TurnFollower(CID, "t1")
    follower.feed_events([])
    (rebuilt,) = follower.feed_record(completed_record())
    assert isinstance(rebuilt, CompletedEvent) and rebuilt.id is None
    assert rebuilt.conversation_id == CID and rebuilt.turn_id == "t1"
    assert follower.done and follower.next_read(0.0) is None
    assert follower.result().text == "from the record"


def test_failed_turn_raises_turn_failed_from_event_or_record() -> None:
    by_event = TurnFollower(CID, "t1")
    by_event.feed_events([FailedEvent(id="1-0", conversation_id=CID, turn_id="t1", error="boom")])
    by_record = TurnFollower(CID, "t1")
    by_record.feed_record({"status": "failed", "error": "boom"})
    for follower in (by_event, by_record):
        assert isinstance(follower.error, TurnFailed)
        with pytest.raises(TurnFailed, match=r"^turn t1 failed: boom$"):
            follower.result()


def test_cancelled_turn_raises_cancelled_from_event_or_record() -> None:
    by_event = TurnFollower(CID, "t1")
    by_event.feed_events([CancelledEvent(id="1-0", conversation_id=CID, turn_id="t1")])
    by_record = TurnFollower(CID, "t1")
    (rebuilt,) = by_record.feed_record({"status": "cancelled", "error": "aborted"})
    assert isinstance(rebuilt, CancelledEvent) and rebuilt.reason == "aborted"
    for follower in (by_event, by_record):
        with pytest.raises(Cancelled, match=r"^turn t1 was cancelled: aborted$"):
            follower.result()


def test_deadline_counts_from_the_first_read_and_raises_timeout_error() -> None:
    follower = TurnFollower(CID, "t1", timeout_s=5)
    assert isinstance(follower.next_read(100.0), ReadEvents)
    assert isinstance(follower.next_read(105.0), ReadEvents)
    with pytest.raises(TimeoutError, match="turn t1 did not end within 5s"):
        follower.next_read(105.1)


def test_past_the_deadline_a_quiet_stream_still_reads_the_record_first() -> None:
    follower = TurnFollower(CID, "t1", timeout_s=1)
    follower.next_read(0.0)
    follower.feed_events([])
    assert follower.next_read(2.0) == ReadRecord()
    follower.feed_record(completed_record())
    assert follower.next_read(2.0) is None and follower.result().text == "from the record"


def test_idle_waiter_reads_the_record_after_every_wake_up() -> None:
    waiter = IdleWaiter(after="4-0")
    assert waiter.next_read(0.0) == ReadRecord()
    waiter.feed_record(False)
    assert waiter.next_read(0.0) == ReadEvents("4-0", BLOCK_MS)
    waiter.feed_events([text_event("5-0", "x")])
    assert waiter.next_read(0.0) == ReadRecord() and waiter.after == "5-0"
    waiter.feed_record(True)
    assert waiter.next_read(0.0) is None and waiter.idle


def test_idle_waiter_blocks_no_longer_than_its_timeout_then_gives_up() -> None:
    waiter = IdleWaiter(timeout_s=1.5)
    waiter.next_read(10.0)
    waiter.feed_record(False)
    assert waiter.next_read(11.0) == ReadEvents("0-0", 500)
    waiter.feed_events([])
    waiter.feed_record(False)
    assert waiter.next_read(11.5) is None and not waiter.idle


class Script:
    """Reads for the drivers, from lists; a fake clock that moves a second a read."""

    def __init__(self, batches: list[list[EventBase]], records: list[dict[str, str]]) -> None:
        self.batches = iter(batches)
        self.records = iter(records)
        self.reads: list[str] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def read_events(self, after: str, block_ms: int) -> list[EventBase]:
        self.reads.append(f"events after {after}")
        self.now += block_ms / 1000
        return next(self.batches, [])

    def read_record(self) -> dict[str, str]:
        self.reads.append("record")
        return next(self.records)


def script() -> Script:
    return Script(
        [[text_event("1-0", "a")], [], [text_event("2-0", "b")]],
        [{"status": "running"}, completed_record()],
    )


def sync_run(source: Script) -> Iterator[EventBase]:
    follower = TurnFollower(CID, "t1")
    return drive(follower, source.read_events, source.read_record, clock=source.clock)


def test_sync_driver_only_reads_what_the_follower_asks_for() -> None:
    source = script()
    events = list(sync_run(source))
    assert [e.id for e in events] == ["1-0", "2-0", None]
    assert source.reads == [
        "events after 0-0",
        "events after 1-0",
        "record",
        "events after 1-0",
        "events after 2-0",
        "record",
    ]


def test_async_driver_matches_the_sync_one() -> None:
    by_sync, by_async = script(), script()
    expected = [e.id for e in sync_run(by_sync)]

    async def read_events(after: str, block_ms: int) -> list[EventBase]:
        return by_async.read_events(after, block_ms)

    async def read_record() -> dict[str, str]:
        return by_async.read_record()

    async def collect() -> list[EventBase]:
        follower = TurnFollower(CID, "t1")
        driven = drive_async(follower, read_events, read_record, clock=by_async.clock)
        return [event async for event in driven]

    assert [e.id for e in asyncio.run(collect())] == expected
    assert by_async.reads == by_sync.reads


def test_driver_raises_timeout_error_from_the_follower() -> None:
    source = Script([], [{"status": "running"}] * 10)
    follower = TurnFollower(CID, "t1", timeout_s=2.5)
    with pytest.raises(TimeoutError):
        list(drive(follower, source.read_events, source.read_record, clock=source.clock))
    assert source.reads.count("record") == 3

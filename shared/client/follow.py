"""Following an event stream without I/O: what to read next, what to yield, when it is over.

A follower is a state machine. It asks for a read (`ReadEvents`: block on the stream after
its cursor; `ReadRecord`: the stream was quiet, look at the record), is fed what was read,
and answers with the events to yield. The drivers in `shared.client.drivers` do the reading,
sync or async. A turn ends at its terminal event or, once the stream is quiet, from its turn
record: the capped stream may have trimmed the terminal event, or it was never written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from shared.errors import Cancelled, Conflict, NotFound, TurnFailed
from shared.models.chunks import ChunkFilter, StreamChunk
from shared.models.events import (
    CancelledEvent,
    ChatResponse,
    CompletedEvent,
    EventBase,
    FailedEvent,
    StepEvent,
    TurnStatus,
)
from shared.models.steps import Step

__all__ = [
    "BLOCK_MS",
    "Deadline",
    "Follower",
    "IdleWaiter",
    "Read",
    "ReadEvents",
    "ReadRecord",
    "TerminalEvent",
    "TurnFollower",
    "current_turn",
    "terminal_error",
    "terminal_from_record",
]

BLOCK_MS = 1000
"""The longest a read blocks on the stream, so a quiet stream is noticed within a second."""

START = "0-0"

TerminalEvent = CompletedEvent | FailedEvent | CancelledEvent
RecordT_contra = TypeVar("RecordT_contra", contravariant=True)


@dataclass(frozen=True)
class ReadEvents:
    """Block on the stream for up to `block_ms` for the events after `after`."""

    after: str
    block_ms: int


@dataclass(frozen=True)
class ReadRecord:
    """The stream was quiet: read the record that says whether the wait is over."""


Read = ReadEvents | ReadRecord


class Follower(Protocol[RecordT_contra]):
    """What a driver needs of a state machine; the record is what `ReadRecord` reads."""

    def next_read(self, now: float) -> Read | None: ...

    def feed_events(self, events: Sequence[EventBase]) -> list[EventBase]: ...

    def feed_record(self, record: RecordT_contra) -> list[EventBase]: ...


class Deadline:
    """A timeout that starts at the first look at the clock (None: no limit)."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self._at: float | None = None

    def remaining_s(self, now: float) -> float | None:
        if self.timeout_s is None:
            return None
        if self._at is None:
            self._at = now + self.timeout_s
        return self._at - now


def terminal_from_record(cid: str, turn_id: str, fields: Mapping[str, str]) -> TerminalEvent | None:
    """The terminal event a turn record stands for (no stream id), or None while it runs."""
    status = fields.get("status")
    if status == TurnStatus.COMPLETED:
        response = ChatResponse.model_validate_json(fields["response"])
        return CompletedEvent(conversation_id=cid, turn_id=turn_id, response=response)
    if status == TurnStatus.FAILED:
        return FailedEvent(conversation_id=cid, turn_id=turn_id, error=fields.get("error", ""))
    if status == TurnStatus.CANCELLED:
        return CancelledEvent(conversation_id=cid, turn_id=turn_id, reason=fields.get("error", ""))
    return None


def terminal_error(event: EventBase) -> TurnFailed | Cancelled | None:
    """The error a terminal event ends its turn with (None for any other event)."""
    if isinstance(event, FailedEvent):
        return TurnFailed(f"turn {event.turn_id} failed: {event.error}")
    if isinstance(event, CancelledEvent):
        return Cancelled(f"turn {event.turn_id} was cancelled: {event.reason}")
    return None


class TurnFollower:
    """One turn, from the cursor `after` until it ends; its record is the turn hash's fields.

    Yields every event of the conversation (other turns' too) through this turn's terminal
    one; a turn that ends from its record yields the terminal event the record stands for.
    Past `timeout_s` (counted from the first read) `next_read` raises TimeoutError.
    """

    def __init__(
        self, cid: str, turn_id: str, *, after: str = START, timeout_s: float | None = None
    ) -> None:
        self.cid = cid
        self.turn_id = turn_id
        self.after = after
        self.terminal: TerminalEvent | None = None
        self._deadline = Deadline(timeout_s)
        self._quiet = False
        self._filter = ChunkFilter()

    @property
    def done(self) -> bool:
        return self.terminal is not None

    def next_read(self, now: float) -> Read | None:
        """What to read next; None once the turn has ended."""
        remaining = self._deadline.remaining_s(now)
        if self.done:
            return None
        if self._quiet:
            return ReadRecord()
        if remaining is not None and remaining < 0:
            timeout = self._deadline.timeout_s
            raise TimeoutError(f"turn {self.turn_id} did not end within {timeout}s")
        return ReadEvents(self.after, BLOCK_MS)

    def feed_events(self, events: Sequence[EventBase]) -> list[EventBase]:
        """The events to yield, through this turn's terminal one; none read means quiet."""
        self._quiet = not events
        taken: list[EventBase] = []
        for event in events:
            taken.append(event)
            self.after = event.id or self.after
            if event.turn_id == self.turn_id and isinstance(event, TerminalEvent):
                self.terminal = event
                break
        return taken

    def feed_record(self, record: Mapping[str, str]) -> list[EventBase]:
        """The turn record, read when the stream was quiet: ends the turn if it has ended."""
        self._quiet = False
        self.terminal = terminal_from_record(self.cid, self.turn_id, record)
        return [] if self.terminal is None else [self.terminal]

    def steps(self, event: EventBase) -> list[Step]:
        """The step an event carries for this turn (none for other turns)."""
        if isinstance(event, StepEvent) and event.turn_id == self.turn_id:
            return [event.step]
        return []

    def chunks(self, event: EventBase) -> list[StreamChunk]:
        return [chunk for step in self.steps(event) for chunk in self._filter.feed(step)]

    @property
    def error(self) -> TurnFailed | Cancelled | None:
        """The error the turn ended with, if it failed or was cancelled."""
        return None if self.terminal is None else terminal_error(self.terminal)

    def result(self) -> ChatResponse:
        """The authoritative response, or the error that ended the turn."""
        if isinstance(self.terminal, CompletedEvent):
            return self.terminal.response
        raise self.error or TurnFailed(f"turn {self.turn_id} ended without a completed value")


class IdleWaiter:
    """Waits until no turn of a conversation runs or waits; its record is "is it idle?".

    Reads the record first and after every wake-up; the events only wake it. Past
    `timeout_s` it stops with `idle` False.
    """

    def __init__(self, *, after: str = START, timeout_s: float | None = None) -> None:
        self.after = after
        self.idle = False
        self._deadline = Deadline(timeout_s)
        self._check = True
        self._over = False

    def next_read(self, now: float) -> Read | None:
        remaining = self._deadline.remaining_s(now)
        if self.idle or self._over:
            return None
        if self._check:
            return ReadRecord()
        block_ms = BLOCK_MS if remaining is None else int(remaining * 1000)
        if block_ms <= 0:
            self._over = True
            return None
        return ReadEvents(self.after, min(block_ms, BLOCK_MS))

    def feed_events(self, events: Sequence[EventBase]) -> list[EventBase]:
        self._check = True
        for event in events:
            self.after = event.id or self.after
        return list(events)

    def feed_record(self, record: bool) -> list[EventBase]:
        self._check = False
        self.idle = record
        return []


def current_turn(cid: str, exists: object, active: object, queued: object) -> str:
    """The turn a follower without a turn id follows: the running one, else the next queued.

    Takes one transaction's replies (the conversation exists, its active turn, its inbox head).
    """
    if not exists:
        raise NotFound(f"conversation {cid} does not exist")
    if active:
        return str(active)
    if queued:
        return str(queued)
    raise Conflict(f"conversation {cid} has no running or queued turn")

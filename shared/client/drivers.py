"""The I/O around a `shared.client.follow` follower: one sync driver, one async driver.

A driver only reads what the follower asks for (events after its cursor, or the record
when the stream was quiet) and yields what the follower answers; every decision is the
follower's. The readers are passed in, so the same drivers serve every client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

from shared.client.follow import Follower, ReadEvents
from shared.models.events import EventBase

__all__ = ["drive", "drive_async"]

RecordT = TypeVar("RecordT")

Clock = Callable[[], float]


def drive(
    follower: Follower[RecordT],
    read_events: Callable[[str, int], list[EventBase]],
    read_record: Callable[[], RecordT],
    *,
    clock: Clock = time.monotonic,
) -> Iterator[EventBase]:
    """Yields the follower's events until it is done; `read_events(after, block_ms)` blocks."""
    while (read := follower.next_read(clock())) is not None:
        if isinstance(read, ReadEvents):
            yield from follower.feed_events(read_events(read.after, read.block_ms))
        else:
            yield from follower.feed_record(read_record())


async def drive_async(
    follower: Follower[RecordT],
    read_events: Callable[[str, int], Awaitable[list[EventBase]]],
    read_record: Callable[[], Awaitable[RecordT]],
    *,
    clock: Clock = time.monotonic,
) -> AsyncIterator[EventBase]:
    """`drive` for asyncio: the same follower, awaited reads."""
    while (read := follower.next_read(clock())) is not None:
        if isinstance(read, ReadEvents):
            events = follower.feed_events(await read_events(read.after, read.block_ms))
        else:
            events = follower.feed_record(await read_record())
        for event in events:
            yield event

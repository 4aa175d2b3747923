"""SSE streams: a conversation's events (gap replayed, then live) and the global feed.

A conversation stream subscribes to the live feed *before* it replays, then drops
live events at or before the last replayed id: whatever is published while the
replay runs arrives once, from one side or the other. The global feed has no
stream to replay from (events are stored per conversation, and their ids only
order events within one conversation), so it is live only: a client that
reconnects to it misses what was published while it was away.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from flask import Response

from shared.errors import StorageError
from shared.models.events import EventBase
from shared.store.event_log import EventLog
from webui.live.broadcaster import Broadcaster
from webui.live.frames import comment, event_frame, retry_frame
from webui.live.subscription import Subscription
from webui.stream_ids import is_after

__all__ = ["conversation_stream", "global_stream", "sse_response"]

log = logging.getLogger(__name__)

RETRY_MS = 2000
_REPLAY_PAGE = 500


def sse_response(body: Iterator[str], broadcaster: Broadcaster, sub: Subscription) -> Response:
    """A streaming response that unsubscribes when the server closes it, started or not."""
    response = Response(body, mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    response.call_on_close(lambda: broadcaster.unsubscribe(sub))
    return response


def conversation_stream(
    events: EventLog,
    broadcaster: Broadcaster,
    sub: Subscription,
    cid: str,
    *,
    last_event_id: str | None,
    heartbeat_s: float,
) -> Iterator[str]:
    """Replays events after `last_event_id` (if given), then follows live ones."""
    try:
        yield retry_frame(RETRY_MS)
        after = last_event_id
        if last_event_id is not None:
            for event in _replay(events, cid, last_event_id):
                after = event.id
                yield event_frame(event)
        yield from _live(sub, after, heartbeat_s)
    except StorageError as exc:
        # Headers are sent: end the stream; the client reconnects with its Last-Event-ID.
        log.warning("event stream of conversation %s ended: %s", cid, exc)
        yield comment("closed: storage unavailable; reconnect with Last-Event-ID")
    finally:
        broadcaster.unsubscribe(sub)


def global_stream(
    broadcaster: Broadcaster, sub: Subscription, *, heartbeat_s: float
) -> Iterator[str]:
    """Every conversation's events, live."""
    try:
        yield retry_frame(RETRY_MS)
        yield from _live(sub, None, heartbeat_s)
    finally:
        broadcaster.unsubscribe(sub)


def _replay(events: EventLog, cid: str, after: str) -> Iterator[EventBase]:
    while True:
        page = events.after(cid, after, count=_REPLAY_PAGE)
        yield from page
        if len(page) < _REPLAY_PAGE:
            return
        after = page[-1].id or after


def _live(sub: Subscription, after: str | None, heartbeat_s: float) -> Iterator[str]:
    """Live events; with `after` (one conversation's stream), only those after it.

    Events already queued are sent together, in one write. Stream ids only order
    events of one conversation: the global feed never compares them.
    """
    while not sub.ended:
        left = sub.time_left()  # ends the subscription once its lifetime is up
        wait = heartbeat_s if left is None else min(heartbeat_s, left)
        batch = sub.get_batch(wait)
        if not batch:
            if not sub.ended and (left is None or left >= heartbeat_s):
                yield comment("heartbeat")
            continue
        frames = []
        for event in batch:
            if after is not None and event.stream_id:  # live-only events have no place
                if not is_after(event.stream_id, after):
                    continue  # already replayed
                after = event.stream_id
            frames.append(event.frame)
        if frames:
            yield "".join(frames)
    yield comment(f"closed: {sub.ended_reason}; reconnect with Last-Event-ID")

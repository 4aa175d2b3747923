"""Server-Sent Events: the live feed of one web process and the event streams it serves.

- `frames`: the SSE wire format (an event, a comment, the retry hint).
- `subscription`: one client's bounded queue of live events.
- `broadcaster`: the process's one pub/sub connection, fanned out to subscriptions.
- `streams`: a conversation's stream (the gap replayed, then live) and the global feed.
- `events`: the two endpoints of the JSON API that answer with those streams.

Redis stream ids (their pattern and order) are `webui.stream_ids`: the audit log pages by them too.
"""

from __future__ import annotations

from webui.live.broadcaster import Broadcaster
from webui.live.streams import conversation_stream, global_stream, sse_response
from webui.live.subscription import LiveEvent, Subscription

__all__ = [
    "Broadcaster",
    "LiveEvent",
    "Subscription",
    "conversation_stream",
    "global_stream",
    "sse_response",
]

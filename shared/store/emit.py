"""Writing events: XADD to the conversation's stream, then PUBLISH, inside a Lua script.

`EMIT_LUA` (`shared/store/lua/emit.lua`) defines `emit(stream, maxlen, ttl_ms, channels, json)`,
put before every script that produces events, so the stream (for replay) and the channels
(for live readers) always carry the same event with the same id. A published message is
``"<stream id> <event json>"``.
"""

from __future__ import annotations

from shared.models.events import EventBase
from shared.store.lua import lua_source

__all__ = ["EMIT_LUA", "encode_event", "split_message"]

EMIT_LUA = lua_source("shared.store", "emit.lua")


def encode_event(event: EventBase) -> str:
    """An event as stored: its JSON without the stream id, which Redis assigns."""
    return event.model_dump_json(exclude={"id"}, exclude_none=True)


def split_message(message: str) -> tuple[str, str]:
    """Splits a published message into its stream id and event JSON."""
    stream_id, _, payload = message.partition(" ")
    return stream_id, payload

"""Writing events: XADD to the conversation's stream, then PUBLISH, inside a Lua script.

`EMIT_LUA` defines `emit(stream, maxlen, ttl_ms, channels, json)`, reused by every
script that produces events, so the stream (for replay) and the channels (for live
readers) always carry the same event with the same id. A published message is
``"<stream id> <event json>"``.
"""

from __future__ import annotations

from shared.events import EventBase

__all__ = ["EMIT_LUA", "encode_event", "split_message"]

EMIT_LUA = """
local function emit(stream, maxlen, ttl_ms, channels, json)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'e', json)
  redis.call('PEXPIRE', stream, ttl_ms)
  for _, channel in ipairs(channels) do redis.call('PUBLISH', channel, id .. ' ' .. json) end
  return id
end
"""


def encode_event(event: EventBase) -> str:
    """An event as stored: its JSON without the stream id, which Redis assigns."""
    return event.model_dump_json(exclude={"id"}, exclude_none=True)


def split_message(message: str) -> tuple[str, str]:
    """Splits a published message into its stream id and event JSON."""
    stream_id, _, payload = message.partition(" ")
    return stream_id, payload

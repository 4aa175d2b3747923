"""The runtime's only way to write: one fenced Lua script per flush.

A flush checks the lease's fencing token, appends finished steps with their usage
to history, adds events to the stream and publishes them, and updates the turn's
checkpoint and the conversation's fields: one round trip, all or nothing. It
returns whether an abort was requested for the running turn, so checking for
cancellation costs nothing extra.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.client import Pipeline

from shared.emit import EMIT_LUA, encode_event
from shared.errors import Conflict
from shared.events import ConversationStatus, EventBase
from shared.history import HISTORY_WRITE_LUA, history_args
from shared.keys import KeySpace
from shared.lua import LuaScript
from shared.redis_client import storage_errors
from shared.settings import Settings
from shared.steps import USAGE_FIELDS, Step, UsageMetadata

__all__ = ["Flush", "LeaseLost", "Writer"]

# KEYS: lease, conv, turn, events, five history keys, tool results, notification,
#       the conversation's notification delivery stream, the history's turn overflow
# ARGV: token, turn id, maxlen, ttl_ms, channel, channel_all, cid, new status ('' = unchanged),
#       then field pairs for the turn, the conversation, tool results and the notification
#       (each: count, name, value, ...), n events, json..., n deliveries, then per delivery
#       a count of pairs and the pairs, history args...
# A new status becomes 'closed' when the conversation was closed meanwhile; its status
# event is emitted here, after the flush's own events.
_FLUSH = LuaScript(
    EMIT_LUA
    + HISTORY_WRITE_LUA
    + """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'fenced'} end
local at = 9
local function set_pairs(key)
  local n = tonumber(ARGV[at]); at = at + 1
  for _ = 1, n do
    redis.call('HSET', key, ARGV[at], ARGV[at + 1]); at = at + 2
  end
end
set_pairs(KEYS[3])
set_pairs(KEYS[2])
set_pairs(KEYS[10])
set_pairs(KEYS[11])
local n = tonumber(ARGV[at]); at = at + 1
local channels = {ARGV[5], ARGV[6]}
local ids = {}
local first_event = at
at = at + n
local deliveries = tonumber(ARGV[at]); at = at + 1
for _ = 1, deliveries do
  local pairs_count = tonumber(ARGV[at]); at = at + 1
  local entry = {}
  for j = 0, 2 * pairs_count - 1 do entry[#entry + 1] = ARGV[at + j] end
  at = at + 2 * pairs_count
  redis.call('XADD', KEYS[12], 'MAXLEN', '~', ARGV[3], '*', unpack(entry))
end
local written = history_write({KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[13]}, ARGV, at)
for j = 0, n - 1 do
  ids[#ids + 1] = emit(KEYS[4], ARGV[3], ARGV[4], channels, ARGV[first_event + j])
end
if ARGV[8] ~= '' then
  local status = ARGV[8]
  if status == 'idle' and redis.call('HGET', KEYS[2], 'closed') == '1' then status = 'closed' end
  redis.call('HSET', KEYS[2], 'status', status)
  ids[#ids + 1] = emit(KEYS[4], ARGV[3], ARGV[4], channels, cjson.encode(
    {kind = 'status', conversation_id = ARGV[7], turn_id = ARGV[2], status = status}))
end
local cancel = 0
if ARGV[2] ~= '' and redis.call('HGET', KEYS[2], 'cancel_turn') == ARGV[2] then cancel = 1 end
return {'ok', written[1], cancel, ids}
"""
)


class LeaseLost(Conflict):
    """Raised when another worker took over the conversation; this leg must stop writing."""


@dataclass
class Flush:
    """What one round trip writes."""

    steps: list[Step] = field(default_factory=list)
    usage: UsageMetadata | None = None
    start_turn: bool = False
    events: list[EventBase] = field(default_factory=list)
    turn_fields: dict[str, Any] = field(default_factory=dict)
    conversation_fields: dict[str, Any] = field(default_factory=dict)
    status: ConversationStatus | None = None
    tool_results: dict[str, str] = field(default_factory=dict)
    notification_key: str = ""
    notification_fields: dict[str, Any] = field(default_factory=dict)
    # Notification deliveries: added to the conversation's delivery stream in the script
    # and to the global one in the same round trip.
    deliveries: list[dict[str, str]] = field(default_factory=list)
    # Commands on keys outside the conversation's slot, sent in the same round trip
    # (after the script; see docs/architecture.md on what that guarantees).
    global_commands: list[Callable[[Pipeline], object]] = field(default_factory=list)


@dataclass(frozen=True)
class FlushResult:
    first_position: int
    cancel_requested: bool
    event_ids: list[str]


class Writer:
    """Writes flushes for one conversation's running turn under a fencing token."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        cid: str,
        *,
        token: str,
        turn_id: str,
        max_history_size: int,
        model: str,
    ) -> None:
        self.client = client
        self.settings = settings
        self.cid = cid
        self.token = token
        self.turn_id = turn_id
        self.max_history_size = max_history_size
        self.model = model
        self._keys = keys
        self.cancel_seen = False  # an abort of this turn was reported by a flush
        self.on_flush: Callable[[Flush], None] | None = None  # called after each written flush
        self.written: list[Step] = []  # steps this writer appended, in order
        self._script_keys = [
            keys.lease(cid),
            keys.conversation(cid),
            keys.turn(cid, turn_id),
            keys.events(cid),
            keys.steps(cid),
            keys.history_meta(cid),
            keys.turn_starts(cid),
            keys.compactions(cid),
            keys.usage(cid),
            keys.tool_results(cid),
        ]
        self.round_trips = 0
        self.next_position = 0  # absolute history position of the next step; set by the leg

    def write(self, flush: Flush) -> FlushResult:
        keys = [
            *self._script_keys,
            flush.notification_key or self._script_keys[2],
            self._keys.conversation_notifications(self.cid),
            self._keys.turn_overflow(self.cid),
        ]
        with storage_errors(f"writing turn {self.turn_id} of conversation {self.cid}"):
            reply = self._send(keys, self._args(flush), flush)
        self.round_trips += 1
        if reply[0] == "fenced":
            raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
        self.next_position = int(reply[1]) + len(flush.steps)
        self.written += flush.steps
        result = FlushResult(int(reply[1]), reply[2] == 1, list(reply[3]))
        self.cancel_seen = self.cancel_seen or result.cancel_requested
        if self.on_flush is not None:
            self.on_flush(flush)
        return result

    def _args(self, flush: Flush) -> list[Any]:
        args: list[Any] = [
            self.token,
            self.turn_id,
            self.settings.stream_maxlen,
            self.settings.events_ttl_s * 1000,
            self._keys.live(self.cid),
            self._keys.live_all(),
            self.cid,
            flush.status.value if flush.status else "",
        ]
        for fields in (
            flush.turn_fields,
            flush.conversation_fields,
            flush.tool_results,
            flush.notification_fields,
        ):
            args += _pairs(fields)
        args += [len(flush.events), *(encode_event(e) for e in flush.events)]
        args.append(len(flush.deliveries))
        for entry in flush.deliveries:
            args += [len(entry), *(item for pair in entry.items() for item in pair)]
        args += history_args(
            flush.steps, self.max_history_size, usage=flush.usage, start_turn=flush.start_turn
        )
        return args

    def _send(self, keys: list[str], args: list[Any], flush: Flush) -> Any:
        usage = flush.usage if flush.usage is not None and not flush.usage.is_zero() else None
        if usage is None and not flush.global_commands and not flush.deliveries:
            return _FLUSH(self.client, keys, args)
        with self.client.pipeline(transaction=False) as pipe:
            _FLUSH(pipe, keys, args)
            if usage is not None:
                day_key = self._keys.usage_by_day(time.strftime("%Y-%m-%d", time.gmtime()))
                for name in USAGE_FIELDS:
                    pipe.hincrby(day_key, f"{self.model}:{name}", getattr(usage, name))
            for command in flush.global_commands:
                command(pipe)
            for entry in flush.deliveries:
                pipe.xadd(
                    self._keys.notification_stream(),
                    entry,  # type: ignore[arg-type]
                    maxlen=self.settings.stream_maxlen,
                    approximate=True,
                )
            return pipe.execute()[0]


def _pairs(fields: dict[str, Any]) -> list[Any]:
    flat: list[Any] = [len(fields)]
    for name, value in fields.items():
        flat += [name, value if isinstance(value, str | int | float) else json.dumps(value)]
    return flat

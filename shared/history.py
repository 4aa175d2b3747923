"""The history and usage of one conversation, kept in Redis.

Steps are a LIST of JSON documents; turn starts and compaction positions are
absolute positions, reported relative to the first retained step. Every write
(append, trim, index shift, usage) is one Lua script, so steps, indices and
usage never disagree, however many writers there are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError
from redis.client import Pipeline

from shared.errors import CorruptRecord
from shared.keys import KeySpace
from shared.lua import LuaScript
from shared.redis_client import storage_errors
from shared.settings import DEFAULT_MAX_HISTORY_SIZE
from shared.steps import USAGE_FIELDS, Step, StepSource, StepType, UsageMetadata

__all__ = [
    "HISTORY_WRITE_LUA",
    "HistoryPage",
    "HistorySnapshot",
    "HistoryStore",
    "UsageSummary",
    "history_args",
    "response_text",
    "structured_output",
]

_ABSENT = "-"
_PRESENT = "+"

# A Lua function other scripts reuse (the worker's flush script calls it too).
# k: steps, meta, turns, compactions, usage, turn overflow keys; a: ARGV; i: index of
# max_history_size in a. Trimming moves the latest turn's own steps to the overflow list
# instead of dropping them (a turn start empties it), so a turn's response keeps every step.
# Reads a[i]: max_history_size, a[i+1]: start_turn, a[i+2]: has_usage, a[i+3..i+7]: usage,
# a[i+8]: step count, then per step: json, is_compaction, response ("-"/"+text"), structured.
HISTORY_WRITE_LUA = """
local function history_write(k, a, i)
  local fields = {'prompt_token_count', 'candidates_token_count', 'total_token_count',
                  'cached_content_token_count', 'thoughts_token_count'}
  local max = tonumber(a[i])
  local appended = tonumber(redis.call('HGET', k[2], 'appended') or '0')
  local first = appended
  if a[i + 1] == '1' then
    redis.call('DEL', k[6])
    redis.call('HSET', k[2], 'turn_start', appended)
    redis.call('RPUSH', k[3], appended)
    for _, f in ipairs(fields) do redis.call('HDEL', k[5], 'turn:' .. f) end
  end
  if a[i + 2] == '1' then
    for j, f in ipairs(fields) do
      local n = tonumber(a[i + 2 + j])
      redis.call('HINCRBY', k[5], f, n)
      redis.call('HINCRBY', k[5], 'turn:' .. f, n)
    end
  end
  local count = tonumber(a[i + 8])
  local at = i + 9
  for _ = 1, count do
    redis.call('RPUSH', k[1], a[at])
    if a[at + 1] == '1' then redis.call('RPUSH', k[4], appended) end
    if string.sub(a[at + 2], 1, 1) == '+' then
      redis.call('HSET', k[2], 'last_response', string.sub(a[at + 2], 2))
    end
    if string.sub(a[at + 3], 1, 1) == '+' then
      redis.call('HSET', k[2], 'last_structured', string.sub(a[at + 3], 2))
    end
    appended = appended + 1
    at = at + 4
  end
  if count > 0 then redis.call('HSET', k[2], 'appended', appended) end
  if max > 0 then
    local len = redis.call('LLEN', k[1])
    if len > max then
      local drop = len - max
      local before = tonumber(redis.call('HGET', k[2], 'trimmed') or '0')
      local turn_start = redis.call('HGET', k[2], 'turn_start')
      if turn_start then
        local from = math.max(tonumber(turn_start) - before, 0)
        if from < drop then
          for _, raw in ipairs(redis.call('LRANGE', k[1], from, drop - 1)) do
            redis.call('RPUSH', k[6], raw)
          end
        end
      end
      redis.call('LTRIM', k[1], drop, -1)
      local trimmed = redis.call('HINCRBY', k[2], 'trimmed', drop)
      for _, key in ipairs({k[3], k[4]}) do
        while true do
          local head = redis.call('LINDEX', key, 0)
          if not head or tonumber(head) >= trimmed then break end
          redis.call('LPOP', key)
        end
      end
    end
  end
  return {first, at}
end
"""

_WRITE = LuaScript(HISTORY_WRITE_LUA + "return history_write(KEYS, ARGV, 1)[1]\n")


# Steps from an absolute position: the latest turn's trimmed steps (the overflow holds
# positions trimmed - len .. trimmed - 1) and then the retained ones. Returns {first, steps}.
_FROM_POSITION_LUA = """
local function from_position(steps_key, meta_key, overflow_key, position)
  local trimmed = tonumber(redis.call('HGET', meta_key, 'trimmed') or '0')
  local spilled = redis.call('LLEN', overflow_key)
  local first = math.max(position, trimmed - spilled)
  local out = {}
  if first < trimmed then
    out = redis.call('LRANGE', overflow_key, first - trimmed + spilled, -1)
  end
  for _, raw in ipairs(redis.call('LRANGE', steps_key, math.max(first - trimmed, 0), -1)) do
    out[#out + 1] = raw
  end
  return {first, out}
end
"""

# KEYS: steps, meta, compactions, turn overflow   ARGV: absolute start of the current turn
_CONTEXT = LuaScript(
    _FROM_POSITION_LUA
    + """
local start = 0
local last = redis.call('LINDEX', KEYS[3], -1)
if last then start = math.min(tonumber(last), tonumber(ARGV[1])) end
return from_position(KEYS[1], KEYS[2], KEYS[4], start)
"""
)


# KEYS: steps, meta, turn overflow   ARGV: absolute position
_SINCE = LuaScript(
    _FROM_POSITION_LUA + "return from_position(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))\n"
)


def response_text(step: Step) -> str | None:
    """The text of a complete model response, or None for any other step."""
    if step.source is StepSource.MODEL and step.is_complete_response:
        return step.content
    return None


def structured_output(step: Step) -> Any:
    """The payload of a Finish step that carries one, or None."""
    if step.type is StepType.FINISH:
        return step.structured_output
    return None


@dataclass(frozen=True)
class HistorySnapshot:
    """A consistent read of everything the store keeps for one conversation."""

    steps: list[Step]
    turn_start_indices: list[int]
    compaction_indices: list[int]
    trimmed: int
    appended: int
    last_response: str
    last_structured_output: Any
    cumulative_usage: UsageMetadata
    turn_usage: UsageMetadata | None

    @property
    def turn_count(self) -> int:
        return len(self.turn_start_indices)


@dataclass(frozen=True)
class HistoryPage:
    """Retained steps `offset`..`offset + len(steps)`; indices are relative to retained steps."""

    steps: list[Step]
    offset: int
    total: int
    trimmed: int
    turn_start_indices: list[int]
    compaction_indices: list[int]


@dataclass(frozen=True)
class UsageSummary:
    """Cumulative usage, the last turn's usage (None before any turn), and the turn count."""

    total: UsageMetadata
    last_turn: UsageMetadata | None
    turn_count: int


class HistoryStore:
    """History and usage of one conversation, bounded by `max_history_size`."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        conversation_id: str,
        *,
        max_history_size: int | None = None,
    ) -> None:
        self.client = client
        self.conversation_id = conversation_id
        self.max_history_size = (
            DEFAULT_MAX_HISTORY_SIZE if max_history_size is None else max_history_size
        )
        self._keys = [
            keys.steps(conversation_id),
            keys.history_meta(conversation_id),
            keys.turn_starts(conversation_id),
            keys.compactions(conversation_id),
            keys.usage(conversation_id),
            keys.turn_overflow(conversation_id),
        ]

    @property
    def keys(self) -> list[str]:
        """steps, meta, turn starts, compactions, usage, turn overflow: `history_write`'s KEYS."""
        return list(self._keys)

    # Writes: each is one script, one round trip; pass a pipeline to join a larger one.

    def append(
        self,
        *steps: Step,
        usage: UsageMetadata | None = None,
        start_turn: bool = False,
        pipeline: Pipeline | None = None,
    ) -> Any:
        """Appends finished steps (and usage, and a turn start) and trims to the bound.

        Returns the absolute position of the first appended step, or the queued
        pipeline when one is given.
        """
        args = history_args(steps, self.max_history_size, usage=usage, start_turn=start_turn)
        with storage_errors(f"writing history of conversation {self.conversation_id}"):
            return _WRITE(pipeline if pipeline is not None else self.client, self._keys, args)

    def start_turn(self, *, pipeline: Pipeline | None = None) -> Any:
        """Registers a turn boundary at the next step and resets the turn's usage."""
        return self.append(start_turn=True, pipeline=pipeline)

    def add_usage(self, usage: UsageMetadata, *, pipeline: Pipeline | None = None) -> Any:
        """Adds to the cumulative total and the current turn's usage."""
        return self.append(usage=usage, pipeline=pipeline)

    def clear(self) -> None:
        """Resets steps, turns, compactions and usage (one DEL, atomic)."""
        with storage_errors(f"clearing history of conversation {self.conversation_id}"):
            self.client.delete(*self._keys)

    # Reads

    def snapshot(self) -> HistorySnapshot:
        """Reads everything in one MULTI/EXEC so the parts agree with each other."""
        with (
            storage_errors(f"reading history of conversation {self.conversation_id}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            self.queue_snapshot(pipe)
            return self.parse_snapshot(pipe.execute())

    def queue_snapshot(self, pipe: Any) -> None:
        """Queues the reads of a snapshot on a (sync or async) MULTI pipeline."""
        steps_key, meta_key, turns_key, compactions_key, usage_key = self._keys[:5]
        pipe.lrange(steps_key, 0, -1)
        pipe.hgetall(meta_key)
        pipe.lrange(turns_key, 0, -1)
        pipe.lrange(compactions_key, 0, -1)
        pipe.hgetall(usage_key)

    def parse_snapshot(self, results: list[Any]) -> HistorySnapshot:
        raw_steps, meta, turns, compactions, usage = results
        trimmed = int(meta.get("trimmed", 0))
        return HistorySnapshot(
            steps=[self._parse(raw, trimmed + i) for i, raw in enumerate(raw_steps)],
            turn_start_indices=[int(p) - trimmed for p in turns],
            compaction_indices=[int(p) - trimmed for p in compactions],
            trimmed=trimmed,
            appended=int(meta.get("appended", 0)),
            last_response=meta.get("last_response", ""),
            last_structured_output=self._parse_structured(meta.get("last_structured")),
            cumulative_usage=_usage_from(usage, ""),
            turn_usage=_usage_from(usage, "turn:") if "turn:total_token_count" in usage else None,
        )

    def steps(self, start: int = 0, count: int | None = None) -> list[Step]:
        """Retained steps from relative position `start`, at most `count` of them."""
        stop = -1 if count is None else start + count - 1
        with (
            storage_errors(f"reading history of conversation {self.conversation_id}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hget(self._keys[1], "trimmed")
            pipe.lrange(self._keys[0], start, stop)
            trimmed_raw, raw_steps = pipe.execute()
        trimmed = int(trimmed_raw or 0)
        return [self._parse(raw, trimmed + start + i) for i, raw in enumerate(raw_steps)]

    def context_window(self, turn_start: int) -> list[Step]:
        """Steps from the last compaction (or the turn's start, if earlier) to the end.

        One script: the model's context never needs the steps a summary replaced.
        """
        keys = [self._keys[0], self._keys[1], self._keys[3], self._keys[5]]
        with storage_errors(f"reading context of conversation {self.conversation_id}"):
            first, raw_steps = _CONTEXT(self.client, keys, [turn_start])
        return [self._parse(raw, int(first) + i) for i, raw in enumerate(raw_steps)]

    def steps_since(self, position: int) -> list[Step]:
        """Retained steps from absolute `position` on (one script)."""
        with storage_errors(f"reading history of conversation {self.conversation_id}"):
            first, raw_steps = _SINCE(self.client, [*self._keys[:2], self._keys[5]], [position])
        return [self._parse(raw, int(first) + i) for i, raw in enumerate(raw_steps)]

    def page(self, offset: int | None, limit: int) -> HistoryPage:
        """A page of retained steps from `offset`, or the last `limit` steps when it is None.

        One MULTI/EXEC, so the steps, the total and the indices agree.
        """
        steps_key, meta_key, turns_key, compactions_key = self._keys[:4]
        start, stop = (-limit, -1) if offset is None else (offset, offset + limit - 1)
        with (
            storage_errors(f"reading history of conversation {self.conversation_id}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hget(meta_key, "trimmed")
            pipe.llen(steps_key)
            pipe.lrange(steps_key, start, stop)
            pipe.lrange(turns_key, 0, -1)
            pipe.lrange(compactions_key, 0, -1)
            trimmed_raw, total_raw, raw_steps, turns, compactions = pipe.execute()
        trimmed, total = int(trimmed_raw or 0), int(total_raw)
        first = max(total - limit, 0) if offset is None else offset
        return HistoryPage(
            steps=[self._parse(raw, trimmed + first + i) for i, raw in enumerate(raw_steps)],
            offset=first,
            total=total,
            trimmed=trimmed,
            turn_start_indices=[int(p) - trimmed for p in turns],
            compaction_indices=[int(p) - trimmed for p in compactions],
        )

    def usage_summary(self) -> UsageSummary:
        """Cumulative and last-turn usage and the turn count, in one MULTI/EXEC."""
        usage_key, turns_key = self._keys[4], self._keys[2]
        with (
            storage_errors(f"reading usage of conversation {self.conversation_id}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hgetall(usage_key)
            pipe.llen(turns_key)
            raw, turns = pipe.execute()
        last_turn = _usage_from(raw, "turn:") if "turn:total_token_count" in raw else None
        return UsageSummary(_usage_from(raw, ""), last_turn, int(turns))

    def length(self) -> int:
        """Retained steps (one LLEN)."""
        with storage_errors(f"reading history of conversation {self.conversation_id}"):
            return int(self.client.llen(self._keys[0]))

    def _parse(self, raw: str, position: int) -> Step:
        try:
            return Step.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(
                f"step at position {position} of {self._keys[0]} does not parse: "
                f"{exc.errors()[0]['msg']}"
            ) from exc

    def _parse_structured(self, raw: str | None) -> Any:
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise CorruptRecord(f"last structured output in {self._keys[1]} is not JSON") from exc


def history_args(
    steps: tuple[Step, ...] | list[Step],
    max_history_size: int,
    *,
    usage: UsageMetadata | None = None,
    start_turn: bool = False,
) -> list[Any]:
    """The ARGV slice `history_write` reads, for scripts that embed it."""
    args: list[Any] = [max_history_size, int(start_turn), int(usage is not None)]
    args += [getattr(usage, name) if usage else 0 for name in USAGE_FIELDS]
    args.append(len(steps))
    for step in steps:
        args += _step_args(step)
    return args


def _step_args(step: Step) -> list[Any]:
    text = response_text(step)
    payload = structured_output(step)
    return [
        step.model_dump_json(),
        int(step.type is StepType.COMPACTION),
        _ABSENT if text is None else _PRESENT + text,
        _ABSENT if payload is None else _PRESENT + json.dumps(payload, separators=(",", ":")),
    ]


def _usage_from(raw: dict[str, str], prefix: str) -> UsageMetadata:
    return UsageMetadata(**{name: int(raw.get(prefix + name, 0)) for name in USAGE_FIELDS})

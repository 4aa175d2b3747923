"""The history and usage of one conversation, kept in Redis.

Steps are a LIST of JSON documents; turn starts and compaction positions are
absolute positions, reported relative to the first retained step. Every write
(append, trim, index shift, usage) is one Lua script, so steps, indices and
usage never disagree, however many writers there are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import BaseModel, ValidationError
from redis.client import Pipeline

from shared.errors import CorruptRecord
from shared.models.steps import USAGE_FIELDS, Step, StepSource, StepType, UsageMetadata
from shared.settings import DEFAULT_MAX_HISTORY_SIZE
from shared.store.connection import storage_errors
from shared.store.keys import HISTORY_KEYS, KeySpace
from shared.store.lua import LuaScript, lua_source

__all__ = [
    "FROM_POSITION_LUA",
    "HISTORY_SCRIPT_KEYS",
    "HISTORY_WRITE_LUA",
    "HistoryPage",
    "HistorySnapshot",
    "HistoryStore",
    "HistoryWrite",
    "StepWrite",
    "UsageSummary",
    "last_turn_usage",
    "response_text",
    "structured_output",
]

# `history_write(k, h)`, the function that appends (`shared/store/lua/history_write.lua`):
# the store's own script runs it, and so does the worker's flush, so the arithmetic has one
# implementation. Its argument `h` is a `HistoryWrite`; it sums the `USAGE_FIELDS` counters.
HISTORY_WRITE_LUA = lua_source(
    "shared.store", "history_write.lua", consts={"usage_counters": USAGE_FIELDS}
)
# The history's keys as a script declares them, read as `history_keys.<name>`.
HISTORY_SCRIPT_KEYS = tuple(f"history.{name}" for name in HISTORY_KEYS)

_WRITE = LuaScript(
    "shared.store",
    "history_append.lua",
    keys=HISTORY_SCRIPT_KEYS,
    args=["write"],
    decode=["write"],
    uses=[HISTORY_WRITE_LUA],
)
# `from_position(...)`: the steps from an absolute position, which the worker's claim also runs
FROM_POSITION_LUA = lua_source("shared.store", "history_from_position.lua")
_CONTEXT = LuaScript(
    "shared.store",
    "history_context.lua",
    keys=["steps", "meta", "compactions", "overflow"],
    args=["turn_start"],
    uses=[FROM_POSITION_LUA],
)
_SINCE = LuaScript(
    "shared.store",
    "history_since.lua",
    keys=["steps", "meta", "overflow"],
    args=["position"],
    uses=[FROM_POSITION_LUA],
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


class StepWrite(BaseModel):
    """One step as `history_write` appends it, with what the history keeps beside it."""

    doc: str  # the step's JSON, as stored
    compaction: bool = False
    response: str | None = None  # a complete model response: kept as the last response
    structured: str | None = None  # a Finish step's structured output (JSON): kept too

    @classmethod
    def of(cls, step: Step) -> StepWrite:
        text, payload = response_text(step), structured_output(step)
        return cls(
            doc=step.model_dump_json(),
            compaction=step.type is StepType.COMPACTION,
            response=text,
            structured=None if payload is None else json.dumps(payload, separators=(",", ":")),
        )


class HistoryWrite(BaseModel):
    """What one call of `history_write` appends; scripts take it as one JSON argument."""

    max_history_size: int  # 0: unlimited
    start_turn: bool = False
    usage: UsageMetadata | None = None  # added to the cumulative and the turn's counters
    steps: list[StepWrite] = []

    @classmethod
    def of(
        cls,
        steps: Sequence[Step],
        max_history_size: int,
        *,
        usage: UsageMetadata | None = None,
        start_turn: bool = False,
    ) -> HistoryWrite:
        return cls(
            max_history_size=max_history_size,
            start_turn=start_turn,
            usage=usage,
            steps=[StepWrite.of(step) for step in steps],
        )

    def to_json(self) -> str:
        """The argument: absent fields are left out, since Lua reads JSON null as a value."""
        return self.model_dump_json(exclude_none=True)


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
        self._named = keys.history_by_name(conversation_id)
        self._keys = list(self._named.values())

    @property
    def keys(self) -> list[str]:
        """The history's keys in `HISTORY_KEYS` order: `history_write`'s."""
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
        write = HistoryWrite.of(steps, self.max_history_size, usage=usage, start_turn=start_turn)
        with storage_errors(f"writing history of conversation {self.conversation_id}"):
            client = pipeline if pipeline is not None else self.client
            return _WRITE(client, self._keys, [write.to_json()])

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
            turn_usage=last_turn_usage(usage),
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
        keys = _CONTEXT.keys_from(self._named)
        with storage_errors(f"reading context of conversation {self.conversation_id}"):
            first, raw_steps = _CONTEXT(self.client, keys, [turn_start])
        return self.parse_window(first, raw_steps)

    def parse_window(self, first: int, raw_steps: list[str]) -> list[Step]:
        """Steps as a script read them from absolute position `first` on (the worker's claim
        reads a new turn's window too)."""
        return [self._parse(raw, int(first) + i) for i, raw in enumerate(raw_steps)]

    def steps_since(self, position: int) -> list[Step]:
        """Retained steps from absolute `position` on (one script)."""
        with storage_errors(f"reading history of conversation {self.conversation_id}"):
            first, raw_steps = _SINCE(self.client, _SINCE.keys_from(self._named), [position])
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
        return UsageSummary(_usage_from(raw, ""), last_turn_usage(raw), int(turns))

    def last_answer(self) -> tuple[str, Any]:
        """The last response's text and structured output, kept beside history (one HMGET)."""
        with storage_errors(f"reading history of conversation {self.conversation_id}"):
            raw: list[str | None] = self.client.hmget(  # type: ignore[assignment]
                self._keys[1], ["last_response", "last_structured"]
            )
        return raw[0] or "", self._parse_structured(raw[1])

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


def last_turn_usage(raw: dict[str, str]) -> UsageMetadata | None:
    """The last turn's usage from a conversation's usage hash (`KeySpace.usage`), if any."""
    return _usage_from(raw, "turn:") if "turn:total_token_count" in raw else None


def _usage_from(raw: dict[str, str], prefix: str) -> UsageMetadata:
    return UsageMetadata(**{name: int(raw.get(prefix + name, 0)) for name in USAGE_FIELDS})

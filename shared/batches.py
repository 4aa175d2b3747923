"""Batches: many prompts, one configuration, each prompt its own conversation.

Items are submitted in pipelined chunks (bounded memory for any file size) and
queued on the batch; a per-batch cap decides how many are dispatched at once.
Every change of an item's state goes through one script on the batch's keys that
is idempotent (a repeated transition changes nothing), keeps the counts and usage
totals, and dispatches queued items as running ones leave.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import redis
from pydantic import BaseModel, Field, ValidationError

from shared.config import ConversationConfig
from shared.content import Content
from shared.conversations import ConversationStore, OnCorrupt, new_id
from shared.errors import Conflict, CorruptRecord, NotFound, SignoffError
from shared.keys import KeySpace, check_id
from shared.lua import LuaScript
from shared.redis_client import storage_errors
from shared.settings import Settings
from shared.steps import USAGE_FIELDS, UsageMetadata
from shared.tasks import Advancer
from shared.validation import validate_prompt

__all__ = [
    "BatchConfig",
    "BatchInfo",
    "BatchLine",
    "BatchState",
    "BatchStatus",
    "BatchStore",
    "SubmitReport",
    "batch_owner",
    "parse_line",
]

CHUNK = 500


class BatchState(str, Enum):
    """Where one item of a batch stands."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INVALID = "invalid"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {BatchState.DONE, BatchState.FAILED, BatchState.CANCELLED, BatchState.INVALID}
)


class BatchStatus(str, Enum):
    SUBMITTING = "submitting"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"


class BatchConfig(BaseModel):
    """What every prompt of the batch shares."""

    conversation: ConversationConfig = Field(default_factory=ConversationConfig)
    max_concurrency: int = Field(16, gt=0, le=10_000)


@dataclass(frozen=True)
class BatchLine:
    """One input line: its number, its id, and its prompt or what was wrong with it."""

    line: int
    id: str
    prompt: Content | None = None
    error: str = ""


@dataclass
class SubmitReport:
    submitted: int = 0
    skipped: int = 0
    invalid: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Placed:
    """Where one item's replies sit in its chunk's pipeline."""

    cid: str
    submit_reply: int | None  # the submit script's reply: ['not_owner'] when the id was taken
    items_reply: int  # RPUSH to the items list: its length, so the item's index


def batch_owner(bid: str) -> str:
    """The owner recorded on a batch item's conversation: no caller can be called that."""
    return f"batch:{bid}"


@dataclass(frozen=True)
class BatchInfo:
    batch_id: str
    status: BatchStatus
    total: int
    counts: dict[BatchState, int]
    usage: UsageMetadata
    config: BatchConfig
    created_at: float

    @property
    def finished(self) -> int:
        return sum(self.counts[state] for state in _TERMINAL)


# KEYS: meta, states, queue   ARGV: conversation id, new state, then five usage counts or none
# Returns the conversation ids dispatched because a running item left, for `advance`.
_TRANSITION = LuaScript(
    """
local terminal = {done = true, failed = true, cancelled = true, invalid = true}
local old = redis.call('HGET', KEYS[2], ARGV[1])
local new = ARGV[2]
if old and old ~= new and not terminal[old] then
  redis.call('HSET', KEYS[2], ARGV[1], new)
  redis.call('HINCRBY', KEYS[1], 'count:' .. old, -1)
  redis.call('HINCRBY', KEYS[1], 'count:' .. new, 1)
  if terminal[new] and ARGV[3] then
    local fields = {'prompt_token_count', 'candidates_token_count', 'total_token_count',
                    'cached_content_token_count', 'thoughts_token_count'}
    for i, f in ipairs(fields) do redis.call('HINCRBY', KEYS[1], 'usage:' .. f, ARGV[2 + i]) end
  end
  if old == 'queued' then redis.call('LREM', KEYS[3], 1, ARGV[1]) end
end
local started = {}
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'cancelled' then
  local cap = tonumber(redis.call('HGET', KEYS[1], 'max_concurrency') or '1')
  while tonumber(redis.call('HGET', KEYS[1], 'count:running') or '0') < cap do
    local next_id = redis.call('LPOP', KEYS[3])
    if not next_id then break end
    redis.call('HSET', KEYS[2], next_id, 'running')
    redis.call('HINCRBY', KEYS[1], 'count:queued', -1)
    redis.call('HINCRBY', KEYS[1], 'count:running', 1)
    started[#started + 1] = next_id
  end
end
local finished = 0
for state, _ in pairs(terminal) do
  finished = finished + tonumber(redis.call('HGET', KEYS[1], 'count:' .. state) or '0')
end
if status == 'running' and finished >= tonumber(redis.call('HGET', KEYS[1], 'total') or '0') then
  redis.call('HSET', KEYS[1], 'status', 'done', 'finished_at', redis.call('TIME')[1])
end
return started
"""
)


def parse_line(number: int, raw: str, settings: Settings) -> BatchLine | None:
    """One JSONL line as an item; None for a blank line; an error names what was wrong."""
    if not raw.strip():
        return None
    fallback = f"line-{number}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return BatchLine(number, fallback, error=f"line {number}: not JSON ({exc})")
    if not isinstance(data, dict):
        return BatchLine(number, fallback, error=f"line {number}: expected a JSON object")
    item_id = str(data.get("id", fallback))
    prompt = data.get("prompt", data.get("content"))
    if prompt is None:
        return BatchLine(number, item_id, error=f"line {number}: missing 'prompt'")
    try:
        content = validate_prompt(
            prompt if isinstance(prompt, str) else Content.model_validate(prompt), settings
        )
    except (SignoffError, ValidationError) as exc:
        return BatchLine(number, item_id, error=f"line {number}: {exc}")
    return BatchLine(number, item_id, prompt=content)


class BatchStore:
    """Creates batches, submits their items, keeps their counts, and reads their results."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        tasks: Advancer | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.tasks = tasks
        self.conversations = ConversationStore(client, keys, settings)

    def create(
        self, config: BatchConfig, *, batch_id: str | None = None, created_by: str = ""
    ) -> str:
        """A new batch, or the existing one with this id (to resume a submission)."""
        bid = check_id(batch_id or new_id()[:16], "batch id")
        conversation = config.conversation.model_copy(update={"batch_id": bid})
        stored = config.model_copy(update={"conversation": conversation})
        raw_config = stored.model_dump_json()
        meta = {
            "status": BatchStatus.SUBMITTING.value,
            "max_concurrency": config.max_concurrency,
            "total": 0,
            "created_at": time.time(),
            "created_by": created_by,
        }
        with storage_errors(f"creating batch {bid}"):
            if not self.client.hsetnx(self.keys.batch(bid), "config", raw_config):
                return bid
            self.client.hset(self.keys.batch(bid), mapping=meta)  # type: ignore[arg-type]
            self.client.zadd(self.keys.batches(), {bid: time.time()})
        return bid

    def exists(self, bid: str) -> bool:
        with storage_errors(f"reading batch {bid}"):
            return bool(self.client.hexists(self.keys.batch(bid), "config"))

    def created_by(self, bid: str) -> str:
        """Who created the batch ("" for a direct client); NotFound when there is none."""
        with storage_errors(f"reading batch {bid}"):
            meta = self.client.hmget(self.keys.batch(bid), ["config", "created_by"])
        if meta[0] is None:
            raise NotFound(f"batch {bid} does not exist")
        return str(meta[1] or "")

    def config(self, bid: str) -> BatchConfig:
        with storage_errors(f"reading batch {bid}"):
            raw = self.client.hget(self.keys.batch(bid), "config")
        if raw is None:
            raise NotFound(f"batch {bid} does not exist")
        try:
            return BatchConfig.model_validate_json(str(raw))
        except ValidationError as exc:
            raise CorruptRecord(f"config of {self.keys.batch(bid)} does not parse") from exc

    # Submitting

    def submit(self, bid: str, lines: Iterable[BatchLine]) -> SubmitReport:
        """Submits items in chunks; items whose id the batch already has are skipped."""
        config = self.config(bid).conversation
        report = SubmitReport()
        chunk: list[BatchLine] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) >= CHUNK:
                self._submit_chunk(bid, config, chunk, report)
                chunk = []
        if chunk:
            self._submit_chunk(bid, config, chunk, report)
        return report

    def finish_submission(self, bid: str) -> None:
        """Marks the input complete: the batch is done once every item is."""
        with storage_errors(f"updating batch {bid}"):
            self.client.hset(self.keys.batch(bid), "status", BatchStatus.RUNNING.value)
        self.dispatch(bid)

    def conversation_id(self, bid: str, item_id: str) -> str:
        """A stable conversation id per item, so a resubmitted item is recognised."""
        return f"{bid}-{hashlib.sha256(item_id.encode()).hexdigest()[:16]}"

    def _submit_chunk(
        self, bid: str, config: ConversationConfig, chunk: list[BatchLine], report: SubmitReport
    ) -> None:
        known = self._known(bid, [line.id for line in chunk])
        fresh = [line for line in chunk if line.id not in known]
        report.skipped += len(chunk) - len(fresh)
        self._refuse_taken(bid, fresh)
        with (
            storage_errors(f"submitting items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            placed = [self._queue_item(pipe, bid, config, line, report) for line in fresh]
            replies = pipe.execute()
        self._fail_taken(bid, placed, replies)
        self.dispatch(bid)

    def _refuse_taken(self, bid: str, lines: list[BatchLine]) -> None:
        """Conflict when an item's conversation id is already in use: it is never adopted."""
        cids = [self.conversation_id(bid, line.id) for line in lines if not line.error]
        if not cids:
            return
        with (
            storage_errors(f"checking items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in cids:
                pipe.hmget(self.keys.conversation(cid), ["config", "owner"])
            owners = pipe.execute()
        mine = batch_owner(bid)  # a chunk cut short by a Redis failure left our own behind
        taken = [cid for cid, (cfg, who) in zip(cids, owners, strict=True) if cfg and who != mine]
        if taken:
            raise Conflict(
                f"batch {bid}: conversation {taken[0]} already exists ({len(taken)} item(s) "
                "would reuse a conversation created outside the batch); nothing of this chunk "
                "was submitted"
            )

    def _fail_taken(self, bid: str, placed: list[_Placed], replies: list[Any]) -> None:
        """Items whose conversation appeared between the check and the write: failed, not run."""
        for where in placed:
            if where.submit_reply is None or replies[where.submit_reply][0] != "not_owner":
                continue
            item_index = int(replies[where.items_reply]) - 1
            self._mark_taken(bid, where, item_index)

    def _mark_taken(self, bid: str, where: _Placed, item_index: int) -> None:
        error = f"conversation {where.cid} already existed; the item was not run in it"
        with storage_errors(f"updating batch {bid}"):
            raw = self.client.lindex(self.keys.batch_items(bid), item_index)
            item = json.loads(str(raw)) if raw else {}
            if item.get("conversation_id") == where.cid:
                item.update(error=error, turn_id="")
                self.client.lset(self.keys.batch_items(bid), item_index, json.dumps(item))
        self.transition(bid, where.cid, BatchState.FAILED)

    def _known(self, bid: str, item_ids: list[str]) -> set[str]:
        with storage_errors(f"reading items of batch {bid}"):
            found = self.client.hmget(self.keys.batch_ids(bid), item_ids)
        return {item for item, cid in zip(item_ids, found, strict=True) if cid is not None}

    def _queue_item(
        self, pipe: Any, bid: str, config: ConversationConfig, line: BatchLine, report: SubmitReport
    ) -> _Placed:
        """Queues one item; its conversation is created here or the item is not run at all."""
        cid = self.conversation_id(bid, line.id)
        state = BatchState.INVALID if line.error else BatchState.QUEUED
        turn_id = ""
        submit_reply = None
        if line.prompt is not None and not line.error:
            metadata = {**config.metadata, "batch_item": line.id}
            owner = batch_owner(bid)
            self.conversations.queue_create(
                pipe, cid, config.model_copy(update={"metadata": metadata}), owner=owner
            )
            turn_id = self.conversations.queue_submit(pipe, cid, line.prompt, owner=owner)
            submit_reply = len(pipe.command_stack) - 1
            pipe.rpush(self.keys.batch_queue(bid), cid)
            report.submitted += 1
        else:
            report.invalid.append((line.line, line.error))
        item = {
            "line": line.line,
            "id": line.id,
            "conversation_id": cid,
            "turn_id": turn_id,
            "error": line.error,
        }
        items_reply = len(pipe.command_stack)
        pipe.rpush(self.keys.batch_items(bid), json.dumps(item))
        pipe.hset(self.keys.batch_ids(bid), line.id, cid)
        pipe.hset(self.keys.batch_states(bid), cid, state.value)
        pipe.hincrby(self.keys.batch(bid), f"count:{state.value}", 1)
        pipe.hincrby(self.keys.batch(bid), "total", 1)
        return _Placed(cid, submit_reply, items_reply)

    # State changes

    def transition(
        self, bid: str, cid: str, state: BatchState, usage: UsageMetadata | None = None
    ) -> list[str]:
        """Moves one item (idempotently) and dispatches what the cap now allows."""
        keys = [self.keys.batch(bid), self.keys.batch_states(bid), self.keys.batch_queue(bid)]
        args: list[Any] = [cid, state.value]
        if usage is not None:
            args += [getattr(usage, name) for name in USAGE_FIELDS]
        with storage_errors(f"updating batch {bid}"):
            started = [str(s) for s in _TRANSITION(self.client, keys, args)]
        self._advance(started)
        return started

    def dispatch(self, bid: str) -> list[str]:
        """Starts queued items up to the batch's concurrency cap."""
        return self.transition(bid, "", BatchState.QUEUED)

    def _advance(self, cids: list[str]) -> None:
        if self.tasks is not None:
            for cid in cids:
                self.tasks.advance(cid)

    def cancel(self, bid: str) -> int:
        """Cancels the batch: queued items at once, running and waiting ones through abort."""
        self.config(bid)
        with storage_errors(f"cancelling batch {bid}"):
            self.client.hset(self.keys.batch(bid), "status", BatchStatus.CANCELLED.value)
            states: dict[str, str] = self.client.hgetall(self.keys.batch_states(bid))  # type: ignore[assignment]
        touched = 0
        for cid, state in states.items():
            if BatchState(state).is_terminal:
                continue
            active = self.conversations.abort(cid)
            if state == BatchState.QUEUED.value or not active:
                self.transition(bid, cid, BatchState.CANCELLED)
            elif self.tasks is not None:
                self.tasks.advance(cid)
            touched += 1
        return touched

    # Reading

    def info(self, bid: str) -> BatchInfo:
        with storage_errors(f"reading batch {bid}"):
            raw: dict[str, str] = self.client.hgetall(self.keys.batch(bid))  # type: ignore[assignment]
        if not raw:
            raise NotFound(f"batch {bid} does not exist")
        try:
            return BatchInfo(
                batch_id=bid,
                status=BatchStatus(raw.get("status", "running")),
                total=int(raw.get("total", 0)),
                counts={state: int(raw.get(f"count:{state.value}", 0)) for state in BatchState},
                usage=UsageMetadata(**{n: int(raw.get(f"usage:{n}", 0)) for n in USAGE_FIELDS}),
                config=BatchConfig.model_validate_json(raw.get("config", "")),
                created_at=float(raw.get("created_at", 0)),
            )
        except ValueError as exc:  # pydantic's ValidationError is one too
            raise CorruptRecord(
                f"{self.keys.batch(bid)} does not parse: {_first_line(exc)}"
            ) from exc

    def infos(self, ids: list[str], *, on_corrupt: OnCorrupt) -> list[BatchInfo]:
        """The batches of `ids` that exist; one that does not parse goes to `on_corrupt`."""
        found: list[BatchInfo] = []
        for bid in ids:
            try:
                found.append(self.info(bid))
            except NotFound:
                continue
            except CorruptRecord as exc:
                on_corrupt(exc)
        return found

    def ids(self, *, offset: int = 0, limit: int = 50) -> list[str]:
        with storage_errors("listing batches"):
            found = self.client.zrevrange(self.keys.batches(), offset, offset + limit - 1)
        return [str(b) for b in found]

    def results(self, bid: str, *, offset: int = 0) -> Iterator[dict[str, Any]]:
        """One result per input item from `offset` on, in input order, read in chunks."""
        self.config(bid)
        start = max(offset, 0)
        while True:
            with storage_errors(f"reading items of batch {bid}"):
                raw_items = self.client.lrange(self.keys.batch_items(bid), start, start + CHUNK - 1)
            if not raw_items:
                return
            items = [json.loads(str(raw)) for raw in raw_items]
            yield from self._results_of(bid, items)
            start += CHUNK

    def _results_of(self, bid: str, items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        with (
            storage_errors(f"reading results of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for item in items:
                pipe.hget(self.keys.batch_states(bid), item["conversation_id"])
                if item["turn_id"]:
                    pipe.hgetall(self.keys.turn(item["conversation_id"], item["turn_id"]))
                else:
                    pipe.echo("")  # keeps the replies in pairs
            replies = pipe.execute()
        for item, state, turn in zip(items, replies[0::2], replies[1::2], strict=True):
            yield _result(item, state, turn if isinstance(turn, dict) else {})


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _result(item: dict[str, Any], state: Any, turn: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": item["id"],
        "line": item["line"],
        "status": state or "invalid",
        "text": None,
        "structured_output": None,
        "usage": None,
        "error": item.get("error") or None,
    }
    if turn.get("response"):
        response = json.loads(turn["response"])
        result.update(
            text=response.get("text"),
            structured_output=response.get("structured_output"),
            usage=response.get("usage_metadata"),
        )
    elif turn.get("error"):
        result["error"] = turn["error"]
    return result

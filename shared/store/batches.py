"""Batches: many prompts, one configuration, each prompt its own conversation.

Items are submitted in pipelined chunks (bounded memory for any file size) and
queued on the batch; a per-batch cap decides how many are dispatched at once.
Every change of an item's state goes through one script on the batch's keys that
is idempotent (a repeated transition changes nothing), keeps the counts and usage
totals, and dispatches queued items as running ones leave.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.archive.snapshot import archived_hash
from shared.archive.storage import storage_for
from shared.batches.lines import (
    ITEM_FIELDS,
    BatchLine,
    line_options,
    not_item_fields,
    parse_line,
    unknown_item_keys,
)
from shared.batches.result import TURN_FIELDS, item_result
from shared.client.tasks import QueuesAdvance
from shared.errors import Conflict, CorruptRecord, InvalidInput, NotFound
from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.owners import InternalOwner, internal_owner
from shared.models.steps import USAGE_FIELDS, UsageMetadata
from shared.store.base import AdvancingStore
from shared.store.batch_scripts import ADMIT, CREATE, REGISTER, TRANSITION
from shared.store.connection import ReplicaWait, storage_errors
from shared.store.conversations import ConversationStore, OnCorrupt, allow_field, new_id
from shared.store.keys import check_id
from shared.store.webhooks import emit_webhook_event
from shared.webhooks.payloads import batch_finished

__all__ = [
    "ITEM_FIELDS",
    "BatchInfo",
    "BatchLine",
    "BatchStore",
    "ItemResult",
    "SubmitReport",
    "batch_owner",
    "line_options",
    "not_item_fields",
    "parse_line",
    "unknown_item_keys",
]

CHUNK = 500


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
    return internal_owner(InternalOwner.BATCH, bid)


@dataclass(frozen=True)
class ItemResult:
    """One item as filed (its conversation and turn, its attempts), where, and its result."""

    index: int  # in the batch's items list
    item: dict[str, Any]
    result: dict[str, Any]


@dataclass(frozen=True)
class BatchInfo:
    batch_id: str
    status: BatchStatus
    total: int
    counts: dict[BatchState, int]
    usage: UsageMetadata
    config: BatchConfig
    created_at: float
    denied: int = 0  # ended items with a tool call an operator denied
    held: str = ""  # "budget:tokens" or "budget:micros": its budget is spent; nothing dispatches
    retries: int = 0  # retries that queued items again (each a round of new attempts)
    source: str = ""  # the batch whose inputs this one runs again (a re-run), if any

    @property
    def finished(self) -> int:
        return sum(self.counts[state] for state in BatchState if state.is_terminal)

    @property
    def rest_cost_micros(self) -> int | None:
        """The projected cost of the items not yet ended: the mean cost of the items that ran
        (done or failed) times their number; None before one ran, or with no price."""
        ran = self.counts[BatchState.DONE] + self.counts[BatchState.FAILED]
        if not ran or not self.usage.cost_micros:
            return None
        to_end = (BatchState.QUEUED, BatchState.RUNNING, BatchState.WAITING)
        return round(self.usage.cost_micros / ran * sum(self.counts[s] for s in to_end))


def _checked_for(line: BatchLine, config: ConversationConfig) -> BatchLine:
    """The line, or an invalid one when its model settings are more than the provider honours."""
    if line.options is None or line.error:
        return line
    try:
        line.options.check_for(config)
    except InvalidInput as exc:
        return BatchLine(line.line, line.id, error=f"item {line.id!r}: {exc}")
    return line


class BatchStore(AdvancingStore):
    """Creates batches, submits their items, keeps their counts, and reads their results."""

    @functools.cached_property
    def conversations(self) -> ConversationStore:
        return ConversationStore(self.client, self.keys, self.settings)

    def create(
        self,
        config: BatchConfig,
        *,
        batch_id: str | None = None,
        created_by: str = "",
        source: str = "",
    ) -> str:
        """A new batch, or the existing one with this id (to resume a submission); `source`:
        the batch whose inputs it runs again."""
        bid = check_id(batch_id or new_id()[:16], "batch id")
        submitter = {"submitted_by": created_by} if created_by else {}
        conversation = config.conversation.model_copy(update={"batch_id": bid, **submitter})
        stored = config.model_copy(update={"conversation": conversation})
        raw_config = stored.model_dump_json()
        now = time.time()
        args = CREATE.args_from(
            {
                "config": raw_config,
                "status": BatchStatus.SUBMITTING.value,
                "max_concurrency": config.max_concurrency,
                "created_at": now,
                "created_by": created_by,
                "source": source,
            }
        )
        with (
            storage_errors(f"creating batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            CREATE.queue(pipe, [self.keys.batch(bid)], args)
            pipe.zadd(self.keys.batches(), {bid: now}, nx=True)  # again if a retry created it
            pipe.execute()
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

    def tool_allowed(self, bid: str, tool: str) -> bool:
        """Whether an operator allowed `tool` for the rest of the batch."""
        with storage_errors(f"reading batch {bid}"):
            return self.client.hget(self.keys.batch(bid), allow_field(tool)) == "1"

    def allow_tool(self, bid: str, tool: str) -> None:
        """Allows `tool` for the rest of the batch: its calls in every item run unasked."""
        with storage_errors(f"updating batch {bid}"):
            self.client.hset(self.keys.batch(bid), allow_field(tool), "1")

    # Submitting

    def submit(
        self, bid: str, lines: Iterable[BatchLine], report: SubmitReport | None = None
    ) -> SubmitReport:
        """Submits items in chunks; items whose id the batch already has are skipped.

        A chunk counts in `report` once it is written, so a caller that retries after a
        Redis failure, with the same report, counts what the failed attempt wrote as skipped.
        """
        config = self.config(bid).conversation
        report = report if report is not None else SubmitReport()
        chunk: list[BatchLine] = []
        for line in lines:
            chunk.append(_checked_for(line, config))
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
        self.announce_finished(bid)  # every item may have ended before the input did

    def announce_finished(self, bid: str) -> bool:
        """Emits the `batch.finished` webhook event if the batch is done, or cancelled with
        every item ended (and an endpoint is registered); its id is the batch's, so
        announcing twice delivers once."""
        with storage_errors(f"reading batch {bid}"), self.client.pipeline(False) as pipe:
            pipe.hget(self.keys.batch(bid), "status")
            pipe.exists(self.keys.webhook_endpoints())
            status, endpoints = pipe.execute()
        ended = (BatchStatus.DONE.value, BatchStatus.CANCELLED.value)
        if status not in ended or not endpoints:
            return False
        info = self.info(bid)
        if sum(n for s, n in info.counts.items() if s.is_terminal) < info.total:
            return False  # cancelled, with items still ending
        counts = {"total": info.total, **{s.value: n for s, n in info.counts.items()}}
        event = batch_finished(bid, info.status.value, counts, retries=info.retries)
        emit_webhook_event(self.client, self.keys, event.kind, event.data, event_id=event.event_id)
        return True

    def conversation_id(self, bid: str, item_id: str, attempt: int = 1) -> str:
        """A stable conversation id per item, so a resubmitted item is recognised; a retry's
        attempt runs in a conversation of its own, the first's id and `.<attempt>`."""
        first = f"{bid}-{hashlib.sha256(item_id.encode()).hexdigest()[:16]}"
        return first if attempt <= 1 else f"{first}.{attempt}"

    def _submit_chunk(
        self, bid: str, config: ConversationConfig, chunk: list[BatchLine], report: SubmitReport
    ) -> None:
        known = self._known(bid, [line.id for line in chunk])
        fresh = [line for line in chunk if line.id not in known]
        self._refuse_taken(bid, fresh)
        queued = self._queued_turns(bid, fresh)
        written = SubmitReport(skipped=len(chunk) - len(fresh))
        with (
            storage_errors(f"submitting items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            placed = [self._queue_item(pipe, bid, config, line, queued, written) for line in fresh]
            wait = ReplicaWait.of(self.settings)
            if wait is not None:
                wait.queue(pipe)
            replies = pipe.execute()
        if wait is not None:
            wait.check(replies.pop(), f"submitting items of batch {bid}")
        report.submitted += written.submitted
        report.skipped += written.skipped
        report.invalid += written.invalid
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

    def _queued_turns(self, bid: str, lines: list[BatchLine]) -> dict[str, str]:
        """Turns already queued in the chunk's own conversations, by conversation id.

        An earlier attempt cut short by a Redis failure may have created an item's
        conversation and queued its turn without filing the item; that turn is reused, so
        the item runs once.
        """
        cids = [self.conversation_id(bid, line.id) for line in lines if not line.error]
        if not cids:
            return {}
        with (
            storage_errors(f"checking items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in cids:
                pipe.hget(self.keys.conversation(cid), "owner")
                pipe.lindex(self.keys.inbox(cid), 0)
            replies = pipe.execute()
        mine = batch_owner(bid)
        found = zip(cids, replies[0::2], replies[1::2], strict=True)
        return {cid: str(turn) for cid, owner, turn in found if owner == mine and turn}

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
        self,
        pipe: Any,
        bid: str,
        config: ConversationConfig,
        line: BatchLine,
        queued: dict[str, str],
        report: SubmitReport,
    ) -> _Placed:
        """Queues one item: its conversation (held until dispatched) and turn, then its filing."""
        cid = self.conversation_id(bid, line.id)
        prompt = None if line.error else line.prompt
        turn_id, submit_reply = queued.get(cid, ""), None
        if prompt is not None and not turn_id:
            turn_id = self._queue_turn(pipe, bid, config, line, prompt)
            submit_reply = len(pipe) - 1
        if prompt is not None:
            report.submitted += 1
        else:
            report.invalid.append((line.line, line.error))
        state = BatchState.QUEUED if prompt is not None else BatchState.INVALID
        item = {
            "line": line.line,
            "id": line.id,
            "conversation_id": cid,
            "turn_id": turn_id,
            "error": line.error,
        }
        items_reply = len(pipe)
        keys = {
            "meta": self.keys.batch(bid),
            "states": self.keys.batch_states(bid),
            "queue": self.keys.batch_queue(bid),
            "items": self.keys.batch_items(bid),
            "ids": self.keys.batch_ids(bid),
        }
        args = {
            "cid": cid,
            "item": json.dumps(item),
            "state": state.value,
            "item_id": line.id,
            "to_queue": int(prompt is not None),
        }
        REGISTER.queue(pipe, REGISTER.keys_from(keys), REGISTER.args_from(args))
        return _Placed(cid, submit_reply, items_reply)

    def _queue_turn(
        self, pipe: Any, bid: str, config: ConversationConfig, line: BatchLine, prompt: Content
    ) -> str:
        """Queues the item's conversation, held, and its turn (the submit script last)."""
        cid = self.conversation_id(bid, line.id)
        metadata = {**config.metadata, "batch_item": line.id}
        owner = batch_owner(bid)
        self.conversations.queue_create(
            pipe, cid, config.model_copy(update={"metadata": metadata}), owner=owner, held=True
        )
        return self.conversations.queue_submit(
            pipe, cid, prompt, owner=owner, index=False, options=line.options
        )

    # State changes

    def transition(
        self,
        bid: str,
        cid: str,
        state: BatchState,
        usage: UsageMetadata | None = None,
        *,
        denied: bool = False,
    ) -> list[str]:
        """Moves one item (idempotently), dispatches what the cap now allows, and releases it.

        `denied` says an ending item had a tool call denied: the batch counts such items.
        Returns the conversations released (and sent `advance`, given a task sender).
        """
        counts = ""  # the item's usage, counted with the move that ends it
        if usage is not None or denied:
            counts = (usage or UsageMetadata()).model_dump_json(include=set(USAGE_FIELDS))
        args = TRANSITION.args_from(
            {"cid": cid, "new": state.value, "usage": counts, "denied": "1" if denied else ""}
        )
        with storage_errors(f"updating batch {bid}"):
            dispatched = [str(s) for s in TRANSITION(self.client, self.dispatch_keys(bid), args)]
        self._release(bid, dispatched)
        return dispatched

    def admit(self, bid: str, cid: str) -> bool:
        """Whether a waiting item whose approval is settled may go on now, under the cap.

        If not, it waits in the batch's `resuming` list, ahead of every queued item, and is
        released (sent `advance`) when a place frees.
        """
        with storage_errors(f"updating batch {bid}"):
            placed, dispatched = ADMIT(self.client, self.dispatch_keys(bid), [cid])
        self._release(bid, [str(c) for c in dispatched])
        return bool(placed)

    def dispatch_keys(self, bid: str) -> list[str]:
        """The keys of the transition and admit scripts, in `DISPATCH_KEYS` order."""
        return TRANSITION.keys_from(
            {
                "meta": self.keys.batch(bid),
                "states": self.keys.batch_states(bid),
                "queue": self.keys.batch_queue(bid),
                "releasing": self.keys.batch_releasing(bid),
                "resuming": self.keys.batch_resuming(bid),
            }
        )

    def dispatch(self, bid: str) -> list[str]:
        """Starts queued items up to the batch's concurrency cap; finishes earlier releases."""
        return self.transition(bid, "", BatchState.QUEUED)

    def _release(self, bid: str, cids: list[str]) -> None:
        """Ends the hold of dispatched conversations, indexes them and queues their `advance`.

        Until their release is confirmed they stay in the batch's `releasing` set, and the
        next transition of the batch returns them again: releasing twice changes nothing
        (a second `advance` finds the conversation leased or its work done). A sender that
        can build task messages has them pushed in the release's own round trip.
        """
        if not cids:
            return
        queuer = self.tasks if isinstance(self.tasks, QueuesAdvance) else None
        with (
            storage_errors(f"releasing items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in cids:
                self.conversations.queue_release(pipe, cid)
                if queuer is not None:
                    task = queuer.queued_advance(cid)
                    pipe.lpush(task.key, task.message)
            pipe.srem(self.keys.batch_releasing(bid), *cids)
            pipe.execute()
        if self.tasks is not None and queuer is None:
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
                self._unhold(cid)
            elif self.tasks is not None:
                self.tasks.advance(cid)
            touched += 1
        self.announce_finished(bid)  # when nothing was running; else the last item's end does
        return touched

    def _unhold(self, cid: str) -> None:
        """A cancelled item's conversation takes later prompts like any other."""
        with (
            storage_errors(f"releasing conversation {cid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            self.conversations.queue_release(pipe, cid, index=False)
            pipe.execute()

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
                denied=int(raw.get("denied", 0)),
                held=raw.get("held", ""),
                retries=int(raw.get("retries", 0)),
                source=raw.get("source", ""),
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
        for _, items in self.item_chunks(bid, offset):
            yield from self._results_of(bid, items)  # built one at a time: memory stays bounded

    def pages(self, bid: str, *, offset: int = 0) -> Iterator[list[ItemResult]]:
        """The items from `offset` on, as filed and with their results, a chunk at a time."""
        for start, items in self.item_chunks(bid, offset):
            results = self._results_of(bid, items)
            yield [
                ItemResult(start + n, item, result)
                for n, (item, result) in enumerate(zip(items, results, strict=True))
            ]

    def item_chunks(self, bid: str, offset: int = 0) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """The items as filed, `CHUNK` at a time, each chunk with the index of its first."""
        self.config(bid)
        start = max(offset, 0)
        while True:
            with storage_errors(f"reading items of batch {bid}"):
                raw_items = self.client.lrange(self.keys.batch_items(bid), start, start + CHUNK - 1)
            if not raw_items:
                return
            yield start, [json.loads(str(raw)) for raw in raw_items]
            start += CHUNK

    def _results_of(self, bid: str, items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        with (
            storage_errors(f"reading results of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for item in items:
                pipe.hget(self.keys.batch_states(bid), item["conversation_id"])
                if item["turn_id"]:  # not the prompt or the checkpoint: a chunk stays small
                    turn = self.keys.turn(item["conversation_id"], item["turn_id"])
                    pipe.hmget(turn, TURN_FIELDS)
                else:
                    pipe.exists(self.keys.batch(bid))  # keeps the replies in pairs (a keyed
                    # command: a cluster pipeline routes each by its key)
            replies = pipe.execute()
        archived = self._archived_turns(items, replies[1::2])
        for n, (item, state, turn) in enumerate(
            zip(items, replies[0::2], replies[1::2], strict=True)
        ):
            found = zip(TURN_FIELDS, turn, strict=True) if isinstance(turn, list) else ()
            fields = archived.get(n) or {name: value for name, value in found if value}
            yield item_result(item, state, fields)

    def _archived_turns(
        self, items: list[dict[str, Any]], turns: list[Any]
    ) -> dict[int, dict[str, str]]:
        """The turns of items whose conversation was archived (shared/archive/), from its file."""
        gone = [
            n
            for n, (item, turn) in enumerate(zip(items, turns, strict=True))
            if item["turn_id"] and isinstance(turn, list) and not any(turn)
        ]
        if not gone:
            return {}
        with (
            storage_errors("reading the archive index"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for n in gone:
                cid = items[n]["conversation_id"]
                pipe.zscore(self.keys.archived(self.keys.shard_of(cid)), cid)
            archived = pipe.execute()
        storage, found = storage_for(self.settings), {}
        for n, score in zip(gone, archived, strict=True):
            if score is None:
                continue
            item = items[n]
            turn = archived_hash(storage, item["conversation_id"], f"turn:{item['turn_id']}")
            if turn:
                found[n] = {name: turn[name] for name in TURN_FIELDS if turn.get(name)}
        return found


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

"""Retrying a batch's ended items: each one chosen runs again, as a new attempt of the item.

An attempt is a conversation of its own (`BatchStore.conversation_id(bid, item, attempt)`),
made with the batch's configuration and the item's first prompt and prompt options, held as a
submitted item's is, so the earlier attempts stay as they ended. One script on the batch's keys
(`lua/batch_retry.lua`) then files it: the item points at the new attempt, its old conversation
leaves the batch's states (a late transition of it changes nothing), the new one is queued, and
the counts move with it; a done or cancelled batch runs again. From there it is a queued item
like any other: the dispatch gives it a place under the batch's cap, unless the batch's budget
holds it, and the worker's rate limits apply to its calls. Its usage adds to the batch's.

A retry holds the batch's `retrying` lock while it queues, so two never make the same attempt.
One cut short (the process died, Redis went away) is finished by retrying again: an attempt's
conversation that already holds a queued turn is filed with that turn, not given a second.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from shared.batches.retry import wanted
from shared.errors import Conflict
from shared.models.batches import RetryFilter
from shared.models.config import ConversationConfig, PromptOptions
from shared.models.content import Content
from shared.store.batch_scripts import RETRY
from shared.store.batches import BatchStore, ItemResult, batch_owner
from shared.store.connection import storage_errors
from shared.store.conversations import new_id

__all__ = ["LOCK_TTL_MS", "BatchRetry", "RetryReport"]

LOCK_TTL_MS = 60_000  # renewed with every chunk of items


@dataclass
class RetryReport:
    """Items queued again, and those chosen that could not be, with why."""

    retried: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # item id, why


@dataclass(frozen=True)
class _Attempt:
    """A chosen item's next attempt: its number and conversation, and what it runs."""

    found: ItemResult
    number: int
    cid: str
    prompt: Content | None = None
    options: PromptOptions | None = None
    turn_id: str = ""  # a turn already queued in `cid` by a retry cut short

    @property
    def item_id(self) -> str:
        return str(self.found.item["id"])


class BatchRetry:
    """Queues a batch's ended items again as new attempts, under the batch's cap and budget."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store
        self.client = store.client
        self.keys = store.keys

    def retry(self, bid: str, chosen: RetryFilter) -> RetryReport:
        """Queues every ended item `chosen` takes as a new attempt; then dispatches."""
        config = self.store.config(bid).conversation
        report = RetryReport()
        with self._lock(bid):
            number = self.store.info(bid).retries + 1
            for page in self.store.pages(bid):
                found = [f for f in page if wanted(f.result, chosen)]
                if found:
                    self._retry_page(bid, config, found, number, report)
                self._renew(bid)
        if report.retried:
            self.store.dispatch(bid)
        return report

    def _retry_page(
        self,
        bid: str,
        config: ConversationConfig,
        found: list[ItemResult],
        number: int,
        report: RetryReport,
    ) -> None:
        attempts = self._read(bid, found, report)
        ready = self._queue_turns(bid, config, attempts, report)
        if not ready:
            return
        moves = [_move(attempt) for attempt in ready]
        keys = {
            "meta": self.keys.batch(bid),
            "states": self.keys.batch_states(bid),
            "queue": self.keys.batch_queue(bid),
            "items": self.keys.batch_items(bid),
            "ids": self.keys.batch_ids(bid),
        }
        args = RETRY.args_from({"moves": json.dumps(moves), "round": number})
        with storage_errors(f"retrying items of batch {bid}"):
            moved = int(RETRY(self.client, RETRY.keys_from(keys), args))
        report.retried += moved
        if moved < len(ready):  # moved on meanwhile: a later retry reuses the queued turns
            report.skipped.append(("", f"{len(ready) - moved} item(s) changed meanwhile"))

    def _read(self, bid: str, found: list[ItemResult], report: RetryReport) -> list[_Attempt]:
        """Each item's next attempt with its first prompt; items that cannot run are skipped."""
        attempts = [self._next(bid, f) for f in found]
        with (
            storage_errors(f"reading items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for attempt in attempts:
                item = attempt.found.item
                first = self.keys.turn(item["conversation_id"], item["turn_id"] or "-")
                pipe.hmget(first, ["prompt", "options"])
                pipe.hget(self.keys.conversation(attempt.cid), "owner")
                pipe.lindex(self.keys.inbox(attempt.cid), 0)
            replies = pipe.execute()
        mine, ready = batch_owner(bid), []
        for i, attempt in enumerate(attempts):
            (prompt, options), owner, queued = replies[3 * i : 3 * i + 3]
            try:
                why = _unready(attempt, prompt, owner, mine)
                if not why:
                    ready.append(_with_input(attempt, prompt, options, str(queued or "")))
            except ValidationError:
                why = "its first prompt does not parse"
            if why:
                report.skipped.append((attempt.item_id, why))
        return ready

    def _next(self, bid: str, found: ItemResult) -> _Attempt:
        number = int(found.item.get("attempts", 1)) + 1
        cid = self.store.conversation_id(bid, str(found.item["id"]), number)
        return _Attempt(found, number, cid)

    def _queue_turns(
        self,
        bid: str,
        config: ConversationConfig,
        attempts: list[_Attempt],
        report: RetryReport,
    ) -> list[_Attempt]:
        """Creates each attempt's conversation, held, with its turn queued (one round trip)."""
        owner, replies_at, ready = batch_owner(bid), {}, []
        with (
            storage_errors(f"retrying items of batch {bid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for n, attempt in enumerate(attempts):
                if attempt.turn_id:
                    continue
                tid = self._queue_attempt(pipe, config, attempt, owner)
                replies_at[n] = (len(pipe) - 1, tid)
            replies = pipe.execute()
        for n, attempt in enumerate(attempts):
            if n not in replies_at:
                ready.append(attempt)
                continue
            at, tid = replies_at[n]
            if replies[at][0] == "ok":
                ready.append(replace(attempt, turn_id=tid))
            else:
                why = f"its conversation {attempt.cid} took no prompt ({replies[at][0]})"
                report.skipped.append((attempt.item_id, why))
        return ready

    def _queue_attempt(
        self, pipe: Any, config: ConversationConfig, attempt: _Attempt, owner: str
    ) -> str:
        """Queues the attempt's conversation (held) and its turn, the submit script last."""
        assert attempt.prompt is not None
        metadata = {**config.metadata, "batch_item": attempt.item_id}
        metadata["batch_attempt"] = str(attempt.number)
        own = config.model_copy(update={"metadata": metadata})
        conversations = self.store.conversations
        conversations.queue_create(pipe, attempt.cid, own, owner=owner, held=True)
        return conversations.queue_submit(
            pipe, attempt.cid, attempt.prompt, owner=owner, index=False, options=attempt.options
        )

    @contextmanager
    def _lock(self, bid: str) -> Iterator[None]:
        key, token = self.keys.batch_retrying(bid), new_id()
        with storage_errors(f"retrying batch {bid}"):
            taken = self.client.set(key, token, nx=True, px=LOCK_TTL_MS)
        if not taken:
            raise Conflict(f"batch {bid}: another retry is queueing its items; try again after it")
        try:
            yield
        finally:
            with storage_errors(f"retrying batch {bid}"):
                if self.client.get(key) == token:
                    self.client.delete(key)

    def _renew(self, bid: str) -> None:
        with storage_errors(f"retrying batch {bid}"):
            self.client.pexpire(self.keys.batch_retrying(bid), LOCK_TTL_MS)


def _unready(attempt: _Attempt, prompt: Any, owner: Any, mine: str) -> str:
    """Why an attempt cannot be made ("" when it can)."""
    if not attempt.found.item.get("turn_id") or not prompt:
        return "its prompt is not there to run again (it never ran)"
    if owner is not None and owner != mine:
        return f"conversation {attempt.cid} already exists and is not this batch's"
    return ""


def _with_input(attempt: _Attempt, prompt: str, options: Any, queued: str) -> _Attempt:
    """The attempt with the item's first prompt and options (ValidationError if unreadable)."""
    chosen = PromptOptions.model_validate_json(options or "{}")
    return replace(
        attempt,
        prompt=Content.model_validate_json(prompt),
        options=None if chosen.is_empty() else chosen,
        turn_id=queued,
    )


def _move(attempt: _Attempt) -> dict[str, Any]:
    """What the retry script needs to file one attempt, and to check the item is unchanged."""
    found = attempt.found
    item = {**found.item, "conversation_id": attempt.cid, "turn_id": attempt.turn_id}
    item.update(error="", attempts=attempt.number)
    return {
        "index": found.index,
        "old": found.item["conversation_id"],
        "state": found.result["status"],
        "new": attempt.cid,
        "item": json.dumps(item),
        "item_id": attempt.item_id,
        "denied": found.result["denied"] > 0,
    }

"""Retrying a batch's ended items on a real redis-server, without a worker: the moves a worker
would make are made here with the batch's transition, as the worker's flush hook makes them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from shared.errors import Conflict, StorageError
from shared.models.batches import BatchConfig, BatchState, BatchStatus, RetryFilter, RetryStatus
from shared.models.config import PromptOptions, ToolSelection
from shared.models.content import Content
from shared.models.notifications import EXPIRED_DENIAL
from shared.models.steps import UsageMetadata
from shared.settings import Settings
from shared.store import batch_retry
from shared.store.batch_retry import BatchRetry
from shared.store.batches import BatchLine, BatchStore, batch_owner
from shared.store.keys import KeySpace

FAILED = RetryFilter(statuses=frozenset({RetryStatus.FAILED}))


class Sent:
    def __init__(self) -> None:
        self.advanced: list[str] = []

    def advance(self, conversation_id: str) -> None:
        self.advanced.append(conversation_id)


def used(tokens: int) -> UsageMetadata:
    return UsageMetadata.from_counts(tokens, 0)


def item(store: BatchStore, bid: str, index: int) -> dict[str, Any]:
    return dict(json.loads(store.client.lindex(store.keys.batch_items(bid), index)))


def ended_batch(store: BatchStore, ends: list[BatchState]) -> tuple[str, list[str]]:
    """A batch of len(ends) items (cap 2), each run and ended in its state, in order."""
    bid = store.create(BatchConfig(max_concurrency=2))
    only_none = PromptOptions(tool_selection=ToolSelection.NONE)
    lines = [
        BatchLine(i, f"item-{i}", Content.from_text(f"prompt {i}"), options=only_none)
        for i in range(len(ends))
    ]
    store.submit(bid, lines)
    store.finish_submission(bid)
    cids = [store.conversation_id(bid, f"item-{i}") for i in range(len(ends))]
    for cid, state in zip(cids, ends, strict=True):
        store.transition(bid, cid, state, used(10))
    return bid, cids


def answer(store: BatchStore, bid: str, index: int, denials: list[str]) -> None:
    """Writes the item's turn response as the worker's end flush does: denied calls' results."""
    found = item(store, bid, index)
    steps = [
        {"type": "tool_result", "status": "canceled", "error": error, "content": "{}"}
        for error in denials
    ]
    response = {"text": "went on", "steps": steps, "usage_metadata": used(10).model_dump()}
    turn = store.keys.turn(found["conversation_id"], found["turn_id"])
    store.client.hset(turn, "response", json.dumps(response))


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def store(real_redis: redis.Redis, keys: KeySpace, sent: Sent) -> BatchStore:
    return BatchStore(real_redis, keys, Settings(), sent)


def test_failed_items_run_again_as_new_attempts(store: BatchStore, sent: Sent) -> None:
    ends = [BatchState.DONE, BatchState.FAILED, BatchState.FAILED, BatchState.CANCELLED]
    bid, cids = ended_batch(store, ends)
    before = store.info(bid)
    assert before.status is BatchStatus.DONE and before.usage.total_token_count == 40
    report = BatchRetry(store).retry(bid, FAILED)
    assert (report.retried, report.skipped) == (2, [])
    info = store.info(bid)
    assert info.status is BatchStatus.RUNNING and info.total == 4 and info.retries == 1
    counts = {s.value: n for s, n in info.counts.items() if n}
    assert counts == {"done": 1, "running": 2, "cancelled": 1}  # both placed: the cap is 2
    new = [store.conversation_id(bid, f"item-{i}", 2) for i in (1, 2)]
    assert new == [f"{cids[1]}.2", f"{cids[2]}.2"] and sorted(sent.advanced[-2:]) == sorted(new)
    states = store.client.hgetall(store.keys.batch_states(bid))
    assert cids[1] not in states and states[new[0]] == "running"
    retried = item(store, bid, 1)
    assert (retried["attempts"], retried["conversation_id"]) == (2, new[0])
    turn = store.conversations.turn(new[0], retried["turn_id"])
    assert turn.prompt.text == "prompt 1" and turn.options.tool_selection is ToolSelection.NONE
    record = store.conversations.get(new[0])
    assert record.config.metadata == {"batch_item": "item-1", "batch_attempt": "2"}
    assert record.owner == batch_owner(bid)
    assert store.conversations.get(cids[1]).conversation_id == cids[1]  # the first stays
    results = list(store.results(bid))
    assert [r["attempts"] for r in results] == [1, 2, 2, 1]
    assert [r["conversation_id"] for r in results] == [cids[0], *new, cids[3]]
    assert store.info(bid).usage.total_token_count == 40  # what the first attempts used
    store.transition(bid, cids[1], BatchState.FAILED, used(99))  # late: changes nothing
    store.transition(bid, new[0], BatchState.DONE, used(5))
    store.transition(bid, new[1], BatchState.FAILED, used(7))
    done = store.info(bid)
    assert done.status is BatchStatus.DONE and done.usage.total_token_count == 52
    assert {s.value: n for s, n in done.counts.items() if n} == {
        "done": 2, "failed": 1, "cancelled": 1
    }  # fmt: skip
    again = BatchRetry(store).retry(bid, FAILED)  # the second round: attempt 3 of item 2
    assert again.retried == 1 and item(store, bid, 2)["attempts"] == 3
    assert store.info(bid).retries == 2


def test_the_filter_tells_denied_expired_and_error_text_apart(store: BatchStore) -> None:
    ends = [BatchState.DONE, BatchState.DONE, BatchState.DONE, BatchState.FAILED]
    bid, _ = ended_batch(store, ends)
    answer(store, bid, 0, ["denied (by ada): not on Fridays"])
    answer(store, bid, 1, [f"{EXPIRED_DENIAL}: nobody answered"])
    answer(store, bid, 2, [])
    store.client.hset(store.keys.batch(bid), "denied", 2)  # as the worker's end moves counted
    retry = BatchRetry(store)

    def only(*statuses: RetryStatus, error: str | None = None) -> list[int]:
        chosen = RetryFilter(statuses=frozenset(statuses), error=error)
        return [n for n, found in enumerate(store.results(bid)) if _taken(found, chosen)]

    assert only(RetryStatus.DENIED) == [0] and only(RetryStatus.EXPIRED) == [1]
    assert only(*RetryStatus, error="FRIDAYS") == [0]
    report = retry.retry(bid, RetryFilter(statuses=frozenset({RetryStatus.EXPIRED})))
    assert report.retried == 1 and item(store, bid, 1)["attempts"] == 2
    info = store.info(bid)
    assert info.denied == 1 and info.counts[BatchState.DONE] == 2  # the expired one left both


def _taken(result: dict[str, Any], chosen: RetryFilter) -> bool:
    from shared.batches.retry import wanted

    return wanted(result, chosen)


def test_a_retry_cut_short_is_finished_by_the_next_and_queues_one_turn(
    store: BatchStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    bid, _ = ended_batch(store, [BatchState.FAILED, BatchState.DONE])
    monkeypatch.setattr(batch_retry, "RETRY", _Gone(batch_retry.RETRY))
    with pytest.raises(StorageError):
        BatchRetry(store).retry(bid, FAILED)
    new = store.conversation_id(bid, "item-0", 2)
    assert store.client.llen(store.keys.inbox(new)) == 1  # its turn, queued: the item not filed
    assert "attempts" not in item(store, bid, 0)
    assert not store.client.exists(store.keys.batch_retrying(bid))  # the lock was let go
    monkeypatch.undo()
    assert BatchRetry(store).retry(bid, FAILED).retried == 1
    assert store.client.llen(store.keys.inbox(new)) == 1  # the same turn, not a second
    assert item(store, bid, 0)["turn_id"] == store.client.lindex(store.keys.inbox(new), 0)


class _Gone:
    """The retry script as a caller sees it when Redis goes away just before it runs."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def args_from(self, named: dict[str, Any]) -> list[Any]:
        return list(self.real.args_from(named))

    def keys_from(self, named: dict[str, str]) -> list[str]:
        return list(self.real.keys_from(named))

    def __call__(self, *args: Any) -> None:
        raise StorageError("Redis went away")


def test_two_retries_never_overlap(store: BatchStore) -> None:
    bid, _ = ended_batch(store, [BatchState.FAILED])
    store.client.set(store.keys.batch_retrying(bid), "another", px=10_000)
    with pytest.raises(Conflict) as refused:
        BatchRetry(store).retry(bid, FAILED)
    assert "another retry" in str(refused.value)
    assert store.info(bid).counts[BatchState.FAILED] == 1


def test_an_item_that_never_ran_is_reported_not_retried(store: BatchStore) -> None:
    bid, _ = ended_batch(store, [BatchState.FAILED, BatchState.FAILED])
    taken = {**item(store, bid, 1), "turn_id": "", "error": "conversation already existed"}
    store.client.lset(store.keys.batch_items(bid), 1, json.dumps(taken))
    report = BatchRetry(store).retry(bid, FAILED)
    assert report.retried == 1 and report.skipped == [
        ("item-1", "its prompt is not there to run again (it never ran)")
    ]


def test_a_retried_batch_waits_for_its_budget(store: BatchStore) -> None:
    bid, _ = ended_batch(store, [BatchState.FAILED, BatchState.FAILED])
    store.client.hset(store.keys.batch(bid), mapping={"limit:tokens": 20, "spent:tokens": 20})
    assert BatchRetry(store).retry(bid, FAILED).retried == 2
    info = store.info(bid)
    assert info.counts[BatchState.QUEUED] == 2 and info.counts[BatchState.RUNNING] == 0
    assert info.held == "budget:tokens"


def test_a_retry_takes_items_by_tool_and_by_id() -> None:
    from shared.batches.retry import wanted

    denied = {"id": "a", "status": "done", "denied": 1, "denials": ["denied (by ada): no"]}
    called = {**denied, "tool_calls": ["send_email", "calculator"]}
    failed = {"id": "b", "status": "failed", "tool_calls": None, "error": "boom"}
    by_tool = RetryFilter(tool="send_email")
    assert wanted(called, by_tool) and not wanted(denied, by_tool)
    assert not wanted(failed, by_tool)  # a failed turn left no calls to read
    assert not wanted(called, RetryFilter(tool="clock"))
    assert wanted(failed, RetryFilter(items=frozenset({"b"})))
    assert not wanted(called, RetryFilter(items=frozenset({"b"})))
    assert not wanted({"id": "c", "status": "done"}, RetryFilter(items=frozenset({"c"})))
    with pytest.raises(ValueError):
        RetryFilter(tool="no such tool!")

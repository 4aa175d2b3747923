"""Budgets under several real workers: a provider stand-in reports exact usage for every call;
a 200-item batch with a budget of N tokens spends no more than N plus the calls in flight,
stops dispatching and says so, and goes on when the budget is raised; an owner's daily budget
refuses the next call with `budget_exhausted`, naming it; a conversation's budget in money."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.errors import TurnFailed
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.budgets import BudgetKind, BudgetSpec
from shared.models.config import ConversationOptions
from shared.models.model_settings import ModelSettings
from shared.models.prices import PriceSpec
from shared.store.batches import BatchInfo, parse_line
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.wire_servers import RecordedRequest, Reply, WireServer, chat_chunk, sse, usage_chunk

__all__ = ["model_server"]  # a fixture of this module

PROMPT_TOKENS, OUTPUT_TOKENS = 20, 10  # what the stand-in reports for every call
PER_CALL = PROMPT_TOKENS + OUTPUT_TOKENS
ITEMS, CONCURRENCY = 200, 8


def exact_usage(request: RecordedRequest) -> Reply:
    del request
    return sse(
        chat_chunk(content="done"),
        chat_chunk(finish_reason="stop"),
        usage_chunk(PROMPT_TOKENS, OUTPUT_TOKENS),
    )


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    model_server.script(*[exact_usage] * 2_000)
    return stand_in_env(redis_server, model_server)


@pytest.fixture(scope="module")
def workers(stack_env: dict[str, str]) -> Iterator[None]:
    """Three worker processes share the budget's script."""
    from tests.stack import WorkerProcess

    started = [WorkerProcess(stack_env, name=f"b{n}").start() for n in range(3)]
    yield
    for process in started:
        process.stop()


@pytest.fixture
def client(stack_env: dict[str, str], workers: None) -> Iterator[Client]:
    with stack_client(stack_env, workers) as signoff:
        yield signoff


def _wait(client: Client, bid: str, done: Callable[[BatchInfo], bool], what: str) -> BatchInfo:
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        info = client.stores.batches.info(bid)
        if done(info):
            return info
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {info}")


def test_a_batch_never_spends_past_its_budget_more_than_the_calls_in_flight(
    client: Client, stack_env: dict[str, str]
) -> None:
    budget = 1_500  # about 50 of the 200 items
    options = ConversationOptions(
        provider="openai", model="m", model_settings=ModelSettings(max_output_tokens=OUTPUT_TOKENS)
    )
    config = options.resolve(client.settings, policy_may_loosen=True)
    batches = client.stores.batches
    bid = batches.create(BatchConfig(conversation=config, max_concurrency=CONCURRENCY))
    client.stores.budgets.set(BudgetKind.BATCH, bid, BudgetSpec(tokens=budget))
    lines = [
        parse_line(n + 1, json.dumps({"id": f"i{n}", "prompt": f"item {n}"}), client.settings)
        for n in range(ITEMS)
    ]
    batches.submit(bid, [line for line in lines if line is not None])
    batches.finish_submission(bid)

    def held(info: BatchInfo) -> bool:
        return bool(info.held) and info.counts[BatchState.RUNNING] == 0

    stopped = _wait(client, bid, held, "the batch to stop at its budget")
    spent = client.stores.budgets.get(BudgetKind.BATCH, bid)
    in_flight_bound = CONCURRENCY * PER_CALL
    assert budget - PER_CALL < spent.spent_tokens <= budget + in_flight_bound
    assert stopped.usage.total_token_count == spent.spent_tokens  # every call counted once
    assert spent.reserved_tokens == 0  # every reservation settled
    assert stopped.held == "budget:tokens" and stopped.status is BatchStatus.RUNNING
    assert stopped.counts[BatchState.QUEUED] > 100  # the rest keeps its place
    time.sleep(1.0)  # nothing more is dispatched while it is held
    assert batches.info(bid).counts[BatchState.QUEUED] == stopped.counts[BatchState.QUEUED]

    shown = CliRunner(env=stack_env).invoke(cli, ["batch", "status", bid])
    assert "held: its tokens budget is spent" in shown.output, shown.output
    refused = [
        r for r in batches.results(bid) if r["status"] == BatchState.FAILED.value
    ]  # calls in flight when the budget ran out end with the reason
    assert all("budget_exhausted" in json.dumps(r) for r in refused), refused[:1]

    raised = CliRunner(env=stack_env).invoke(
        cli, ["budget", "set", "batch", bid, "--tokens", "1000000"]
    )
    assert raised.exit_code == 0, raised.output
    finished = _wait(client, bid, lambda i: i.status is BatchStatus.DONE, "the batch to finish")
    assert finished.counts[BatchState.DONE] + finished.counts[BatchState.FAILED] == ITEMS
    assert finished.counts[BatchState.DONE] >= ITEMS - CONCURRENCY
    assert not finished.held


def test_an_owners_daily_budget_refuses_the_next_call_naming_it(client: Client) -> None:
    budgets = client.stores.budgets
    budgets.set(BudgetKind.OWNER, "alice", BudgetSpec(tokens=2 * PER_CALL + 5))
    conversation = client.new_conversation(
        provider="openai",
        model="m",
        owner="alice",
        model_settings={"max_output_tokens": OUTPUT_TOKENS},
    )
    conversation.chat_to_completion("one")
    conversation.chat_to_completion("two")
    with pytest.raises(TurnFailed, match="budget_exhausted: the owner budget of owner 'alice'"):
        conversation.chat_to_completion("three")
    today = budgets.get(BudgetKind.OWNER, "alice")
    assert (today.spent_tokens, today.reserved_tokens) == (2 * PER_CALL, 0)
    assert today.exhausted is False  # room left, but not for one more worst case
    other = client.new_conversation(provider="openai", model="m", owner="bob")
    assert other.chat_to_completion("fine").text == "done"  # another owner is not bounded


def test_a_money_budget_on_a_conversation(client: Client) -> None:
    client.stores.prices.set(
        "openai", "paid", PriceSpec(input_per_mtok=1000, output_per_mtok=1000), actor="t"
    )
    conversation = client.new_conversation(
        provider="openai", model="paid", model_settings={"max_output_tokens": OUTPUT_TOKENS}
    )
    # one call costs 30 tokens at 1000 per million: 0.03
    client.stores.budgets.set(
        BudgetKind.CONVERSATION, conversation.conversation_id, BudgetSpec(cost=0.04)
    )
    first = conversation.chat_to_completion("one")
    assert first.usage_metadata is not None and first.usage_metadata.cost_micros == 30_000
    with pytest.raises(TurnFailed, match="budget_exhausted: the conversation budget"):
        conversation.chat_to_completion("two")
    free = client.new_conversation(provider="openai", model="unpriced-model")
    client.stores.budgets.set(BudgetKind.CONVERSATION, free.conversation_id, BudgetSpec(cost=1))
    with pytest.raises(TurnFailed, match="is in money, and this model has no price"):
        free.chat_to_completion("hi")


def test_a_batch_counts_against_its_submitters_daily_budget(client: Client) -> None:
    client.stores.budgets.set(BudgetKind.OWNER, "carol", BudgetSpec(tokens=3 * PER_CALL + 5))
    options = ConversationOptions(
        provider="openai", model="m", model_settings=ModelSettings(max_output_tokens=OUTPUT_TOKENS)
    )
    config = options.resolve(client.settings, policy_may_loosen=True)
    batches = client.stores.batches
    bid = batches.create(BatchConfig(conversation=config, max_concurrency=1), created_by="carol")
    lines = [parse_line(n + 1, json.dumps({"prompt": f"p{n}"}), client.settings) for n in range(6)]
    batches.submit(bid, [line for line in lines if line is not None])
    batches.finish_submission(bid)
    done = _wait(client, bid, lambda i: i.status is BatchStatus.DONE, "the batch to end")
    assert done.counts[BatchState.DONE] == 3 and done.counts[BatchState.FAILED] == 3
    failed = [r for r in batches.results(bid) if r["status"] == BatchState.FAILED.value]
    assert all("the owner budget of owner 'carol'" in json.dumps(r) for r in failed)
    assert client.stores.budgets.get(BudgetKind.OWNER, "carol").spent_tokens == 3 * PER_CALL

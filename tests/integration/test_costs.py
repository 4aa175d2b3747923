"""Prices and cost, end to end: a real worker prices each model call against a stand-in server
that reports exact usage, per turn, conversation, model, agent and owner and day; a price
change applies from the next call; a model without a price is "no price"; a server that
reports no usage gets an estimate, marked as such; and `signoff price` sets what it reads."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.config import ConversationOptions
from shared.models.prices import PriceSpec, format_cost
from shared.models.steps import UsageMetadata
from shared.store.batches import parse_line
from shared.usage_report import parse_day
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.stack import WorkerProcess
from tests.wire_servers import WireServer, chat_chunk, sse, usage_chunk

__all__ = ["model_server"]  # a fixture of this module


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    return stand_in_env(redis_server, model_server)


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    with stack_client(stack_env, worker) as signoff:
        yield signoff


def answer(prompt: int, output: int, *, cached: int = 0, usage: bool = True) -> object:
    chunks = [chat_chunk(content="a fine answer"), chat_chunk(finish_reason="stop")]
    if usage:
        chunks.append(usage_chunk(prompt, output, cached=cached))
    return sse(*chunks)


def day_fields(client: Client) -> dict[str, str]:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    total: dict[str, int] = {}
    for shard in client.keys.all_shards():  # one copy per state shard
        for k, v in client.redis.hgetall(client.keys.usage_by_day(day, shard)).items():
            total[str(k)] = total.get(str(k), 0) + int(v)
    return {k: str(v) for k, v in total.items()}


def test_each_call_is_priced_and_a_new_price_applies_from_the_next_call(
    client: Client, model_server: WireServer
) -> None:
    model = f"priced-{uuid.uuid4().hex[:6]}"
    prices = client.stores.prices
    prices.set(
        "openai",
        model,
        PriceSpec(input_per_mtok=2, cached_input_per_mtok=1, output_per_mtok=10),
        actor="t",
    )
    agent = NewAgent(name=f"a{uuid.uuid4().hex[:6]}", provider="openai", model=model)
    client.stores.agents.create(agent, actor="t")
    model_server.script(answer(1000, 200, cached=400), answer(1000, 200))
    conversation = client.new_conversation(agent=agent.name)
    first = conversation.chat_to_completion("one")
    # 600 uncached at 2, 400 cached at 1, 200 output at 10, per million: in millionths
    assert first.usage_metadata is not None
    assert first.usage_metadata.cost_micros == 600 * 2 + 400 * 1 + 200 * 10
    assert first.usage_metadata.unpriced_calls == 0

    prices.set("openai", model, PriceSpec(input_per_mtok=5, output_per_mtok=20), actor="t")
    second = conversation.chat_to_completion("two")
    assert second.usage_metadata is not None
    assert second.usage_metadata.cost_micros == 1000 * 5 + 200 * 20
    total = client.stores.history(conversation.conversation_id).usage_summary().total
    assert total.cost_micros == 3600 + 9000  # the first call kept its price
    assert total.prompt_token_count == 2000

    fields = day_fields(client)
    by_model = parse_day(fields)[model]
    assert (by_model.cost_micros, by_model.candidates_token_count) == (12_600, 400)
    scopes = parse_day(fields, scopes=True)
    assert scopes[f"agent:{agent.name}"].cost_micros == 12_600
    assert scopes["owner:-"].cost_micros >= 12_600  # a direct client submits as no one


def test_a_model_without_a_price_counts_tokens_and_no_price(
    client: Client, model_server: WireServer
) -> None:
    model = f"free-{uuid.uuid4().hex[:6]}"
    model_server.script(answer(30, 7))
    response = client.new_conversation(provider="openai", model=model).chat_to_completion("hi")
    usage = response.usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count, usage.cost_micros, usage.unpriced_calls) == (30, 0, 1)
    assert format_cost(usage) == "no price"
    assert parse_day(day_fields(client))[model].unpriced_calls == 1


def test_a_server_that_reports_no_usage_gets_an_estimate_marked_as_such(
    client: Client, model_server: WireServer
) -> None:
    model = f"quiet-{uuid.uuid4().hex[:6]}"
    client.stores.prices.set(
        "openai", model, PriceSpec(input_per_mtok=1, output_per_mtok=1), actor="t"
    )
    model_server.script(answer(0, 0, usage=False))
    prompt = "a question of some length " * 20
    usage = client.new_conversation(provider="openai", model=model).chat_to_completion(prompt)
    reported = usage.usage_metadata
    assert reported is not None and reported.estimated_calls == 1
    assert reported.prompt_token_count >= len(prompt) // 4  # about four characters a token
    assert reported.candidates_token_count == len("a fine answer") // 4 + 1
    assert reported.cost_micros == reported.prompt_token_count + reported.candidates_token_count


def test_signoff_price_sets_lists_and_unsets(stack_env: dict[str, str], client: Client) -> None:
    runner = CliRunner(env=stack_env)
    set_ = runner.invoke(
        cli, ["price", "set", "ollama", "llama3:8b", "--input", "0.5", "--output", "1.5"]
    )
    assert set_.exit_code == 0, set_.output
    stored = client.stores.prices.get("ollama", "llama3:8b")
    assert stored is not None and (stored.input_per_mtok, stored.output_per_mtok) == (0.5, 1.5)
    listed = runner.invoke(cli, ["price", "list"])
    assert "ollama/llama3:8b\tinput 0.5\tcached =input\toutput 1.5" in listed.output
    bad = runner.invoke(cli, ["price", "set", "ollama", "x", "--input", "-1", "--output", "1"])
    assert bad.exit_code == 1 and "input_per_mtok" in bad.output
    assert runner.invoke(cli, ["price", "unset", "ollama", "llama3:8b"]).exit_code == 0
    assert client.stores.prices.get("ollama", "llama3:8b") is None
    again = runner.invoke(cli, ["price", "unset", "ollama", "llama3:8b"])
    assert again.exit_code == 2 and "no price is set for ollama/llama3:8b" in again.output


def test_usage_counters_add_cost_too() -> None:
    one = UsageMetadata(cost_micros=5, unpriced_calls=1, estimated_calls=1)
    assert one + one == UsageMetadata(cost_micros=10, unpriced_calls=2, estimated_calls=2)


def test_signoff_usage_shows_cost_by_model_and_owner_and_writes_csv(
    stack_env: dict[str, str], client: Client, model_server: WireServer
) -> None:
    model = f"shown-{uuid.uuid4().hex[:6]}"
    client.stores.prices.set(
        "openai", model, PriceSpec(input_per_mtok=1e6, output_per_mtok=0), actor="t"
    )
    model_server.script(answer(3, 1))
    client.new_conversation(provider="openai", model=model, owner="dora").chat_to_completion("x")
    runner = CliRunner(env=stack_env)
    shown = runner.invoke(cli, ["usage", "--days", "1"])
    assert shown.exit_code == 0, shown.output
    assert f"  {model}\t4 tokens\tcost 3" in _section(shown.output, "model")  # 3 at 1 each
    assert "  dora\t4 tokens\tcost 3" in _section(shown.output, "owner")
    table = runner.invoke(cli, ["usage", "--csv"]).output.splitlines()
    assert table[0].startswith("day,kind,name,prompt_token_count")
    assert any(f",model,{model},3,1," in row and row.endswith(",3.000000") for row in table)


def _section(output: str, kind: str) -> str:
    """The lines `signoff usage` prints under "by <kind>:"."""
    after = output.split(f"by {kind}:\n", 1)[1]
    return after.split("\nby ", 1)[0]


def test_usage_and_a_batchs_cost_by_batch_agent_owner_and_day_through_the_cli(
    stack_env: dict[str, str], client: Client, model_server: WireServer
) -> None:
    model = f"split-{uuid.uuid4().hex[:6]}"
    client.stores.prices.set(
        "openai", model, PriceSpec(input_per_mtok=1e6, output_per_mtok=0), actor="t"
    )
    agent = NewAgent(name=f"a{uuid.uuid4().hex[:6]}", provider="openai", model=model)
    client.stores.agents.create(agent, actor="t")
    slow = sse(
        chat_chunk(content="a fine answer"),
        chat_chunk(finish_reason="stop"),
        usage_chunk(3, 1),
        chunk_delay_s=1.0,
    )
    model_server.script(answer(3, 1), slow, slow, answer(3, 1))
    # a batch of 3 submitted by erin, one at a time; its id starts as a formula would
    config = ConversationOptions(provider="openai", model=model).resolve(
        client.settings, policy_may_loosen=True
    )
    batches = client.stores.batches
    bid = batches.create(
        BatchConfig(conversation=config, max_concurrency=1),
        batch_id=f"-{uuid.uuid4().hex[:8]}",
        created_by="erin",
    )
    lines = [parse_line(n + 1, f'{{"prompt": "p{n}"}}', client.settings) for n in range(3)]
    batches.submit(bid, [line for line in lines if line is not None])
    batches.finish_submission(bid)
    runner = CliRunner(env=stack_env)
    _wait_for(lambda: batches.info(bid).counts[BatchState.DONE] >= 1)
    status = runner.invoke(cli, ["batch", "status", "--json", "--", bid])
    midway = json.loads(status.output)
    assert midway["counts"]["done"] == 1  # the next item's answer takes 2 s
    assert midway["rest_cost_micros"] == 2 * 3_000_000  # 3 per item that ran, 2 to go
    shown = runner.invoke(cli, ["batch", "status", "--", bid]).output
    assert "cost 3, about 6 more for the rest" in shown, shown
    _wait_for(lambda: batches.info(bid).status is BatchStatus.DONE, timeout_s=30)
    chat = client.new_conversation(agent=agent.name, owner="dora")
    chat.chat_to_completion("y")

    shown = runner.invoke(cli, ["usage", "--days", "1"])
    assert shown.exit_code == 0, shown.output
    assert f"  {bid}\t12 tokens\tcost 9" in _section(shown.output, "batch")
    assert f"  {agent.name}\t4 tokens\tcost 3" in _section(shown.output, "agent")
    assert "  erin\t12 tokens\tcost 9" in _section(shown.output, "owner")
    assert f"  {model}\t16 tokens\tcost 12" in _section(shown.output, "model")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert _section(shown.output, "day").startswith(f"  {today}\t")

    only = runner.invoke(cli, ["usage", "--by", "batch", "--by", "agent", "--csv"]).output
    rows = list(csv.reader(io.StringIO(only)))
    assert {row[1] for row in rows[1:]} == {"batch", "agent"}
    mine = next(row for row in rows if row[2] == f"'{bid}")  # not a formula in a spreadsheet
    assert mine[rows[0].index("total_token_count")] == "12" and mine[-1] == "9.000000"
    one_kind = runner.invoke(cli, ["usage", "--by", "day"]).output
    assert "by day:" in one_kind and "by model:" not in one_kind


def _wait_for(done: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)

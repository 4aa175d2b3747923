"""A conversation's context kept within its model's window, with a real worker and a stand-in
speaking the OpenAI wire format that counts tokens as a denser tokenizer would (a token per
2.5 characters, where Signoff's estimate says four) and answers 400, as OpenAI does, to a
request whose prompt and `max_tokens` pass its window. Many turns on a 1,000-token model never
fail: the context is compacted before it nears the window, sized by the tokens the stand-in
reported; every compaction's calls are counted in the usage and the budget; a context that
cannot fit, even compacted, ends its turn with `context_overflow` before any call; an agent's
`context_tokens` sizes a model the settings do not."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.errors import TurnFailed
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.budgets import BudgetKind, BudgetSpec
from tests.model_stack import model_server, stack_client, stand_in_env
from tests.stack import WorkerProcess
from tests.wire_servers import (
    RecordedRequest,
    Reply,
    WireServer,
    chat_chunk,
    openai_error,
    sse,
    usage_chunk,
)
from worker.compaction import SUMMARY_INSTRUCTION

__all__ = ["model_server"]  # a fixture of this module

WINDOWS = {"small": 1_000, "tiny": 800}  # the stand-in's context windows, by model
TEMPLATE_TOKENS = 30  # what its chat template adds to every prompt
ONE_TOOL: dict[str, Any] = {"calculator": "auto"}  # its definition counts in every prompt


def prompt_tokens(body: dict[str, Any]) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
    tools = len(json.dumps(body.get("tools", [])))
    return math.ceil((chars + tools) / 2.5) + TEMPLATE_TOKENS


def answer(request: RecordedRequest) -> Reply:
    body = request.json()
    prompt, window = prompt_tokens(body), WINDOWS[body["model"]]
    asked = int(body.get("max_tokens") or 0)
    if prompt + asked > window:
        return openai_error(
            400, f"maximum context length is {window} tokens; you requested {prompt + asked}"
        )
    summary = body["messages"][-1]["content"] == SUMMARY_INSTRUCTION
    text = "Summary: the user sent numbered notes." if summary else "Noted. " + "z" * 60
    return sse(
        chat_chunk(content=text),
        chat_chunk(finish_reason="stop"),
        usage_chunk(prompt, math.ceil(len(text) / 2.5)),
    )


@pytest.fixture(scope="module")
def stack_env(redis_server: EmbeddedRedis, model_server: WireServer) -> dict[str, str]:
    model_server.script(*[answer] * 2_000)
    sizes = json.dumps({"openai:small": WINDOWS["small"]})
    return stand_in_env(redis_server, model_server, SIGNOFF_CONTEXT_SIZES=sizes)


@pytest.fixture
def client(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    with stack_client(stack_env, worker) as signoff:
        yield signoff


def note(n: int) -> str:
    return f"Note {n}: " + "remember this detail about the project. " * 5  # ~110 tokens


def test_many_turns_on_a_small_window_never_fail_and_compactions_are_counted(
    client: Client, model_server: WireServer
) -> None:
    first = len(model_server.requests)
    conversation = client.new_conversation(provider="openai", model="small", tools=ONE_TOOL)
    cid = conversation.conversation_id
    client.stores.budgets.set(BudgetKind.CONVERSATION, cid, BudgetSpec(tokens=10**7))
    for n in range(30):
        assert conversation.chat_to_completion(note(n)).text.startswith("Noted.")

    calls = [r.json() for r in model_server.requests[first:]]
    summaries = [c for c in calls if c["messages"][-1]["content"] == SUMMARY_INSTRUCTION]
    assert len(conversation.compaction_indices) >= 4 and len(summaries) >= 4
    assert max(prompt_tokens(c) for c in calls) <= WINDOWS["small"]
    # every call, the compactions' too, is in the conversation's usage and its budget
    reported = sum(prompt_tokens(c) for c in calls)
    total = conversation.total_usage
    assert total.prompt_token_count == reported
    spent = client.stores.budgets.get(BudgetKind.CONVERSATION, cid)
    assert spent.spent_tokens == total.prompt_token_count + total.candidates_token_count
    assert spent.reserved_tokens == 0


def test_a_context_that_cannot_fit_fails_with_context_overflow_before_any_call(
    client: Client, model_server: WireServer
) -> None:
    alone = client.new_conversation(provider="openai", model="small", tools=ONE_TOOL)
    sent = len(model_server.requests)
    with pytest.raises(TurnFailed, match=r"context_overflow: .* with nothing left to compact"):
        alone.chat_to_completion("x" * 5_000)
    assert len(model_server.requests) == sent

    grown = client.new_conversation(provider="openai", model="small", tools=ONE_TOOL)
    for n in range(3):
        grown.chat_to_completion(note(n))
    sent = len(model_server.requests)
    # 3,000 characters: 750 by the estimate, 1,200 as the stand-in counts, as the last call taught
    with pytest.raises(TurnFailed, match=r"context_overflow: .* even compacted"):
        grown.chat_to_completion("y" * 3_000)
    assert len(model_server.requests) == sent  # no compaction would have made it fit
    assert grown.chat_to_completion("a short one").text.startswith("Noted.")  # it goes on


def test_an_agents_context_tokens_size_a_model_the_settings_do_not(
    client: Client, model_server: WireServer, stack_env: dict[str, str]
) -> None:
    name = f"a{uuid.uuid4().hex[:6]}"
    options = ["--provider", "openai", "--model", "tiny", "--tools", json.dumps(ONE_TOOL)]
    created = CliRunner(env=stack_env).invoke(
        cli, ["agent", "create", name, *options, "--context-tokens", "800"]
    )
    assert created.exit_code == 0, created.output
    assert client.stores.agents.get(name).context_tokens == 800
    conversation = client.new_conversation(agent=name)
    first = len(model_server.requests)
    for n in range(10):
        assert conversation.chat_to_completion(note(n)).text.startswith("Noted.")
    assert len(conversation.compaction_indices) >= 2
    calls = [r.json() for r in model_server.requests[first:]]
    assert max(prompt_tokens(c) + int(c.get("max_tokens") or 0) for c in calls) <= 800

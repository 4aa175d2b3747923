"""A long conversation against the real model (Gemma 3 270M on llama-cpp-python's server) at a
4,096-token context: 100 turns, none failing for its context. Minutes long, so it is marked
`long`: `make test-long` runs it, `make test` leaves it out (docs/real-model.md).

The server reports no usage, so every size is Signoff's estimate; the model's own tokenizer
(the server's /extras/tokenize/count) shows that the history outgrows the window.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from shared.models.steps import StepType
from tests.integration.test_real_model import Relay
from tests.real_model import MODEL_ALIAS, llama_server
from tests.wire_servers import WireServer

pytestmark = [pytest.mark.integration, pytest.mark.long]

CONTEXT = 4096  # the server's window and the conversation's context_tokens
TURNS = 100
QUESTION = "name a colour, an animal and a number, and say which of the three you like best"


@pytest.fixture(scope="module")
def llama_base_url() -> Iterator[str]:
    with llama_server(threads=2, n_ctx=CONTEXT) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def relay(llama_base_url: str) -> Iterator[tuple[WireServer, Relay]]:
    forward = Relay(llama_base_url)
    with WireServer() as wire:
        wire.script(*[forward] * (3 * TURNS))
        yield wire, forward


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], relay: tuple[WireServer, Relay]) -> dict[str, str]:
    """The openai provider pointed at the relay; a compaction's call reads a nearly full
    window (about 3,000 tokens), which a busy 2-core machine takes minutes over."""
    wire, _ = relay
    return {
        **stack_env,
        "SIGNOFF_OPENAI_BASE_URL": f"{wire.url}/v1",
        "SIGNOFF_PROVIDER_MAX_RETRIES": "0",
        "SIGNOFF_PROVIDER_TIMEOUT_S": "600",
        "SIGNOFF_TURN_TIMEOUT_S": "1200",
    }


@pytest.mark.timeout(5400)
def test_100_turns_keep_within_a_4096_token_context(
    client: Client, relay: tuple[WireServer, Relay], llama_base_url: str
) -> None:
    _, forward = relay
    conversation = client.new_conversation(
        provider="openai",
        model=MODEL_ALIAS,
        tools={},
        context_tokens=CONTEXT,
        model_settings={"max_output_tokens": 24, "temperature": 0, "seed": 1},
    )
    for n in range(TURNS):
        turn_id = conversation.send(f"Question {n}: {QUESTION}, and why, in one short line.")
        try:
            conversation.wait_for_turn(turn_id, timeout=1200)
        except TurnFailed as exc:
            pytest.fail(f"turn {n} failed: {exc}; server statuses {forward.statuses[-3:]}")
    assert conversation.turn_count == TURNS
    assert conversation.compaction_indices, "the context was never compacted"
    assert set(forward.statuses) == {200}
    texts = [
        str(step.content)
        for step in conversation.history
        if step.type in (StepType.USER_INPUT, StepType.TEXT_RESPONSE)
    ]
    assert _token_count(llama_base_url, "\n".join(texts)) > CONTEXT


def _token_count(base_url: str, text: str) -> int:
    """Tokens in `text` by the served model's tokenizer (llama-cpp-python's extras)."""
    body = json.dumps({"input": text}).encode()
    request = urllib.request.Request(
        f"{base_url.removesuffix('/v1')}/extras/tokenize/count",
        body,
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.load(response)["count"])

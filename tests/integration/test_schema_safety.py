"""A user's schema cannot stall a real worker: patterns run in re2, a refused schema never parks.

The evil pattern ``(a+)+$`` is accepted (re2 makes it harmless). Python's backtracking
``re`` would need minutes for the scripted model's answer here, holding the GIL, so
every other turn on the same worker would stop too; these tests would then time out.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from shared.client import Client
from shared.errors import InvalidInput, TurnFailed
from shared.models.notifications import Submit
from shared.models.steps import StepStatus, StepType
from tests.stack import parked

EVIL: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "string", "pattern": "(a+)+$"}},
    "required": ["a"],
}
NEAR_MISS = "a" * 60 + "!"  # the scripted model quotes it in its answer
SMALL_BOUND_S = 15.0  # a turn of the scripted model with #slow takes a few seconds


def _ask(schema: dict[str, Any]) -> str:
    return f"call ask_operator {json.dumps({'question': 'Which?', 'schema': schema})}"


def test_an_evil_response_pattern_neither_stalls_its_turn_nor_another(client: Client) -> None:
    evil = client.new_conversation(response_schema=EVIL)
    other = client.new_conversation()
    started = time.monotonic()
    evil_turn = evil.send(NEAR_MISS)
    other_turn = other.send("#slow keep going while the other answer is checked")
    answer = other.wait_for_turn(other_turn, timeout=SMALL_BOUND_S)
    assert answer.text.startswith("[demo model]")
    assert time.monotonic() - started < SMALL_BOUND_S
    with pytest.raises(TurnFailed) as failure:
        evil.wait_for_turn(evil_turn, timeout=SMALL_BOUND_S)
    assert time.monotonic() - started < SMALL_BOUND_S
    message = str(failure.value)
    assert "structured output is invalid against the response schema" in message
    assert "does not match '(a+)+$'" in message
    # The first answer quoted the near miss; its violation went back to the model.
    repair = [s.content for s in evil.history if "not valid against the required" in s.content]
    assert repair and NEAR_MISS in repair[0] and "does not match '(a+)+$'" in repair[0]


def test_the_evil_pattern_still_accepts_a_matching_answer(client: Client) -> None:
    schema = {**EVIL, "properties": {"a": {"type": "string", "pattern": '(a+)+!"\\. I am'}}}
    response = client.new_conversation(response_schema=schema).chat_to_completion(NEAR_MISS)
    assert isinstance(response.structured_output, dict)
    assert NEAR_MISS in response.structured_output["a"]


def test_an_operator_answer_is_checked_against_an_evil_question_schema(client: Client) -> None:
    conversation = client.new_conversation()
    turn = conversation.send(_ask(EVIL))
    note = parked(conversation)[0]
    assert note.submit_schema == EVIL
    started = time.monotonic()
    with pytest.raises(InvalidInput, match=r"does not match '\(a\+\)\+\$'"):
        client.resolve_notification(note.id, Submit(content={"a": NEAR_MISS}), actor="dana")
    assert time.monotonic() - started < 2.0
    client.resolve_notification(note.id, Submit(content={"a": "aaaa"}), actor="dana")
    response = conversation.wait_for_turn(turn, timeout=SMALL_BOUND_S)
    assert "aaaa" in response.text


def test_a_question_whose_schema_re2_refuses_fails_instead_of_parking(client: Client) -> None:
    backreference = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}
    conversation = client.new_conversation()
    response = conversation.wait_for_turn(
        conversation.send(_ask(backreference)), timeout=SMALL_BOUND_S
    )
    assert conversation.pending_notifications() == []
    [result] = [s for s in response.steps if s.type is StepType.TOOL_RESULT]
    assert result.status is StepStatus.ERROR
    assert result.error.startswith("schema: the pattern at $.properties.a.pattern is not supported")
    assert "ask_operator failed" in response.text

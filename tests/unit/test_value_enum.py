"""The models' string enums read `value` through a plain property, and it still answers
what Enum's own would."""

from __future__ import annotations

import enum
import inspect

from pydantic import BaseModel

from shared.models.events import ConversationStatus, TurnStatus
from shared.models.steps import StepStatus, StepType
from shared.models.value_enum import ValueEnum
from worker.checkpoint import Phase


def _all(kind: type[ValueEnum]) -> list[type[ValueEnum]]:
    found = []
    for sub in kind.__subclasses__():
        found += [sub, *_all(sub)]
    return found


def test_every_member_reads_the_value_enum_would_give() -> None:
    kinds = _all(ValueEnum)
    assert {StepType, StepStatus, TurnStatus, ConversationStatus, Phase} <= set(kinds)
    for kind in kinds:
        for member in kind:
            assert member.value == enum.Enum.__dict__["value"].__get__(member, kind)
            assert member.value == str.__str__(member)
            assert kind(member.value) is member


def test_value_is_a_plain_property_not_enums_python_one() -> None:
    found = inspect.getattr_static(StepType.TEXT_RESPONSE, "value")
    assert type(found) is property
    assert not isinstance(found, enum.property)


def test_pydantic_writes_and_reads_the_values() -> None:
    class Record(BaseModel):
        type: StepType
        status: TurnStatus

    record = Record(type=StepType.TOOL_CALL, status=TurnStatus.RUNNING)
    text = record.model_dump_json()
    assert text == '{"type":"tool_call","status":"running"}'
    assert Record.model_validate_json(text) == record
    assert StepType("no such type") is StepType.UNKNOWN  # the tolerant enum still is

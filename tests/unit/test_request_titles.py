"""Request titles: the tool and its most telling arguments, chosen or by default."""

from __future__ import annotations

from typing import Any

import pytest

from shared.models.notifications import Notification, ResolutionKind
from shared.models.steps import ToolCall
from shared.request_titles import default_title_arguments, request_title, title_of_call
from shared.store.policy import TitleArguments


def _note(tool: str, args: dict[str, Any], **extra: Any) -> Notification:
    return Notification(
        id="c1.n1",
        conversation_id="c1",
        turn_id="t1",
        title=f"Allow {tool}?",
        tool_call=ToolCall(id="call1", name=tool, args=args),
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=1.0,
        **extra,
    )


EMAIL = {"to": "ana@example.com", "subject": "Refund 120 EUR", "body": "Dear Ana, " * 20}


def test_the_default_is_the_first_short_string_arguments() -> None:
    assert default_title_arguments(EMAIL) == ["to", "subject"]
    assert request_title(_note("send_email", EMAIL)) == (
        'send_email to ana@example.com: "Refund 120 EUR"'
    )
    numbers = {"amount": 120, "urgent": True, "lines": [1, 2]}
    assert default_title_arguments(numbers) == ["amount", "urgent"]
    assert title_of_call("pay", numbers) == 'pay amount 120: "true"'
    assert title_of_call("ping", {}) == "ping"
    assert title_of_call("calculator", {"expression": "6*7"}) == "calculator expression 6*7"


def test_the_operators_choice_wins_where_the_call_has_those_arguments() -> None:
    chosen = {"send_email": ("subject", "to")}
    assert request_title(_note("send_email", EMAIL), chosen) == (
        'send_email subject "Refund 120 EUR": "ana@example.com"'
    )
    other = {"to": "bo@example.com", "cc": "x@example.com"}
    only_to = {"send_email": ("body", "to")}
    assert request_title(_note("send_email", other), only_to) == "send_email to bo@example.com"
    absent = {"send_email": ("nothing_like_it",)}
    assert request_title(_note("send_email", other), absent).startswith("send_email to bo@")


def test_long_and_multiline_values_are_cut_and_questions_keep_their_title() -> None:
    long = {"path": "/srv/" + "a" * 70, "content": "line one\n\n   line two"}
    titled = title_of_call("write_file", long)
    assert titled.startswith('write_file path "/srv/aaa') and '…": ' in titled
    assert titled.endswith(': "line one line two"')
    question = _note("ask_operator", {"question": "Which?"}, question="Which?")
    assert request_title(question.model_copy(update={"title": "The agent asks"})) == (
        "The agent asks"
    )


def test_markup_in_arguments_stays_text_for_the_page_to_escape() -> None:
    titled = title_of_call("send_email", {"to": "<img src=x onerror=alert(1)>"})
    assert titled == 'send_email to "<img src=x onerror=alert(1)>"'


@pytest.mark.parametrize(
    "arguments",
    [[], ["a", "b", "c"], ["to", "to"], ["bad name"], ["x" * 65]],
)
def test_a_bad_choice_is_refused(arguments: list[str]) -> None:
    with pytest.raises(ValueError):
        TitleArguments(tool="send_email", arguments=arguments)

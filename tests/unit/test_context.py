"""The model's context built from history: pure."""

from __future__ import annotations

from shared.models.content import Content, Media, TextPart
from shared.models.steps import Step, StepSource, StepTarget, StepType, ToolCall
from worker.context import SUMMARY_PREFIX, build_messages
from worker.providers.base import Role


def user(text: str, index: int = 0) -> Step:
    return Step(step_index=index, type=StepType.USER_INPUT, source=StepSource.USER, content=text)


def model(text: str, calls: list[ToolCall] | None = None) -> Step:
    kind = StepType.TOOL_CALL if calls else StepType.TEXT_RESPONSE
    return Step(
        type=kind,
        source=StepSource.MODEL,
        target=StepTarget.USER,
        content=text,
        tool_calls=calls or [],
    )


def test_roles_follow_the_steps() -> None:
    call = ToolCall(id="c1", name="calculator", args={"expression": "1"})
    result = Step(
        type=StepType.TOOL_RESULT,
        source=StepSource.SYSTEM,
        target=StepTarget.ENVIRONMENT,
        content='{"result": 1}',
        tool_calls=[call],
    )
    messages = build_messages("be brief", [user("hi"), model("", [call]), result, model("done")])
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert messages[2].tool_calls == (call,)
    assert messages[3].tool_call_id == "c1" and messages[3].name == "calculator"


def test_summary_comes_first_and_stands_for_what_it_replaced() -> None:
    compaction = Step(type=StepType.COMPACTION, source=StepSource.SYSTEM, content="we talked")
    messages = build_messages("", [user("current turn"), compaction, model("answer")])
    assert messages[0].role is Role.SYSTEM and messages[0].content == SUMMARY_PREFIX + "we talked"
    assert [m.content for m in messages[1:]] == ["current turn", "answer"]


def test_slash_commands_and_user_facing_errors_are_not_sent() -> None:
    error = Step(
        type=StepType.SYSTEM_MESSAGE,
        source=StepSource.SYSTEM,
        target=StepTarget.USER,
        content="oops",
    )
    repair = Step(
        type=StepType.SYSTEM_MESSAGE,
        source=StepSource.SYSTEM,
        target=StepTarget.ENVIRONMENT,
        content="fix your JSON",
    )
    command = Step(
        type=StepType.USER_INPUT, source=StepSource.USER, content="/help", command="help"
    )
    messages = build_messages("", [command, error, repair])
    assert [(m.role, m.content) for m in messages] == [(Role.USER, "fix your JSON")]


def test_text_that_starts_with_a_slash_is_sent() -> None:
    messages = build_messages("", [user("/etc/hosts is which file?"), user("/help me", 1)])
    assert [m.content for m in messages] == ["/etc/hosts is which file?", "/help me"]


def test_media_rides_on_the_current_turns_prompt() -> None:
    png = Media(data=b"\x89PNG", mime_type="image/png")
    prompt = Content(parts=[TextPart(text="now"), png])
    messages = build_messages("", [user("before", 0), model("ok"), user("now", 2)], prompt=prompt)
    assert messages[0].media == ()
    assert messages[2].media == (png,)

"""One list of conversation options and one of prompt options, read the same by every caller."""

from __future__ import annotations

import pytest

from shared.errors import InvalidInput
from shared.models.config import ConversationOptions, PromptOptions, ToolSelection
from shared.settings import Settings
from shared.validation import conversation_options, prompt_options
from webui.api.models import ConversationOptionsBody, NewConversation
from webui.api.prompt_body import PromptBody

SETTINGS = Settings(max_model_calls=7, turn_timeout_s=33.0, model="default-model")


def test_omitted_options_default_from_settings() -> None:
    config = ConversationOptions().resolve(SETTINGS, policy_may_loosen=False)
    assert config.model == "default-model"
    assert (config.limits.max_model_calls, config.limits.timeout_s) == (7, 33.0)
    assert config.limits.max_tool_calls == SETTINGS.max_tool_calls
    assert not config.policy_may_loosen


def test_keywords_and_the_api_body_resolve_to_the_same_config() -> None:
    chosen = {"model": "m", "tools": {"calculator": "ask"}, "max_tool_calls": 0, "timeout_s": 5}
    from_keywords = conversation_options(**chosen).resolve(SETTINGS, policy_may_loosen=True)
    body = NewConversation.model_validate_json(
        '{"model": "m", "tools": {"calculator": "ask"}, "max_tool_calls": 0, "timeout_s": 5,'
        ' "conversation_id": "alice.c1"}'
    )
    assert body.resolve(SETTINGS, policy_may_loosen=True) == from_keywords
    assert from_keywords.limits.max_tool_calls == 0  # zero is a choice, not "unset"


def test_the_api_reads_every_option_and_only_those() -> None:
    assert set(ConversationOptionsBody.model_fields) == set(ConversationOptions.model_fields)
    assert set(NewConversation.model_fields) - set(ConversationOptions.model_fields) == {
        "conversation_id"
    }
    assert set(PromptBody.model_fields) - set(PromptOptions.model_fields) == {"text", "content"}


@pytest.mark.parametrize(
    ("chosen", "named"),
    [
        ({"max_model_calls": 0}, "max_model_calls"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"tool_selection": "maybe"}, "tool_selection"),
        ({"labels": ["has space"]}, "labels.0"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_a_bad_keyword_is_invalid_input_naming_it(chosen: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidInput, match=f"invalid conversation options: {named}"):
        conversation_options(**chosen)


def test_options_or_keywords_not_both() -> None:
    with pytest.raises(InvalidInput, match="not both: model"):
        conversation_options(ConversationOptions(), model="m")
    with pytest.raises(InvalidInput, match="not both: timeout_s"):
        prompt_options(PromptOptions(), timeout_s=1)


def test_a_bad_response_schema_is_refused_when_resolved() -> None:
    with pytest.raises(InvalidInput, match="response_schema"):
        ConversationOptions(response_schema={"type": 5}).resolve(SETTINGS, policy_may_loosen=True)


def test_prompt_options_are_checked_and_none_means_unchosen() -> None:
    assert prompt_options(tool_selection=None, timeout_s=None).is_empty()
    assert prompt_options(tool_selection="none").tool_selection is ToolSelection.NONE
    with pytest.raises(InvalidInput, match="invalid prompt options: timeout_s"):
        prompt_options(timeout_s=0)

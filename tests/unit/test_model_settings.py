"""Model settings: how the levels merge, and what each provider is refused."""

from __future__ import annotations

import pytest

from shared.errors import InvalidInput
from shared.models.config import ConversationOptions, PromptOptions
from shared.models.model_settings import ModelSettings, check_supported
from shared.settings import Settings


def test_a_narrower_level_wins_field_by_field_and_extra_merges() -> None:
    base = ModelSettings(max_output_tokens=100, temperature=0.5, extra={"a": 1, "b": 2})
    mine = ModelSettings(max_output_tokens=7, extra={"b": 3})
    merged = mine.over(base)
    assert merged == ModelSettings(max_output_tokens=7, temperature=0.5, extra={"a": 1, "b": 3})
    assert ModelSettings().over(base) == base


def test_defaults_from_settings_only_where_the_provider_honours_them() -> None:
    settings = Settings(max_output_tokens=50, temperature=0.2)
    scripted = ConversationOptions().resolve(settings, policy_may_loosen=False)
    assert scripted.model_settings == ModelSettings(max_output_tokens=50)  # no temperature
    openai = ConversationOptions(provider="openai", model="m").resolve(
        settings, policy_may_loosen=False
    )
    assert openai.model_settings == ModelSettings(max_output_tokens=50, temperature=0.2)
    chosen = ConversationOptions(
        provider="openai", model="m", model_settings=ModelSettings(max_output_tokens=9)
    ).resolve(settings, policy_may_loosen=False)
    assert chosen.model_settings.max_output_tokens == 9 and chosen.model_settings.temperature == 0.2
    off = ConversationOptions().resolve(Settings(max_output_tokens=0), policy_may_loosen=False)
    assert off.model_settings == ModelSettings()


def test_a_chosen_setting_the_provider_cannot_honour_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match=r"model_settings\.temperature: provider 'scripted'"):
        ConversationOptions(model_settings=ModelSettings(temperature=0.1)).resolve(
            Settings(), policy_may_loosen=False
        )
    with pytest.raises(InvalidInput, match=r"parallel_tool_calls: provider 'ollama'"):
        check_supported("ollama", ModelSettings(parallel_tool_calls=True))
    with pytest.raises(InvalidInput, match=r"extra: max_tokens for provider 'openai'"):
        check_supported("openai", ModelSettings(extra={"max_tokens": 3}))
    check_supported("openai", ModelSettings(parallel_tool_calls=True, extra={"top_k": 3}))
    check_supported("someday", ModelSettings(temperature=1))  # unknown: its worker says


def test_a_prompts_settings_apply_to_its_turn_only() -> None:
    config = ConversationOptions(provider="ollama", model="q").resolve(
        Settings(max_output_tokens=80), policy_may_loosen=False
    )
    prompt = PromptOptions(model_settings=ModelSettings(seed=4))
    prompt.check_for(config)
    assert prompt.apply(config).model_settings == ModelSettings(max_output_tokens=80, seed=4)
    with pytest.raises(InvalidInput, match="parallel_tool_calls"):
        PromptOptions(model_settings=ModelSettings(parallel_tool_calls=False)).check_for(config)

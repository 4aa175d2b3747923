"""A model's context window: its size (settings, per provider or model, an agent's override),
a prompt's predicted tokens calibrated by what the provider counted, the answer's room, and
compaction's pieces. Pure: no Redis."""

from __future__ import annotations

import pytest

from shared.models.agents import Agent
from shared.models.config import ConversationConfig
from shared.models.model_settings import ModelSettings
from shared.models.steps import Step, StepSource, StepStatus, StepType, UsageMetadata
from shared.settings import Settings
from shared.store.agents import agent_options
from worker.compaction import _pieces
from worker.context import build_messages, estimate_tokens
from worker.context_size import (
    Calibration,
    ContextSize,
    learnt_calibration,
    step_tokens,
    within_room,
)

SETTINGS = Settings.model_construct(
    context_tokens=32_768,
    context_sizes={"openai": 128_000, "openai:small": 4_096},
    compaction_threshold=0.75,
    compaction_token_budget=0,
)


@pytest.mark.parametrize(
    ("config", "tokens"),
    [
        (ConversationConfig(provider="openai", model="small"), 4_096),
        (ConversationConfig(provider="openai", model="big"), 128_000),
        (ConversationConfig(provider="ollama", model="qwen3"), 32_768),
        (ConversationConfig(provider="openai", model="small", context_tokens=2_000), 2_000),
    ],
)
def test_a_models_size_comes_from_its_agent_then_its_model_then_its_provider(
    config: ConversationConfig, tokens: int
) -> None:
    size = ContextSize.of(config, SETTINGS)
    assert size.tokens == tokens and size.compact_at == int(tokens * 0.75)


def test_a_compaction_budget_compacts_earlier_never_later() -> None:
    small = ConversationConfig(provider="openai", model="small")
    assert ContextSize.of(small.model_copy(update={"compaction_token_budget": 500}), SETTINGS) == (
        ContextSize(4_096, 500)
    )
    later = small.model_copy(update={"compaction_token_budget": 10_000})
    assert ContextSize.of(later, SETTINGS).compact_at == 3_072


def test_an_agents_context_tokens_reach_its_conversations() -> None:
    agent = Agent(
        name="triage",
        version=1,
        created_at=0.0,
        created_by="t",
        provider="openai",
        model="small",
        context_tokens=900,
    )
    config = agent_options(agent).resolve(SETTINGS, policy_may_loosen=False)
    assert config.context_tokens == 900
    assert ContextSize.of(config, SETTINGS).tokens == 900


@pytest.mark.parametrize(
    ("calibration", "estimate", "predicted"),
    [
        (Calibration(), 400, 400),  # nothing counted yet: the estimate
        (Calibration(reported=700, estimated=500), 600, 840),  # a tokenizer 1.4x the estimate
        (Calibration(reported=700, estimated=500), 100, 300),  # tool definitions: 200 more
        (Calibration(reported=300, estimated=500), 1_000, 800),  # a sparser tokenizer
    ],
)
def test_a_prompt_is_predicted_from_what_the_provider_counted_last(
    calibration: Calibration, estimate: int, predicted: int
) -> None:
    assert calibration.predict(estimate) == predicted


@pytest.mark.parametrize("calibration", [Calibration(), Calibration(700, 500), Calibration(3, 9)])
def test_estimate_within_is_the_largest_estimate_that_fits(calibration: Calibration) -> None:
    for tokens in (50, 333, 1_000, 4_096):
        most = calibration.estimate_within(tokens)
        assert calibration.predict(most) <= tokens or most == 0
        assert calibration.predict(most + 2) > tokens


def _response(index: int, text: str, usage: UsageMetadata | None) -> Step:
    return Step.model_response(
        turn_id="t", index=index, status=StepStatus.DONE, content=text, usage=usage
    )


def test_the_calibration_is_learnt_from_the_last_counted_call_after_the_last_compaction() -> None:
    counted = UsageMetadata(prompt_token_count=90)
    estimated = UsageMetadata(prompt_token_count=50, estimated_calls=1)
    window = [
        Step.user_input("a question " * 20, turn_id="t", index=0),
        _response(1, "an answer", counted),
        Step.user_input("another", turn_id="t", index=2),
        _response(3, "ours, not counted", estimated),
        Step.user_input("a third", turn_id="t", index=4),
    ]
    sent = estimate_tokens(build_messages("be brief", window[:1]))
    assert learnt_calibration("be brief", window) == Calibration(90, sent)
    summary = Step.compaction("so far", turn_id="t", index=5)
    assert learnt_calibration("be brief", [*window, summary]) == Calibration()


def test_the_answers_cap_is_cut_to_the_room_left() -> None:
    capped = ModelSettings(max_output_tokens=4_096)
    assert within_room("openai", capped, 1_000).max_output_tokens == 1_000
    assert within_room("openai", capped, 5_000) == capped
    assert within_room("openai", ModelSettings(), 1_000) == ModelSettings()  # the model's own


def test_compactions_pieces_fit_and_a_step_too_long_alone_is_cut() -> None:
    steps = [Step.user_input(f"message {n} " + "x" * 400, turn_id="t", index=n) for n in range(9)]
    steps.append(Step.user_input("y" * 5_000, turn_id="t", index=9))
    pieces = list(_pieces(steps, 300))
    assert sum(len(piece) for piece in pieces) == len(steps)
    assert all(sum(step_tokens(s) for s in piece) <= 300 for piece in pieces)
    [cut] = pieces[-1]
    assert cut.content.endswith("characters cut]") and cut.source is StepSource.USER
    assert [s.type for piece in pieces for s in piece] == [StepType.USER_INPUT] * 10

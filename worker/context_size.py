"""How much of a model's context window a prompt takes, and where compaction starts: pure.

A prompt's size is predicted from its character estimate, calibrated by the last call the
provider counted (`Calibration`: its reported prompt tokens against that call's estimate),
which takes in what the estimate misses: the tool definitions and chat template (a constant
more) and the tokenizer (a factor more or less). Of the two readings the larger is taken.
Without a counted call the estimate stands alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shared.models.config import ConversationConfig
from shared.models.model_settings import SUPPORTED, ModelSettings
from shared.models.steps import Step, StepSource, StepType
from shared.settings import Settings
from worker.context import MESSAGE_TOKENS, build_messages, estimate_tokens

__all__ = [
    "MIN_OUTPUT_TOKENS",
    "Calibration",
    "ContextSize",
    "cut_to",
    "learnt_calibration",
    "step_tokens",
    "within_room",
]

MIN_OUTPUT_TOKENS = 256  # an answer needs at least this much room (or its max, if smaller)
UNCOUNTED_TEMPLATE_TOKENS = 64  # a chat template's share of a prompt, before any was counted


@dataclass(frozen=True)
class Calibration:
    """The last call the provider counted: the prompt tokens it reported, and our estimate."""

    reported: int = 0
    estimated: int = 0

    @property
    def known(self) -> bool:
        return self.reported > 0 and self.estimated > 0

    def predict(self, estimate: int) -> int:
        """A prompt's tokens as the provider would count them, from its estimate."""
        if not self.known:
            return max(estimate, 1)
        more = estimate + self.reported - self.estimated
        return max(more, math.ceil(estimate * self.reported / self.estimated), 1)

    def bound(self, estimate: int) -> int:
        """A prompt's tokens at most, for the answer's cap: the prediction with a margin for
        the estimate's error (before any call was counted, twice the estimate and a chat
        template's worth; a tenth more after), since a server refuses a prompt and cap that
        together pass its window."""
        if not self.known:
            return 2 * max(estimate, 1) + UNCOUNTED_TEMPLATE_TOKENS
        predicted = self.predict(estimate)
        return predicted + predicted // 10

    def estimate_within(self, tokens: int) -> int:
        """The largest estimate whose prediction stays within `tokens`."""
        if not self.known:
            return max(tokens, 0)
        more = tokens - (self.reported - self.estimated)
        return max(min(more, math.floor(tokens * self.estimated / self.reported)), 0)


@dataclass(frozen=True)
class ContextSize:
    """A conversation's model's window, and the prompt size at which it compacts."""

    tokens: int
    compact_at: int

    @classmethod
    def of(cls, config: ConversationConfig, settings: Settings) -> ContextSize:
        """The conversation's own size (its agent's), else SIGNOFF_CONTEXT_SIZES' for its
        provider:model or provider, else SIGNOFF_CONTEXT_TOKENS; compaction starts at the
        threshold of it, or earlier at a compaction budget."""
        sizes = settings.context_sizes
        tokens = (
            config.context_tokens
            or sizes.get(f"{config.provider}:{config.model}")
            or sizes.get(config.provider)
            or settings.context_tokens
        )
        compact_at = int(tokens * settings.compaction_threshold)
        budget = config.compaction_token_budget
        if budget is None:
            budget = settings.compaction_token_budget
        return cls(tokens, min(compact_at, budget) if budget else compact_at)

    def room(self, prompt_tokens: int) -> int:
        """What the window leaves for the answer."""
        return self.tokens - prompt_tokens

    def answer_cap(self, estimate: int, calibration: Calibration) -> int:
        """The answer's cap: what the window leaves past the prompt's bound, and never less
        than the least answer (or what the prediction leaves, if that is less)."""
        room = self.room(calibration.predict(estimate))
        return max(self.tokens - calibration.bound(estimate), min(MIN_OUTPUT_TOKENS, room), 1)


def learnt_calibration(
    system_prompt: str, window: Sequence[Step], *, extra: int = 0
) -> Calibration:
    """The window's last model call after its last compaction that the provider counted (the
    window before that step is what the call was sent, with `extra` estimated tokens of tool
    definitions); uncalibrated if none."""
    start = max((i for i, s in enumerate(window) if s.type is StepType.COMPACTION), default=-1)
    for position in range(len(window) - 1, start, -1):
        step = window[position]
        usage = step.usage_metadata
        if step.source is not StepSource.MODEL or usage is None or usage.estimated_calls:
            continue
        if usage.prompt_token_count > 0:
            sent = build_messages(system_prompt, window[:position])
            return Calibration(usage.prompt_token_count, estimate_tokens(sent) + extra)
    return Calibration()


def step_tokens(step: Step) -> int:
    """One step's share of a prompt, estimated."""
    return estimate_tokens(build_messages("", [step]))


def cut_to(step: Step, tokens: int) -> Step:
    """The step with its text cut to fit about `tokens`, saying how much was left out."""
    if step_tokens(step) <= tokens:
        return step
    keep = max(tokens - MESSAGE_TOKENS - _CUT_NOTE_TOKENS, 1) * 4
    left_out = len(step.content) - keep
    return step.model_copy(
        update={"content": f"{step.content[:keep]} [... {left_out} characters cut]"}
    )


_CUT_NOTE_TOKENS = 12  # the note saying what was cut, and the estimate's rounding


def within_room(provider: str, settings: ModelSettings, room: int) -> ModelSettings:
    """The call's settings with its answer's cap cut to what the window leaves, where the
    provider takes one (asking for more is an error on some servers, a cut answer on others)."""
    if "max_output_tokens" not in SUPPORTED.get(provider, frozenset({"max_output_tokens"})):
        return settings
    cap = settings.max_output_tokens
    if cap is None or cap <= room:
        return settings  # no cap asked: the model's own default answers
    return settings.model_copy(update={"max_output_tokens": max(room, 1)})

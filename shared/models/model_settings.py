"""Model settings: what one model call may produce (length, sampling, stops), and who honours what.

An agent, a conversation (or a batch, whose conversations share one configuration) and a
single prompt each carry `ModelSettings`; a narrower one wins field by field (`over`).
Each provider honours a known set of them (`SUPPORTED`): a chosen setting outside that
set is refused where it enters (`check_supported`), before anything is queued, never
dropped on the way to the model.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from shared.errors import InvalidInput

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "SUPPORTED",
    "ModelSettings",
    "ReasoningEffort",
    "check_supported",
    "unsupported",
]

MAX_OUTPUT_TOKENS = 10_000_000
MAX_STOPS = 4
MAX_EXTRA = 32


def _integral(value: Any) -> Any:
    """5.0 for 5: JSON Schema counts it an integer, and strict mode alone would refuse it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Integers of options: 5 or 5.0, never true (or "5" in strict JSON). An optional one keeps its
# bounds inside, before the validator: outside, a schema would show them as pydantic names them.
INTEGRAL = BeforeValidator(_integral)
_OutputTokens = Annotated[int, Field(gt=0, le=MAX_OUTPUT_TOKENS, strict=True), INTEGRAL]
_Seed = Annotated[int, Field(ge=0, le=2**63 - 1, strict=True), INTEGRAL]


class ReasoningEffort(str, Enum):
    """How hard a reasoning model thinks before it answers."""

    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


_Stop = Annotated[str, Field(min_length=1, max_length=200)]


class ModelSettings(BaseModel):
    """Settings of each model call; None (or an empty `extra`) leaves the provider's default."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_output_tokens: _OutputTokens | None = Field(
        None, description="At most this many tokens per answer."
    )
    # strict: `false` is not 0 (nor `true` 1), as everywhere in the API
    temperature: float | None = Field(
        None, ge=0, le=2, strict=True, description="Sampling temperature."
    )
    top_p: float | None = Field(None, gt=0, le=1, strict=True, description="Nucleus sampling mass.")
    stop: list[_Stop] | None = Field(
        None, max_length=MAX_STOPS, description="The answer ends before any of these strings."
    )
    seed: _Seed | None = Field(None, description="Sampling seed, for repeatable answers.")
    reasoning_effort: ReasoningEffort | None = Field(
        None, description="How hard a reasoning model thinks (Ollama: its `think` level)."
    )
    parallel_tool_calls: bool | None = Field(
        None, strict=True, description="Whether the model may call several tools in one answer."
    )
    extra: dict[Annotated[str, Field(min_length=1, max_length=64)], Any] = Field(
        default_factory=dict,
        max_length=MAX_EXTRA,
        description="Passed to the provider as is: request-body fields (OpenAI-compatible) or "
        "`options` (Ollama). A key a named setting covers is refused.",
    )

    def chosen(self) -> list[str]:
        """The names of the settings this holds (an empty `extra` is not one)."""
        return [name for name in type(self).model_fields if getattr(self, name) not in (None, {})]

    def over(self, base: ModelSettings) -> ModelSettings:
        """These settings where chosen, `base`'s elsewhere; `extra` merges key by key."""
        update: dict[str, Any] = {n: getattr(self, n) for n in self.chosen() if n != "extra"}
        if self.extra:
            update["extra"] = {**base.extra, **self.extra}
        return base.model_copy(update=update) if update else base

    def only(self, names: frozenset[str]) -> ModelSettings:
        """The settings among `names`; the rest left at the provider's default."""
        return ModelSettings.model_validate(self.model_dump(include=set(names)))


# What each provider honours; `worker.providers` maps them to the wire.
_ALL = frozenset(ModelSettings.model_fields)
SUPPORTED: dict[str, frozenset[str]] = {
    "openai": _ALL,
    "ollama": _ALL - {"parallel_tool_calls"},
    "scripted": frozenset({"max_output_tokens", "stop", "seed"}),
}
# The keys of `extra` that a named setting covers, by provider (its wire names and ours).
_COVERED = {
    "openai": {"max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed"}
    | {"reasoning_effort", "parallel_tool_calls"},
    "ollama": {"num_predict", "temperature", "top_p", "stop", "seed", "think"},
}


def unsupported(provider: str, settings: ModelSettings) -> list[str]:
    """The chosen settings `provider` cannot honour (none for a provider Signoff does not know)."""
    supported = SUPPORTED.get(provider)
    if supported is None:
        return []
    return [name for name in settings.chosen() if name not in supported]


def check_supported(
    provider: str, settings: ModelSettings, *, field: str = "model_settings"
) -> None:
    """Refuses, naming each setting and the provider, what `provider` would have to drop."""
    refused = unsupported(provider, settings)
    if refused:
        names = ", ".join(f"{field}.{name}" for name in refused)
        honoured = ", ".join(sorted(SUPPORTED[provider])) or "none"
        raise InvalidInput(
            f"{names}: provider {provider!r} cannot honour it (it honours: {honoured})"
        )
    covered = sorted(set(settings.extra) & _COVERED.get(provider, set()))
    if covered:
        raise InvalidInput(
            f"{field}.extra: {', '.join(covered)} for provider {provider!r} is a named setting; "
            "set it by its name"
        )

"""Prices of a provider's model, per million tokens, and what one call's usage costs at them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared.models.steps import UsageMetadata

__all__ = ["MAX_PRICE", "Price", "PriceSpec", "format_cost"]

MAX_PRICE = 1_000_000.0  # per million tokens: anything above is a typo


class PriceSpec(BaseModel):
    """What an operator sets: input, cached input and output, per million tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    input_per_mtok: float = Field(ge=0, le=MAX_PRICE, description="Per million prompt tokens.")
    cached_input_per_mtok: float | None = Field(
        None,
        ge=0,
        le=MAX_PRICE,
        description="Per million cached prompt tokens; null: the input price.",
    )
    output_per_mtok: float = Field(ge=0, le=MAX_PRICE, description="Per million output tokens.")


class Price(PriceSpec):
    """A stored price: its model, and who set it when."""

    provider: str = Field(min_length=1, max_length=100)
    model: str = Field(min_length=1, max_length=200)
    set_at: float = 0.0
    set_by: str = ""

    def cost_micros(self, usage: UsageMetadata) -> int:
        """The call's cost in millionths: tokens times the price per million tokens."""
        cached = min(usage.cached_content_token_count, usage.prompt_token_count)
        cached_price = (
            self.input_per_mtok
            if self.cached_input_per_mtok is None
            else self.cached_input_per_mtok
        )
        cost = (
            (usage.prompt_token_count - cached) * self.input_per_mtok
            + cached * cached_price
            + usage.candidates_token_count * self.output_per_mtok
        )
        return round(cost)


def format_cost(usage: UsageMetadata) -> str:
    """A cost as people read it; "no price" when no call was priced, never a made-up figure."""
    if usage.unpriced_calls and not usage.cost_micros:
        return "no price"
    text = f"{usage.cost_micros / 1_000_000:.6f}".rstrip("0").rstrip(".")
    if usage.unpriced_calls:
        text += f" (+{usage.unpriced_calls} calls without a price)"
    return text

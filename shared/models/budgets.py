"""Budgets: how many tokens, or how much money, a conversation, a batch, an agent per day or a
submitting owner per day may spend on model calls."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MAX_BUDGET_TOKENS", "Budget", "BudgetKind", "BudgetSpec", "BudgetUnit"]

MAX_BUDGET_TOKENS = 10**15


class BudgetKind(str, Enum):
    """What a budget bounds; `agent` and `owner` budgets hold per UTC day."""

    CONVERSATION = "conversation"
    BATCH = "batch"
    AGENT = "agent"
    OWNER = "owner"

    @property
    def daily(self) -> bool:
        return self in (BudgetKind.AGENT, BudgetKind.OWNER)


class BudgetUnit(str, Enum):
    """The counter a limit is on: tokens (prompt and output), or cost in millionths."""

    TOKENS = "tokens"
    MICROS = "micros"


class BudgetSpec(BaseModel):
    """A limit in tokens, in money (the prices' currency), or both; each call must fit both."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS, description="Total tokens.")
    cost: float | None = Field(
        None, ge=0, le=10**9, description="Money, in the currency of the prices."
    )

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetSpec:
        if self.tokens is None and self.cost is None:
            raise ValueError("give tokens, cost or both")
        return self

    def limits(self) -> dict[BudgetUnit, int]:
        found = {}
        if self.tokens is not None:
            found[BudgetUnit.TOKENS] = self.tokens
        if self.cost is not None:
            found[BudgetUnit.MICROS] = round(self.cost * 1_000_000)
        return found


class Budget(BaseModel):
    """A budget as read: its limits, and what is spent and reserved (today, for daily kinds)."""

    kind: BudgetKind
    name: str
    tokens: int | None = None
    cost: float | None = None
    spent_tokens: int = 0
    spent_cost: float = 0.0
    reserved_tokens: int = Field(0, description="Worst cases of the calls in flight.")
    reserved_cost: float = 0.0
    day: str | None = Field(None, description="The UTC day counted, for agent and owner budgets.")

    @property
    def exhausted(self) -> bool:
        tokens = self.tokens is not None and self.spent_tokens + self.reserved_tokens >= self.tokens
        cost = self.cost is not None and self.spent_cost + self.reserved_cost >= self.cost
        return tokens or cost

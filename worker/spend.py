"""What a model call cost: its usage (estimated when the server reported none) at its price."""

from __future__ import annotations

import json

from shared.models.prices import Price
from shared.models.steps import UsageMetadata
from worker.context import estimate_tokens
from worker.providers.base import ModelRequest
from worker.streaming import ModelOutput

__all__ = ["call_usage", "estimated_usage", "usage_scopes"]


def usage_scopes(agent: str | None, owner: str, batch: str | None = None) -> tuple[str, ...]:
    """Where a day's usage is counted beside the model: the agent, the batch and the
    submitting owner (shared/usage_report.py reads them back)."""
    scopes = [f"@agent:{agent}"] if agent else []
    scopes += [f"@batch:{batch}"] if batch else []
    return (*scopes, f"@owner:{owner or '-'}")


def estimated_usage(request: ModelRequest, output: ModelOutput) -> UsageMetadata:
    """About four characters a token, prompt and answer, marked as estimated."""
    calls = json.dumps([[c.name, c.args] for c in output.tool_calls]) if output.tool_calls else ""
    answer = output.content + output.thinking + calls
    candidates = len(answer) // 4 + (1 if answer else 0)
    usage = UsageMetadata.from_counts(estimate_tokens(request.messages), candidates)
    return usage.model_copy(update={"estimated_calls": 1})


def call_usage(price: Price | None, request: ModelRequest, output: ModelOutput) -> UsageMetadata:
    """The call's usage with its cost, or counted as unpriced when its model has no price."""
    usage = output.usage if output.usage is not None else estimated_usage(request, output)
    if price is None:
        return usage.model_copy(update={"unpriced_calls": 1, "cost_micros": 0})
    return usage.model_copy(update={"cost_micros": price.cost_micros(usage), "unpriced_calls": 0})

"""The tool policy as the API and the policy page show it: the rules, and every tool's policy."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.models.config import ToolPolicy
from shared.store.policy import ALWAYS_ASK, OperatorPolicy, PolicyRule, ToolInfo

__all__ = ["PolicyView", "ToolRow", "policy_view"]


class ToolRow(BaseModel):
    name: str
    description: str
    default_policy: ToolPolicy = Field(description="The tool's built-in default.")
    policy: ToolPolicy = Field(description="What applies where no batch or label rule does.")
    always_asks: bool = Field(False, description="A question for a person: no rule changes it.")


class PolicyView(BaseModel):
    rules: list[PolicyRule]
    tools: list[ToolRow] = Field(description="The tools workers described, with the policy.")


def policy_view(rules: OperatorPolicy, catalog: dict[str, ToolInfo]) -> PolicyView:
    rows = [
        ToolRow(
            name=info.name,
            description=info.description,
            default_policy=info.default_policy,
            policy=ToolPolicy.ASK
            if info.name in ALWAYS_ASK
            else rules.base(info.name, default=info.default_policy),
            always_asks=info.name in ALWAYS_ASK,
        )
        for info in catalog.values()
    ]
    return PolicyView(rules=list(rules.rules), tools=rows)

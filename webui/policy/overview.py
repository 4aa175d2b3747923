"""The tool policy as the API and the policy page show it: the rules, and every tool's policy."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from shared.models.config import ToolPolicy
from shared.models.mcp import McpToolAnnotations
from shared.store.policy import ALWAYS_ASK, OperatorPolicy, PolicyRule, ToolInfo

__all__ = ["PolicyView", "ToolRow", "policy_view"]


class ToolRow(BaseModel):
    name: str
    description: str
    default_policy: ToolPolicy = Field(description="The tool's built-in default.")
    policy: ToolPolicy = Field(description="What applies where no batch or label rule does.")
    always_asks: bool = Field(False, description="A question for a person: no rule changes it.")
    server: str | None = Field(None, description="The MCP server offering it, if any.")
    annotations: McpToolAnnotations | None = Field(None, description="Its MCP server's hints.")
    title_arguments: list[str] | None = Field(
        None,
        description="The arguments that title its requests; null: the first short string ones.",
    )


class PolicyView(BaseModel):
    rules: list[PolicyRule]
    tools: list[ToolRow] = Field(description="The tools workers described, with the policy.")


def policy_view(
    rules: OperatorPolicy,
    catalog: dict[str, ToolInfo],
    titles: Mapping[str, tuple[str, ...]] | None = None,
) -> PolicyView:
    titles = titles or {}
    rows = [
        ToolRow(
            name=info.name,
            description=info.description,
            default_policy=info.default_policy,
            policy=ToolPolicy.ASK
            if info.name in ALWAYS_ASK
            else rules.base(info.name, default=info.default_policy),
            always_asks=info.name in ALWAYS_ASK,
            server=info.server,
            annotations=info.annotations,
            title_arguments=list(titles[info.name]) if info.name in titles else None,
        )
        for info in catalog.values()
    ]
    return PolicyView(rules=list(rules.rules), tools=rows)

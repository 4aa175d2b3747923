"""Named agents: a versioned configuration operators write once and conversations name.

An agent fixes what a conversation runs with (system prompt, provider and model, tool
policy, response schema, limits, approval timeout, metadata). Its `tools` map sits inside
the operator's tool policy: a conversation that runs as an agent never loosens it.
"""

from __future__ import annotations

from pydantic import Field

from shared.models.config import AGENT_NAME_PATTERN, AgentOptions

__all__ = ["AGENT_NAME_PATTERN", "Agent", "AgentSpec", "NewAgent"]


class AgentSpec(AgentOptions):
    """What an operator writes of an agent; each change of it is a new version."""

    description: str = Field("", max_length=2000, description="What the agent is for.")


class NewAgent(AgentSpec):
    """An agent's first version, with its name."""

    name: str = Field(pattern=AGENT_NAME_PATTERN, description="Letters, digits, _ . - (1-64).")


class Agent(NewAgent):
    """One stored version of an agent."""

    version: int = Field(gt=0, description="1 at creation, one more at each update.")
    created_at: float = Field(description="When this version was written (Unix time).")
    created_by: str = Field(description="Who wrote this version.")

    def spec(self) -> AgentSpec:
        """This version's configuration, as an update would write it."""
        return AgentSpec.model_validate(self.model_dump(include=set(AgentSpec.model_fields)))

"""Deleting an agent that schedules or triggers still name: refused, unless forced.

A schedule or trigger whose agent is gone fails at each fire ("no agent named ..."), so
an operator deletes one in use only on purpose. The check and the deletion are two steps:
a schedule created between them is not seen, and fails at its fires as a forced one would.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import Conflict
from shared.models.agents import Agent
from shared.store.bundle import Stores
from shared.store.triggers import TriggerStore

__all__ = ["AgentUsers", "agent_users", "delete_agent"]


@dataclass(frozen=True)
class AgentUsers:
    """The schedules and triggers that name one agent, by name."""

    schedules: list[str]
    triggers: list[str]

    def __bool__(self) -> bool:
        return bool(self.schedules or self.triggers)

    def describe(self) -> str:
        parts = []
        if self.schedules:
            parts.append("schedules " + ", ".join(self.schedules))
        if self.triggers:
            parts.append("triggers " + ", ".join(self.triggers))
        return " and ".join(parts)


def agent_users(stores: Stores, name: str) -> AgentUsers:
    triggers = TriggerStore(stores.redis, stores.keys).all()
    return AgentUsers(
        schedules=stores.schedules.using_agent(name),
        triggers=[trigger.name for trigger in triggers if trigger.agent == name],
    )


def delete_agent(stores: Stores, name: str, *, force: bool = False) -> Agent:
    """Deletes the agent and answers its latest version; Conflict, naming them, when
    schedules or triggers use it and `force` is not given."""
    latest = stores.agents.get(name)
    users = agent_users(stores, name)
    if users and not force:
        raise Conflict(
            f"agent {name!r} is used by {users.describe()}: delete or change them first, "
            "or force the deletion (they would fail at each fire)"
        )
    stores.agents.delete(name)
    return latest

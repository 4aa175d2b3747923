"""/agents: named, versioned agents; operators write them, every role reads them."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict

from shared.models.agents import Agent, AgentSpec, NewAgent
from shared.models.users import Role
from shared.store.agent_removal import delete_agent as remove_agent
from webui.api.replies import created, reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.queries import DeleteAgentQuery, Switch
from webui.services import services

__all__ = ["AgentList", "AgentSpecBody", "NewAgentBody", "blueprint"]

log = logging.getLogger(__name__)

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class NewAgentBody(NewAgent):
    """An agent's first version. Its `tools` may only be as strict as the operator's tool
    policy or stricter (422 naming each looser entry)."""

    model_config = _STRICT


class AgentSpecBody(AgentSpec):
    """An agent's next version: the whole configuration, replacing the latest."""

    model_config = _STRICT


class AgentList(BaseModel):
    items: list[Agent]


@requires(Role.VIEWER)
@operation("Every agent's latest version, by name", response=AgentList)
def list_agents() -> Response:
    return reply(AgentList(items=services().stores.agents.list()))


@requires(Role.OPERATOR)
@operation(
    "Create an agent (version 1)",
    request=NewAgentBody,
    response=Agent,
    status=201,
    errors=(400, 409, 422),
)
def create_agent() -> Response:
    body = json_body(NewAgentBody)
    actor = current_principal().name
    agent = services().stores.agents.create(body, actor=actor)
    log.info("%s created agent %s", actor, agent.name)
    return created(agent, ".get_agent", name=agent.name)


@requires(Role.VIEWER)
@operation("An agent's latest version", response=Agent, errors=(404,))
def get_agent(name: str) -> Response:
    return reply(services().stores.agents.get(name))


@requires(Role.VIEWER)
@operation("Every version of an agent, oldest first", response=AgentList, errors=(404,))
def agent_versions(name: str) -> Response:
    return reply(AgentList(items=services().stores.agents.versions(name)))


@requires(Role.OPERATOR)
@operation(
    "Write an agent's next version (the whole configuration)",
    request=AgentSpecBody,
    response=Agent,
    errors=(400, 404, 422),
)
def update_agent(name: str) -> Response:
    body = json_body(AgentSpecBody)
    actor = current_principal().name
    updated = services().stores.agents.update(name, body, actor=actor)
    log.info("%s updated agent %s to version %d", actor, name, updated.version)
    return reply(updated)


@requires(Role.OPERATOR)
@operation(
    "Delete an agent and its versions (conversations keep their configuration); "
    "answers its latest version",
    response=Agent,
    query=DeleteAgentQuery,
    errors=(400, 404, 409),
    description="An agent that schedules or triggers name is a 409 naming them, unless "
    "`force=true` (they then fail at each fire until changed).",
)
def delete_agent(name: str) -> Response:
    force = DeleteAgentQuery.read().force is Switch.TRUE
    latest = remove_agent(services().stores, name, force=force)
    how = "deleted (forced)" if force else "deleted"
    log.info("%s %s agent %s", current_principal().name, how, name)
    return reply(latest)


def blueprint() -> Blueprint:
    bp = Blueprint("agents", __name__)
    bp.add_url_rule("/agents", view_func=list_agents, methods=["GET"])
    bp.add_url_rule("/agents", view_func=create_agent, methods=["POST"])
    bp.add_url_rule("/agents/<id:name>", view_func=get_agent, methods=["GET"])
    bp.add_url_rule("/agents/<id:name>", view_func=update_agent, methods=["PUT"])
    bp.add_url_rule("/agents/<id:name>", view_func=delete_agent, methods=["DELETE"])
    bp.add_url_rule("/agents/<id:name>/versions", view_func=agent_versions, methods=["GET"])
    return bp

"""/mcp/servers: the MCP tool servers operators register; every role may read them.

Environment and header values are write-only: a request sets them, no answer shows them.
Adding or refreshing a server asks a worker to list its tools (202 for a refresh: the
listing arrives in the record's `state`, `tools` and `tools_version`).
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, Field

from shared.mcp.store import McpServerStore, outbound_policy
from shared.models.config import ToolPolicy
from shared.models.mcp import McpServer, McpServerRequest
from shared.models.users import Role
from shared.store.policy import OperatorPolicy
from webui.api.replies import created, reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["McpServerView", "blueprint", "mcp_servers", "server_view"]

log = logging.getLogger(__name__)


class McpServerView(McpServer):
    """A server as shown, with each offered tool's policy under the operator's global rules."""

    policies: dict[str, ToolPolicy] = Field(
        default_factory=dict,
        description="By `server__tool`: the operator's global rule, else the tool's default "
        "(auto only for a read-only tool of a trusted server).",
    )


class McpServerList(BaseModel):
    items: list[McpServerView] = Field(description="By name.")


def server_view(server: McpServer, rules: OperatorPolicy) -> McpServerView:
    policies = {
        tool.exposed: rules.base(tool.exposed, default=server.default_policy(tool))
        for tool in server.offered()
    }
    return McpServerView(**server.model_dump(), policies=policies)


def mcp_servers() -> McpServerStore:
    """The app's MCP server store, registering only URLs the outbound policy allows."""
    found = services()
    outbound = outbound_policy(found.settings.mcp_allowed_hosts)
    return McpServerStore(found.redis, found.keys, outbound=outbound)


@requires(Role.VIEWER)
@operation("MCP servers: state, last error, tools and their policies", response=McpServerList)
def list_servers() -> Response:
    rules = services().policies.load()
    return reply(McpServerList(items=[server_view(s, rules) for s in mcp_servers().all()]))


@requires(Role.OPERATOR)
@operation(
    "Register an MCP server (a command for stdio, or a URL); a worker lists its tools",
    request=McpServerRequest,
    response=McpServerView,
    status=201,
    errors=(400, 403, 409, 422),
    description="`env` and `headers` values are write-only: no answer shows them. A worker "
    "starts the command or reaches the URL; a URL on a loopback, private or link-local "
    "address is refused (422 naming `url`) unless SIGNOFF_MCP_ALLOWED_HOSTS allows it, and "
    "checked again at every connection.",
)
def add_server() -> Response:
    body = json_body(McpServerRequest)
    actor = current_principal().name
    server = mcp_servers().add(body, actor=actor)
    services().client.tasks.refresh_mcp(server.name)
    log.info("%s registered MCP server %s (%s)", actor, server.name, server.transport.value)
    view = server_view(server, services().policies.load())
    return created(view, ".get_server", name=server.name)


@requires(Role.VIEWER)
@operation("One MCP server", response=McpServerView, errors=(404,))
def get_server(name: str) -> Response:
    return reply(server_view(mcp_servers().get(name), services().policies.load()))


@requires(Role.OPERATOR)
@operation(
    "Remove an MCP server: its tools are no longer offered", response=McpServer, errors=(404,)
)
def remove_server(name: str) -> Response:
    removed = mcp_servers().remove(name)
    log.info("%s removed MCP server %s", current_principal().name, name)
    return reply(removed)


@requires(Role.OPERATOR)
@operation(
    "List an MCP server's tools again (through a new session)",
    response=McpServerView,
    status=202,
    errors=(404,),
)
def refresh_server(name: str) -> Response:
    server = mcp_servers().get(name)
    services().client.tasks.refresh_mcp(name)
    log.info("%s asked for MCP server %s's tools", current_principal().name, name)
    return reply(server_view(server, services().policies.load()), 202)


def blueprint() -> Blueprint:
    bp = Blueprint("mcp_servers", __name__)
    bp.add_url_rule("/mcp/servers", view_func=list_servers, methods=["GET"])
    bp.add_url_rule("/mcp/servers", view_func=add_server, methods=["POST"])
    bp.add_url_rule("/mcp/servers/<mcp:name>", view_func=get_server, methods=["GET"])
    bp.add_url_rule("/mcp/servers/<mcp:name>", view_func=remove_server, methods=["DELETE"])
    bp.add_url_rule("/mcp/servers/<mcp:name>/refresh", view_func=refresh_server, methods=["POST"])
    return bp

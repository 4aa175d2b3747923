"""The MCP servers page: each server's state, last error, tools, hints and effective policy;
operators add (env and header values write-only), refresh and remove servers here too."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import InvalidInput, SignoffError
from shared.models.mcp import McpServerRequest
from shared.models.users import Role
from shared.validation import describe_problems, key_value_pairs
from webui.api.mcp import mcp_servers, server_view
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.services import services

__all__ = ["blueprint"]


def _pairs(field: str) -> dict[str, str]:
    """A textarea of KEY=VALUE lines (blank lines skipped)."""
    lines = [line.strip() for line in request.form.get(field, "").splitlines() if line.strip()]
    return key_value_pairs(field, lines)


def _request() -> McpServerRequest:
    """The form's server; InvalidInput naming the field otherwise."""
    transport = request.form.get("transport", "command")
    target = request.form.get("target", "").strip()
    pairs = _pairs("pairs")
    fields: dict[str, Any] = {
        "name": request.form.get("name", "").strip(),
        "trusted": request.form.get("trusted") == "on",
    }
    if transport == "url":
        fields |= {"url": target, "headers": pairs}
    else:
        fields |= {"command": target, "env": pairs}
    try:
        return McpServerRequest.model_validate(fields)
    except ValidationError as exc:
        raise InvalidInput(describe_problems(exc, "server")) from None


@requires(Role.OPERATOR)
def add() -> ResponseReturnValue:
    try:
        server = mcp_servers().add(_request(), actor=current_principal().name)
        services().client.tasks.refresh_mcp(server.name)
        flash(f"Added {server.name}; a worker lists its tools.", "info")
    except SignoffError as exc:
        flash(f"Not added: {exc.message}", "error")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def remove(name: str) -> ResponseReturnValue:
    with flash_refusal():
        mcp_servers().remove(name)
        flash(f"Removed {name}.", "info")
    return redirect(url_for(".index"))


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    rules = services().policies.load()
    return render_template("mcp.html", servers=[server_view(s, rules) for s in mcp_servers().all()])


@requires(Role.OPERATOR)
def refresh(name: str) -> ResponseReturnValue:
    with flash_refusal():
        mcp_servers().get(name)
        services().client.tasks.refresh_mcp(name)
        flash(f"Asked a worker to list {name}'s tools again.", "info")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("mcp", __name__)
    bp.add_url_rule("/mcp-servers", view_func=index)
    bp.add_url_rule("/mcp-servers", endpoint="add", view_func=add, methods=["POST"])
    bp.add_url_rule("/mcp-servers/<mcp:name>/refresh", view_func=refresh, methods=["POST"])
    bp.add_url_rule("/mcp-servers/<mcp:name>/remove", view_func=remove, methods=["POST"])
    return bp

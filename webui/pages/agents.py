"""The agents page: named agents and their schedules; operators create, edit, pause and delete."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.agents import AgentSpec, NewAgent
from shared.models.model_settings import ReasoningEffort
from shared.models.schedules import Missed, NewSchedule, Overlap, RunMode
from shared.models.users import Role
from shared.store.agent_removal import delete_agent as remove_agent
from shared.validation import describe_problems
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.pages.model_settings_form import model_fields
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    stores = services().stores
    return render_template(
        "agents.html",
        agents=stores.agents.list(),
        schedules=stores.schedules.list(),
        modes=list(RunMode),
        overlaps=list(Overlap),
        misses=list(Missed),
        efforts=list(ReasoningEffort),
    )


def _form(*names: str) -> dict[str, Any]:
    """The named form fields that were filled in (stripped)."""
    found = {name: request.form.get(name, "").strip() for name in names}
    return {name: value for name, value in found.items() if value}


def _problem(exc: Exception) -> str:
    return describe_problems(exc, "form") if isinstance(exc, ValidationError) else str(exc)


# What the page's agent forms edit, with the context size and the model settings; the rest of
# an agent (labels, response schema, limits, metadata) is kept as it was, and is changed
# through the CLI or the API.
_EDITED = ("description", "system_prompt", "provider", "model", "tools", "approval_timeout_s")


def _agent_fields() -> dict[str, Any]:
    """The agent form's fields; an empty one is unset (the settings' default)."""
    fields: dict[str, Any] = {name: None for name in _EDITED}
    fields |= {"description": "", "system_prompt": ""}
    fields |= _form(*_EDITED)
    if fields["tools"] is not None:
        fields["tools"] = json.loads(fields["tools"])
    if fields["approval_timeout_s"] is not None:
        fields["approval_timeout_s"] = int(fields["approval_timeout_s"])
    return fields | model_fields(request.form)


@requires(Role.OPERATOR)
def create_agent() -> ResponseReturnValue:
    try:
        new = NewAgent.model_validate({**_agent_fields(), "name": request.form.get("name", "")})
        created = services().stores.agents.create(new, actor=current_principal().name)
    except (ValidationError, ValueError, SignoffError) as exc:
        flash(f"Agent not created: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    flash(f"Agent {created.name} created (version {created.version}).", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def update_agent(name: str) -> ResponseReturnValue:
    agents = services().stores.agents
    try:
        spec = agents.get(name).spec().model_dump() | _agent_fields()
        updated = agents.update(
            name, AgentSpec.model_validate(spec), actor=current_principal().name
        )
    except (ValidationError, ValueError, SignoffError) as exc:
        flash(f"Agent {name} not changed: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    flash(f"Agent {name} is now version {updated.version}.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def delete_agent(name: str) -> ResponseReturnValue:
    with flash_refusal():
        remove_agent(services().stores, name, force=request.form.get("force") == "on")
        flash(f"Agent {name} deleted.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def create_schedule() -> ResponseReturnValue:
    fields = _form(
        "name", "agent", "prompt", "cron", "timezone", "every_s", "at", "conversation", "overlap"
    )
    fields |= _form("missed")
    try:
        new = NewSchedule.model_validate(fields)
        services().stores.schedules.create(new, actor=current_principal().name)
    except (ValidationError, SignoffError) as exc:
        flash(f"Schedule not created: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    flash(f"Schedule {new.name} created.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def change_schedule(name: str, action: str) -> ResponseReturnValue:
    store = services().stores.schedules
    change, done = {
        "pause": (store.pause, "paused"),
        "resume": (store.resume, "resumed"),
        "delete": (store.delete, "deleted"),
    }[action]
    with flash_refusal():
        change(name)
        flash(f"Schedule {name} {done}.", "info")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("agents", __name__)
    bp.add_url_rule("/agents", view_func=index)
    bp.add_url_rule("/agents/new", view_func=create_agent, methods=["POST"])
    bp.add_url_rule("/agents/<id:name>/update", view_func=update_agent, methods=["POST"])
    bp.add_url_rule("/agents/<id:name>/delete", view_func=delete_agent, methods=["POST"])
    bp.add_url_rule("/schedules/new", view_func=create_schedule, methods=["POST"])
    bp.add_url_rule(
        "/schedules/<id:name>/<any(pause,resume,delete):action>",
        view_func=change_schedule,
        methods=["POST"],
    )
    return bp

"""The agents page: named agents and their schedules; operators create, pause and delete."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.agents import NewAgent
from shared.models.schedules import Missed, NewSchedule, Overlap, RunMode
from shared.store.users import Role
from webui.auth import current_principal, requires
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
    )


def _form(*names: str) -> dict[str, Any]:
    """The named form fields that were filled in (stripped)."""
    found = {name: request.form.get(name, "").strip() for name in names}
    return {name: value for name, value in found.items() if value}


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg']}" for e in exc.errors()
        )
    return str(exc)


@requires(Role.OPERATOR)
def create_agent() -> ResponseReturnValue:
    fields = _form("name", "description", "system_prompt", "provider", "model", "tools")
    try:
        if "tools" in fields:
            fields["tools"] = json.loads(fields["tools"])
        if request.form.get("approval_timeout_s", "").strip():
            fields["approval_timeout_s"] = int(request.form["approval_timeout_s"])
        created = services().stores.agents.create(
            NewAgent.model_validate(fields), actor=current_principal().name
        )
    except (ValidationError, ValueError, SignoffError) as exc:
        flash(f"Agent not created: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    flash(f"Agent {created.name} created (version {created.version}).", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def delete_agent(name: str) -> ResponseReturnValue:
    try:
        services().stores.agents.delete(name)
        flash(f"Agent {name} deleted.", "info")
    except SignoffError as exc:
        flash(str(exc), "error")
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
    try:
        change(name)
        flash(f"Schedule {name} {done}.", "info")
    except SignoffError as exc:
        flash(str(exc), "error")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("agents", __name__)
    bp.add_url_rule("/agents", view_func=index)
    bp.add_url_rule("/agents/new", view_func=create_agent, methods=["POST"])
    bp.add_url_rule("/agents/<id:name>/delete", view_func=delete_agent, methods=["POST"])
    bp.add_url_rule("/schedules/new", view_func=create_schedule, methods=["POST"])
    bp.add_url_rule(
        "/schedules/<id:name>/<any(pause,resume,delete):action>",
        view_func=change_schedule,
        methods=["POST"],
    )
    return bp

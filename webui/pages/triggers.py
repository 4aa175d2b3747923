"""The triggers page: every role reads the triggers (never a secret); operators create them,
rotate their secrets and delete them. A secret appears once, on the answer that made it."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.triggers import Trigger, TriggerRequest
from shared.models.users import Role
from shared.validation import describe_problems
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.services import services
from webui.webhook_services import triggers

__all__ = ["blueprint"]


def _page(shown: Trigger | None = None, status: int = 200) -> ResponseReturnValue:
    """The page; `shown` is a trigger whose secret was just made, displayed this once."""
    return (
        render_template(
            "triggers.html",
            triggers=triggers().all(),
            agents=services().stores.agents.list(),
            shown=shown,
            writes=current_principal().role.allows(Role.OPERATOR),
        ),
        status,
    )


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    return _page()


@requires(Role.OPERATOR)
def create() -> ResponseReturnValue:
    fields = {key: request.form.get(key, "").strip() for key in ("name", "agent", "description")}
    try:
        body = TriggerRequest(**fields, template=request.form.get("template", ""))
        services().stores.agents.get(body.agent)
        created = triggers().create(body, actor=current_principal().name)
    except ValidationError as exc:
        flash(f"Trigger not created: {describe_problems(exc, 'trigger')}", "error")
        return redirect(url_for(".index"))
    except SignoffError as exc:
        flash(f"Trigger not created: {exc.message}", "error")
        return redirect(url_for(".index"))
    # Shown on this answer only, not through a redirect: the secret never sits in a cookie.
    return _page(shown=created, status=201)


@requires(Role.OPERATOR)
def rotate_secret(name: str) -> ResponseReturnValue:
    try:
        rotated = triggers().rotate_secret(name)
    except SignoffError as exc:
        flash(exc.message, "error")
        return redirect(url_for(".index"))
    return _page(shown=rotated)


@requires(Role.OPERATOR)
def delete(name: str) -> ResponseReturnValue:
    with flash_refusal():
        triggers().delete(name)
        flash(f"Trigger {name} deleted.", "info")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("triggers", __name__)
    bp.add_url_rule("/triggers", view_func=index)
    bp.add_url_rule("/triggers", endpoint="create", view_func=create, methods=["POST"])
    bp.add_url_rule("/triggers/<id:name>/secret", view_func=rotate_secret, methods=["POST"])
    bp.add_url_rule("/triggers/<id:name>/delete", view_func=delete, methods=["POST"])
    return bp

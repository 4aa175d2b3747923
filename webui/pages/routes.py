"""The routes page: every role reads where approval requests go; operators add and remove
routes (email recipients as ``approver=address`` lines, a Slack channel, an escalation)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.routes import EmailRecipient, Route
from shared.models.users import Role
from shared.store.routes import RouteStore
from shared.validation import describe_problems
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.services import services

__all__ = ["blueprint"]

_MINUTE = 60


def _store() -> RouteStore:
    svc = services()
    return RouteStore(svc.redis, svc.keys)


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    writes = current_principal().role.allows(Role.OPERATOR)
    return render_template("routes.html", routes=_store().all(), writes=writes)


def _recipients(text: str) -> list[EmailRecipient]:
    found = []
    for line in text.splitlines():
        approver, _, address = line.strip().partition("=")
        if line.strip():
            found.append(EmailRecipient(approver=approver.strip(), address=address.strip()))
    return found


def _route() -> Route:
    form = request.form
    minutes = form.get("escalate_after_m", "").strip()
    optional = {
        name: form.get(name, "").strip() or None
        for name in ("tool", "label", "batch_id", "agent", "slack_channel", "escalate_to")
    }
    return Route(
        name=form.get("name", "").strip(),
        email=_recipients(form.get("email", "")),
        escalate_after_s=int(float(minutes) * _MINUTE) if minutes else None,
        escalation_only=form.get("escalation_only") == "on",
        **optional,
    )


@requires(Role.OPERATOR)
def create() -> ResponseReturnValue:
    try:
        route = _route()
        _store().add(route)
    except ValidationError as exc:
        flash(f"Route not added: {describe_problems(exc, 'route')}", "error")
    except ValueError:
        flash("Route not added: escalate after must be a number of minutes", "error")
    except SignoffError as exc:
        flash(f"Route not added: {exc.message}", "error")
    else:
        flash(f"Route {route.name} added.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def remove(name: str) -> ResponseReturnValue:
    with flash_refusal():
        _store().remove(name)
        flash(f"Route {name} removed.", "info")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("routes", __name__)
    bp.add_url_rule("/routes", view_func=index)
    bp.add_url_rule("/routes", endpoint="create", view_func=create, methods=["POST"])
    bp.add_url_rule("/routes/<name>/remove", view_func=remove, methods=["POST"])
    return bp

"""The webhooks page: endpoints (add, remove), the delivery log, and re-sending a delivery."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models.users import Role
from shared.models.webhooks import (
    DeliveryStatus,
    EndpointRequest,
    WebhookEndpoint,
    WebhookEventKind,
)
from shared.validation import describe_problems
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.webhook_services import delivery_log, endpoints, resend

__all__ = ["blueprint"]

_SHOWN = 100  # deliveries on the page


def _page(created: WebhookEndpoint | None = None, status: int = 200) -> ResponseReturnValue:
    wanted = request.args.get("status", "")
    only = DeliveryStatus(wanted) if wanted in {s.value for s in DeliveryStatus} else None
    return (
        render_template(
            "webhooks.html",
            endpoints=endpoints().all(),
            deliveries=delivery_log().recent(limit=_SHOWN, status=only),
            kinds=list(WebhookEventKind),
            statuses=list(DeliveryStatus),
            only=only,
            created=created,
        ),
        status,
    )


@requires(Role.OPERATOR)
def index() -> ResponseReturnValue:
    return _page()


@requires(Role.OPERATOR)
def add() -> ResponseReturnValue:
    try:
        body = EndpointRequest(
            url=request.form.get("url", "").strip(),
            events=request.form.getlist("events"),
            description=request.form.get("description", "").strip(),
        )
    except ValidationError as exc:
        flash(f"Not added: {describe_problems(exc, 'endpoint')}", "error")
        return redirect(url_for(".index"))
    try:
        created = endpoints().add(body, actor=current_principal().name)
    except InvalidInput as exc:  # an address the outbound guard refuses
        flash(f"Not added: {exc.message}", "error")
        return redirect(url_for(".index"))
    # Shown on this answer only, not through a redirect: the secret never sits in a cookie.
    return _page(created=created, status=201)


@requires(Role.OPERATOR)
def remove(endpoint_id: str) -> ResponseReturnValue:
    with flash_refusal():
        removed = endpoints().remove(endpoint_id)
        flash(f"Removed {removed.url}.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def redeliver(delivery_id: str) -> ResponseReturnValue:
    with flash_refusal():
        resend(delivery_id)
        flash(f"Re-sending {delivery_id}.", "info")
    return redirect(url_for(".index"))


def blueprint() -> Blueprint:
    bp = Blueprint("webhooks", __name__)
    bp.add_url_rule("/webhooks", view_func=index)
    bp.add_url_rule("/webhooks", endpoint="add", view_func=add, methods=["POST"])
    bp.add_url_rule("/webhooks/<id:endpoint_id>/remove", view_func=remove, methods=["POST"])
    bp.add_url_rule(
        "/webhooks/deliveries/<id:delivery_id>/redeliver", view_func=redeliver, methods=["POST"]
    )
    return bp

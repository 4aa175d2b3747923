"""/triggers: operators define triggers; senders fire them with signed events.

`POST /triggers/{name}` is authenticated by the request's Standard Webhooks signature
alone (the trigger's secret), not by a user or token: 401 without a valid one, 409 for an
event id already received (a replay), 422 for an event the template cannot fill.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, request, url_for
from pydantic import BaseModel, Field, RootModel

from shared.models.triggers import Trigger, TriggerFired, TriggerRequest
from shared.models.users import Role
from shared.webhooks.signing import SignatureRefused
from shared.webhooks.triggers import DuplicateEvent, fire
from webui.api.replies import created, reply
from webui.auth import current_principal, requires, signature_authenticated
from webui.body_limit import body_limit
from webui.errors import HttpProblem
from webui.operations import operation
from webui.params import json_body
from webui.services import services
from webui.webhook_services import triggers

__all__ = ["MAX_EVENT_BYTES", "blueprint"]

log = logging.getLogger(__name__)

MAX_EVENT_BYTES = 1_000_000


class TriggerList(BaseModel):
    items: list[Trigger] = Field(description="By name; secrets are not shown.")


class CreatedTrigger(Trigger):
    """The trigger just made, with its secret (shown this once) and where to send events."""

    secret: str = Field(description="`whsec_<base64>`: senders sign events with it.")
    url: str = Field(description="Where senders POST events.")


class TriggerEvent(RootModel[dict[str, Any]]):
    """The sender's event: any JSON object; the trigger's template picks fields from it."""


@body_limit(MAX_EVENT_BYTES)
@signature_authenticated
@operation(
    "Fire a trigger with a signed event: starts a conversation of its agent",
    request=TriggerEvent,
    response=TriggerFired,
    status=202,
    errors=(400, 401, 404, 409, 413, 422),  # 404: a name no trigger can have
    description="Authenticated by the Standard Webhooks headers alone: `webhook-id` (the "
    "event's id), `webhook-timestamp` (Unix seconds, within SIGNOFF_TRIGGER_TOLERANCE_S of "
    "now) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` "
    "with the trigger's secret). A missing or bad signature is a 401, and so is an unknown "
    "trigger (names cannot be probed); an id already "
    "received is a 409 naming the conversation it started.",
)
def fire_trigger(name: str) -> Response:
    body = request.get_data(as_text=True)
    try:
        headers = {key.lower(): value for key, value in request.headers.items()}
        fired = fire(services().client, name, headers, body)
    except SignatureRefused as exc:
        raise HttpProblem(
            401,
            "bad_signature",
            f"trigger {name}: {exc}",
            headers={"WWW-Authenticate": "Signature"},
        ) from None
    except DuplicateEvent as exc:
        location = url_for("api.conversations.get", cid=exc.conversation_id)
        raise HttpProblem(409, exc.code, exc.message, headers={"Location": location}) from None
    log.info("trigger %s started conversation %s", name, fired.conversation_id)
    return reply(fired, 202)


@requires(Role.VIEWER)
@operation("Triggers: name, agent, template; never a secret", response=TriggerList)
def list_triggers() -> Response:
    return reply(TriggerList(items=triggers().all()))


@requires(Role.OPERATOR)
@operation(
    "Define a trigger (its secret is in this answer only)",
    request=TriggerRequest,
    response=CreatedTrigger,
    status=201,
    errors=(400, 404, 409, 422),
)
def create_trigger() -> Response:
    body = json_body(TriggerRequest)
    svc = services()
    svc.stores.agents.get(body.agent)  # 404 for an agent that does not exist
    trigger = triggers().create(body, actor=current_principal().name)
    return created(_with_secret(trigger), ".show_trigger", name=trigger.name)


def _with_secret(trigger: Trigger) -> CreatedTrigger:
    url = url_for(".fire_trigger", name=trigger.name, _external=True)
    return CreatedTrigger(**trigger.model_dump(), secret=trigger.secret, url=url)


@requires(Role.OPERATOR)
@operation(
    "Give a trigger a new secret (in this answer only); the old one stops working at once",
    response=CreatedTrigger,
    errors=(404,),
)
def rotate_trigger_secret(name: str) -> Response:
    rotated = triggers().rotate_secret(name)
    log.info("%s rotated the secret of trigger %s", current_principal().name, name)
    return reply(_with_secret(rotated))


@requires(Role.VIEWER)
@operation("One trigger (never its secret)", response=Trigger, errors=(404,))
def show_trigger(name: str) -> Response:
    return reply(triggers().get(name))


@requires(Role.OPERATOR)
@operation("Delete a trigger (its conversations stay)", response=Trigger, errors=(404,))
def delete_trigger(name: str) -> Response:
    deleted = triggers().delete(name)
    log.info("%s deleted trigger %s", current_principal().name, name)
    return reply(deleted)


def blueprint() -> Blueprint:
    bp = Blueprint("triggers", __name__)
    bp.add_url_rule("/triggers", view_func=list_triggers, methods=["GET"])
    bp.add_url_rule("/triggers", view_func=create_trigger, methods=["POST"])
    bp.add_url_rule("/triggers/<id:name>", view_func=fire_trigger, methods=["POST"])
    bp.add_url_rule("/triggers/<id:name>", view_func=show_trigger, methods=["GET"])
    bp.add_url_rule("/triggers/<id:name>", view_func=delete_trigger, methods=["DELETE"])
    bp.add_url_rule("/triggers/<id:name>/secret", view_func=rotate_trigger_secret, methods=["POST"])
    return bp

"""/webhooks: the endpoints operators register for events, and the delivery log (re-sendable).

Operator only: an endpoint's URL and the payloads it receives are the operator's business.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from flask import Blueprint, Response
from pydantic import BaseModel, Field

from shared.models.users import Role
from shared.models.webhooks import DeliveryStatus, EndpointRequest, WebhookDelivery, WebhookEndpoint
from webui.api.replies import created, reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import ChoiceParam, IntegerParam, QueryModel, json_body
from webui.webhook_services import delivery_log, endpoints, resend

__all__ = ["DeliveriesQuery", "blueprint"]

log = logging.getLogger(__name__)


class EndpointList(BaseModel):
    items: list[WebhookEndpoint] = Field(description="Oldest first; secrets are not shown.")


class CreatedEndpoint(WebhookEndpoint):
    """The endpoint just registered, with its signing secret: shown this once."""

    secret: str = Field(description="`whsec_<base64>`: verify the `webhook-signature` with it.")


class DeliveryList(BaseModel):
    items: list[WebhookDelivery] = Field(description="Newest first.")


class DeliveriesQuery(QueryModel):
    """GET /webhooks/deliveries."""

    endpoint_id: str | None = Field(
        None, pattern=r"^wh_[0-9a-f]{12}$", description="Only this endpoint's deliveries."
    )
    status: ChoiceParam[DeliveryStatus] | None = Field(None, description="Only in this status.")
    limit: IntegerParam = Field(50, ge=1, le=500, description="Deliveries.")


@requires(Role.OPERATOR)
@operation("Webhook endpoints", response=EndpointList)
def list_endpoints() -> Response:
    return reply(EndpointList(items=endpoints().all()))


@requires(Role.OPERATOR)
@operation(
    "Register a webhook endpoint for events (its secret is in this answer only)",
    request=EndpointRequest,
    response=CreatedEndpoint,
    status=201,
    errors=(400, 422),
    description="The URL must be http(s); deliveries are POSTed to it from the workers, "
    "signed with the Standard Webhooks headers. A host that is, or resolves to, a loopback, "
    "private, link-local or metadata address is refused (422) unless SIGNOFF_OUTBOUND_ALLOW "
    "allows it; workers check again at every connection.",
)
def add_endpoint() -> Response:
    body = json_body(EndpointRequest)
    actor = current_principal().name
    endpoint = endpoints().add(body, actor=actor)
    # the host only: a chat tool's incoming-webhook URL is a secret in itself
    host = urlsplit(endpoint.url).hostname
    log.info("%s registered webhook endpoint %s for %s", actor, endpoint.id, host)
    answer = CreatedEndpoint(**endpoint.model_dump(), secret=endpoint.secret)
    return created(answer, ".get_endpoint", endpoint_id=endpoint.id)


@requires(Role.OPERATOR)
@operation("One webhook endpoint", response=WebhookEndpoint, errors=(404,))
def get_endpoint(endpoint_id: str) -> Response:
    return reply(endpoints().get(endpoint_id))


@requires(Role.OPERATOR)
@operation(
    "Remove a webhook endpoint (its pending deliveries fail)",
    response=WebhookEndpoint,
    errors=(404,),
)
def remove_endpoint(endpoint_id: str) -> Response:
    removed = endpoints().remove(endpoint_id)
    log.info("%s removed webhook endpoint %s", current_principal().name, endpoint_id)
    return reply(removed)


@requires(Role.OPERATOR)
@operation(
    "The delivery log, newest first: each attempt's status code or error and time",
    response=DeliveryList,
    query=DeliveriesQuery,
)
def deliveries() -> Response:
    query = DeliveriesQuery.read()
    found = delivery_log().recent(
        limit=query.limit, endpoint_id=query.endpoint_id, status=query.status
    )
    return reply(DeliveryList(items=found))


@requires(Role.OPERATOR)
@operation("One delivery with its attempts", response=WebhookDelivery, errors=(404,))
def delivery(delivery_id: str) -> Response:
    return reply(delivery_log().get(delivery_id))


@requires(Role.OPERATOR)
@operation(
    "Send a delivery again (same webhook-id and body, a full set of attempts)",
    response=WebhookDelivery,
    status=202,
    errors=(404,),
)
def redeliver(delivery_id: str) -> Response:
    resent = resend(delivery_id)
    log.info("%s re-sent webhook delivery %s", current_principal().name, delivery_id)
    return reply(resent, 202)


def blueprint() -> Blueprint:
    bp = Blueprint("webhooks", __name__)
    bp.add_url_rule("/webhooks/endpoints", view_func=list_endpoints, methods=["GET"])
    bp.add_url_rule("/webhooks/endpoints", view_func=add_endpoint, methods=["POST"])
    bp.add_url_rule("/webhooks/deliveries", view_func=deliveries, methods=["GET"])
    bp.add_url_rule("/webhooks/deliveries/<id:delivery_id>", view_func=delivery, methods=["GET"])
    bp.add_url_rule(
        "/webhooks/deliveries/<id:delivery_id>/redeliver", view_func=redeliver, methods=["POST"]
    )
    bp.add_url_rule("/webhooks/endpoints/<id:endpoint_id>", view_func=get_endpoint, methods=["GET"])
    bp.add_url_rule(
        "/webhooks/endpoints/<id:endpoint_id>", view_func=remove_endpoint, methods=["DELETE"]
    )
    return bp

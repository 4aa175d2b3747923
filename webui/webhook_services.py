"""The web's view of webhooks and triggers: the endpoint store, the delivery log, re-sending,
and the trigger store."""

from __future__ import annotations

from shared.models.webhooks import WebhookDelivery
from shared.outbound import OutboundPolicy
from shared.store.triggers import TriggerStore
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from webui.services import services

__all__ = ["delivery_log", "endpoints", "resend", "triggers"]


def endpoints() -> EndpointStore:
    svc = services()
    return EndpointStore(svc.redis, svc.keys, outbound=OutboundPolicy(svc.settings.outbound_allow))


def delivery_log() -> DeliveryLog:
    svc = services()
    return DeliveryLog(svc.redis, svc.keys, size=svc.settings.webhook_log_size)


def resend(delivery_id: str) -> WebhookDelivery:
    """Makes a delivery pending again and queues its first new attempt."""
    return delivery_log().resend(delivery_id, services().client.tasks.deliver_webhook)


def triggers() -> TriggerStore:
    svc = services()
    return TriggerStore(svc.redis, svc.keys)

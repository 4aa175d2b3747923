"""The worker's webhook parts: the `signoff.webhook.deliver` task on its own queue, and the
dispatcher thread that feeds it (see `worker/webhooks/dispatch.py`)."""

from __future__ import annotations

import logging

from celery import Celery

from shared.client.broker import countdown_for
from shared.client.tasks import DELIVER_WEBHOOK, celery_config, webhook_queue_name
from shared.errors import StorageError
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from worker import broker
from worker.routes.tasks import register_routes
from worker.webhooks.delivery import Deliverer, backoff_s
from worker.webhooks.dispatch import Dispatcher, DispatcherStep

__all__ = ["create_delivery_celery", "register_webhooks"]

log = logging.getLogger(__name__)


def create_delivery_celery(settings: Settings) -> Celery:
    """The delivery worker's app: deliveries and the dispatcher only (no runtime, no tools),
    so the process `signoff worker` runs beside the turn worker starts light."""
    broker.install(pool_wait_s=settings.redis_pool_wait_s)
    app = Celery("signoff", set_as_current=False)
    app.conf.update(celery_config(settings))
    app.conf.update(worker_pool="threads", worker_concurrency=settings.webhook_concurrency)
    register_webhooks(app, settings)
    return app


def register_webhooks(app: Celery, settings: Settings) -> None:
    """Adds the delivery task and, to every worker this app runs, a dispatcher thread."""
    keys = KeySpace.of(settings)
    client = connect(settings)
    deliveries = DeliveryLog(client, keys, size=settings.webhook_log_size)
    deliverer = Deliverer(settings, EndpointStore(client, keys), deliveries)
    queue = webhook_queue_name(settings)

    def later(delivery_id: str, wait_s: float = 0.0, seen: int | None = None) -> None:
        wait = countdown_for(settings, wait_s)
        deliver.apply_async((delivery_id, seen), countdown=wait, queue=queue)

    @app.task(name=DELIVER_WEBHOOK, ignore_result=True)
    def deliver(delivery_id: str, seen: int | None = None) -> None:
        """One attempt; `seen`: the attempts its sender saw made (None from a re-send)."""
        try:
            retry = deliverer.attempt(delivery_id, seen)
        except StorageError as exc:  # Redis failed around the attempt: try again later
            log.warning("webhook %s: %s", delivery_id, exc)
            later(delivery_id, backoff_s(settings, 1), seen)
            return
        if retry is not None:
            later(delivery_id, retry.wait_s, retry.made)

    def dispatcher() -> Dispatcher:
        # its own connection: the dispatcher blocks on the outbox a second at a time
        own = connect(settings)
        return Dispatcher(
            own,
            keys,
            DeliveryLog(own, keys, size=settings.webhook_log_size),
            lambda did: later(did, 0.0, 0),  # a first attempt: none made before it
            send_retry=lambda did, seen: later(did, 0.0, seen),
            retry_grace_s=settings.webhook_retry_grace_s,
        )

    app.signoff_dispatcher = dispatcher
    app.steps["worker"].add(DispatcherStep)
    register_routes(app, settings)  # approval emails go out beside webhook deliveries

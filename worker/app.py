"""The Celery app, built from settings by a factory; nothing is created at import time."""

from __future__ import annotations

import logging

from celery import Celery

from shared.client.tasks import (
    ADVANCE,
    SWEEP,
    advance_messages,
    broker_errors,
    celery_config,
)
from shared.settings import Settings, load_settings
from shared.store.connection import connect
from worker import broker
from worker.runtime import Runtime
from worker.webhook_tasks import register_webhooks

__all__ = ["create_celery"]

log = logging.getLogger(__name__)


def create_celery(settings: Settings | None = None) -> Celery:
    """A worker app whose tasks share one Runtime (one Redis pool, one provider set)."""
    settings = settings or load_settings()
    broker.install()
    app = Celery("signoff", set_as_current=False)
    app.conf.update(celery_config(settings))
    app.conf.update(
        worker_pool="threads",
        worker_concurrency=settings.worker_concurrency,
        beat_schedule={"sweep": {"task": SWEEP, "schedule": settings.sweep_interval_s}},
    )

    def send_advance(cid: str) -> None:
        # StorageError, as any Redis failure: the sweep and the schedule firer retry on it
        with broker_errors(f"sending advance for conversation {cid}"):
            advance.delay(cid)

    messages = advance_messages(settings, app)
    runtime = Runtime(
        settings,
        connect(settings),
        send_advance=send_advance,
        queue_advance=lambda cid: messages.task(ADVANCE, cid),
    )

    @app.task(name=ADVANCE, ignore_result=True)
    def advance(conversation_id: str) -> str:
        outcome = runtime.advance(conversation_id)
        log.info("advance %s: %s", conversation_id, outcome)
        return outcome

    @app.task(name=SWEEP, ignore_result=True)
    def sweep() -> list[str]:
        """The sweep, for a producer that asks for one; `signoff beat` runs its own."""
        return runtime.sweep().resent

    app.signoff_runtime = runtime
    register_webhooks(app, settings)
    return app

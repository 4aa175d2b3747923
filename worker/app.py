"""The Celery app, built from settings by a factory; nothing is created at import time."""

from __future__ import annotations

import logging

from celery import Celery

from shared.client.broker import (
    BrokerKind,
    broker_kind,
    countdown_for,
    uses_outbox,
)
from shared.client.tasks import (
    ADVANCE,
    MCP_REFRESH,
    SWEEP,
    advance_messages,
    broker_errors,
    celery_config,
)
from shared.logs import log_context
from shared.settings import Settings, load_settings
from shared.store.connection import WORKER_POOL, connect
from worker import broker, observe
from worker.relay import RelayStep, relay_for
from worker.runtime import Runtime
from worker.webhooks.tasks import register_webhooks

__all__ = ["create_celery"]

log = logging.getLogger(__name__)


def create_celery(settings: Settings | None = None) -> Celery:
    """A worker app whose tasks share one Runtime (one Redis pool, one provider set)."""
    settings = settings or load_settings()
    # A leg (and an ack) waits for a pooled connection as long as a lease lives (the renewer
    # and the delta ticker have their own): under a CPU-bound load, greenlets holding
    # connections wait their turn to run, and 5 s of waiting failed legs (PoolExhausted).
    wait_s = max(settings.redis_pool_wait_s, settings.lease_ttl_ms / 1000)
    legs_settings = settings.model_copy(update={"redis_pool_wait_s": wait_s})
    broker.install(pool_wait_s=wait_s)
    for name in ("httpx", "httpx2"):  # a line per model call; failures are the turn's error
        logging.getLogger(name).setLevel(logging.WARNING)
    app = Celery("signoff", set_as_current=False)
    config = celery_config(settings)
    if broker_kind(settings) is not BrokerKind.RABBITMQ:
        # the worker's broker channels: as many connections as its legs' pool, waited for
        config["broker_transport_options"] = {
            **config["broker_transport_options"],
            "max_connections": settings.worker_redis_connections,
        }
    app.conf.update(config)
    app.conf.update(
        worker_concurrency=settings.worker_concurrency,  # the pool is chosen by -P (__main__)
        # One result backend (the disabled one: no results) for the app: Celery keeps one per
        # thread otherwise, and in the gevent pool each task is a new greenlet, so it built
        # one for every task (3% of a one-turn leg's CPU).
        result_backend_thread_safe=True,
        beat_schedule={"sweep": {"task": SWEEP, "schedule": settings.sweep_interval_s}},
    )

    def send_advance(cid: str) -> None:
        # StorageError, as any Redis failure: the sweep and the schedule firer retry on it
        with broker_errors(f"sending advance for conversation {cid}"):
            advance.delay(cid)

    def send_advance_later(cid: str, delay_s: float) -> None:
        with broker_errors(f"sending advance for conversation {cid} in {delay_s:g} s"):
            advance.apply_async((cid,), countdown=countdown_for(settings, delay_s))

    messages = advance_messages(settings, app)
    runtime = Runtime(
        settings,
        connect(legs_settings, pool=WORKER_POOL),
        send_advance=send_advance,
        queue_advance=lambda cid: messages.task(ADVANCE, cid),
        send_advance_later=send_advance_later,
    )

    @app.task(name=ADVANCE, ignore_result=True)
    def advance(conversation_id: str) -> str:
        with log_context(conversation_id=conversation_id):
            outcome = runtime.advance(conversation_id)
            log.info("advance %s: %s", conversation_id, outcome)
        observe.leg_ended(outcome)
        return outcome

    @app.task(name=SWEEP, ignore_result=True)
    def sweep() -> list[str]:
        """The sweep, for a producer that asks for one; `signoff beat` runs its own."""
        return runtime.sweep().resent

    @app.task(name=MCP_REFRESH, ignore_result=True)
    def mcp_refresh(server: str) -> str:
        """Lists an MCP server's tools again, for an operator's add or refresh."""
        found = runtime.mcp.refresh(server)
        state = "removed" if found is None else found.state.value
        log.info("MCP server %s refreshed: %s", server, state)
        return state

    app.signoff_runtime = runtime
    if uses_outbox(settings):  # tasks of state writes wait in the outbox: relay them
        app.signoff_relay = lambda: relay_for(app, settings)
        app.steps["worker"].add(RelayStep)
    register_webhooks(app, settings)
    return app

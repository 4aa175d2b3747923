"""The baseline: a bare Celery app with Signoff's Celery settings and two no-op tasks."""

from __future__ import annotations

import functools

import redis
from celery import Celery

from shared.client.tasks import celery_config
from shared.settings import Settings, load_settings


def make_app(settings: Settings) -> Celery:
    """The app on `settings`' Redis. A benchmark sends through its own (`sender`): the module's
    app took the Redis named when it was first imported, and each benchmark has a new one."""
    app = Celery("bench-noop", set_as_current=False)
    app.conf.update(celery_config(settings))
    app.conf.update(task_default_queue="bench.noop", worker_pool="threads")
    return app


def sender(redis_url: str) -> Celery:
    return make_app(Settings(redis_url=redis_url))


settings = load_settings()
app = make_app(settings)  # the worker's: `celery -A bench.noop_app worker`


@functools.cache
def _redis() -> redis.Redis:
    """One pooled client, as Signoff's worker keeps one: the baseline pays no connect per task."""
    return redis.Redis.from_url(settings.redis_url)


@app.task(name="bench.noop", ignore_result=True)
def noop(key: str) -> None:
    """Does nothing but count itself (on the pooled client), so the benchmark knows when all ran."""
    _redis().incr(key)


@app.task(name="bench.ping", ignore_result=True)
def ping(channel: str) -> None:
    """Says it is running, as a continuation's first status event does: the pickup baseline."""
    _redis().publish(channel, "running")

"""The baseline: a bare Celery app with Signoff's Celery settings and one no-op task."""

from __future__ import annotations

from celery import Celery

from shared.client.tasks import celery_config
from shared.settings import load_settings

settings = load_settings()
app = Celery("bench-noop", set_as_current=False)
app.conf.update(celery_config(settings))
app.conf.update(task_default_queue="bench.noop", worker_pool="threads")


@app.task(name="bench.noop", ignore_result=True)
def noop(key: str) -> None:
    """Does nothing but count itself, so the benchmark knows when all have run."""
    import redis

    client = redis.Redis.from_url(settings.redis_url)
    client.incr(key)
    client.close()

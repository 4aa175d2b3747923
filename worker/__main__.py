"""`python -m worker [worker|beat] [options]`: what `signoff worker` and `signoff beat` run."""

from __future__ import annotations

import sys

from worker.green import patch_if_green

patch_if_green(sys.argv[1:])  # first of all: nothing else may see the unpatched library

from typing import Any  # noqa: E402

from celery import Celery  # noqa: E402
from celery.signals import worker_init, worker_ready, worker_shutdown  # noqa: E402

from shared.client.broker import BrokerKind, broker_kind, declare_queues  # noqa: E402
from shared.client.tasks import queue_name, webhook_queue_name  # noqa: E402
from shared.local.open_files import raise_open_files_limit  # noqa: E402
from shared.logs import configure  # noqa: E402
from shared.metrics.server import serving  # noqa: E402
from shared.settings import Settings, WorkerPool, load_settings  # noqa: E402
from worker import broker  # noqa: E402
from worker.celery_logs import adopt_celery_logging, quiet  # noqa: E402
from worker.celery_tracing import trace_celery  # noqa: E402
from worker.heap import freeze_startup_heap  # noqa: E402
from worker.providers.registry import preload  # noqa: E402
from worker.respawn import respawn  # noqa: E402

RESPAWN_FORMAT = "[%(asctime)s: %(levelname)s/respawn] %(message)s"


def main(argv: list[str]) -> None:
    settings = load_settings()
    command = argv[0] if argv else "worker"
    extra = argv[1:]
    if command == "worker":
        # the Celery worker runs as a child that is restarted if it dies on its own
        configure(settings, process="worker", text_format=RESPAWN_FORMAT)
        with serving(settings, "worker", settings.metrics_port):  # the children's files too
            code = respawn(*worker_commands(settings, extra))
        sys.exit(code)
    if command == "celery-deliveries":  # the delivery worker: a light app of its own
        from worker.webhooks.tasks import create_delivery_celery

        app = create_delivery_celery(settings)
        adopt_celery_logging(settings, "worker")
        trace_celery(settings, service="worker")
        sys.exit(_run_worker(app, settings, extra, pool=WorkerPool.THREADS))
    from worker.app import create_celery  # the whole runtime: providers, tools, MCP

    app = create_celery(settings)
    service = "beat" if command == "beat" else "worker"
    adopt_celery_logging(settings, service)
    trace_celery(settings, service=service)
    if command == "beat":
        # the in-memory scheduler (the default one persists its state with shelve, which
        # pickles), running the sweep in this process so that expiry needs no worker
        scheduler = "worker.beat:SweepingScheduler"
        with serving(settings, "beat", settings.beat_metrics_port):
            app.start(
                [*quiet(settings), "beat", "--loglevel=INFO", "--scheduler", scheduler, *extra]
            )
        return
    if command != "celery-worker":
        raise SystemExit(f"unknown command {command!r}: use worker or beat")
    sys.exit(_run_worker(app, settings, extra, pool=settings.worker_pool))


def worker_commands(settings: Settings, extra: list[str]) -> list[list[str]]:
    """The Celery workers `signoff worker` keeps running: one per queue, unless `-Q` names them.

    Turns and webhook deliveries run in processes of their own, each with its own threads,
    prefetch and connections: a delivery held by a slow endpoint never takes a turn's place.
    """
    base = [sys.executable, "-m", "worker", "celery-worker"]
    if _names_queues(extra):
        return [[*base, *extra]]
    turns = [*base, "-Q", queue_name(settings), *extra]
    deliveries = [
        sys.executable,
        "-m",
        "worker",
        "celery-deliveries",
        "-Q",
        webhook_queue_name(settings),
        *_renamed(extra, "webhooks"),
        f"--concurrency={settings.webhook_concurrency}",
    ]
    return [turns, deliveries]


def _names_queues(extra: list[str]) -> bool:
    return any(arg in ("-Q", "--queues") or arg.startswith(("-Q", "--queues=")) for arg in extra)


def _renamed(extra: list[str], suffix: str) -> list[str]:
    """`extra` with the node name (`-n w1@%h`) given `suffix` (`w1-webhooks@%h`), or one added."""
    renamed = list(extra)
    for index, arg in enumerate(renamed):
        if arg in ("-n", "--hostname") and index + 1 < len(renamed):
            renamed[index + 1] = _suffixed(renamed[index + 1], suffix)
            return renamed
        if arg.startswith("--hostname="):
            renamed[index] = "--hostname=" + _suffixed(arg.partition("=")[2], suffix)
            return renamed
    return [*renamed, "-n", f"{suffix}@%h"]


def _suffixed(name: str, suffix: str) -> str:
    node, at, host = name.partition("@")
    return f"{node}-{suffix}{at}{host}"


def _run_worker(app: Celery, settings: Settings, extra: list[str], *, pool: WorkerPool) -> int:
    """Runs the Celery worker; returns its exit status (1 after an "Unrecoverable error").

    Celery's own entry points drop that status, and the respawning parent needs it: it is
    read from the worker as it shuts down.
    """
    statuses: list[int] = []

    def remember(sender: Any = None, **_: Any) -> None:
        code = getattr(sender, "exitcode", None)
        statuses.append(code if isinstance(code, int) else 0)

    worker_shutdown.connect(remember, weak=False)

    def freeze_when_ready(**_: Any) -> None:
        preload(settings.provider)  # the configured provider's SDK, frozen with the rest
        freeze_startup_heap()

    worker_ready.connect(freeze_when_ready, weak=False)
    if broker_kind(settings) is BrokerKind.RABBITMQ:
        # before its consumer binds the queues for delayed delivery (a failure is logged and
        # the consumer's own connection retries)
        worker_init.connect(lambda **_: declare_queues(app), weak=False)
    if pool is WorkerPool.GEVENT:
        if broker_kind(settings) is not BrokerKind.RABBITMQ:  # RabbitMQ redelivers by itself
            worker_ready.connect(lambda **_: broker.keep_restoring(app), weak=False)
        # each leg in flight holds a model connection and, for a round trip, a Redis one
        raise_open_files_limit(settings.worker_concurrency + settings.model_connections + 512)
    app.worker_main(
        [
            *quiet(settings),
            "worker",
            f"--pool={pool.value}",
            f"--concurrency={settings.worker_concurrency}",
            "--loglevel=INFO",
            "-Q",
            f"{queue_name(settings)},{webhook_queue_name(settings)}",
            "--without-gossip",
            "--without-mingle",
            *extra,
        ]
    )
    return next((code for code in statuses if code), 0)


if __name__ == "__main__":
    main(sys.argv[1:])

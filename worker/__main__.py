"""`python -m worker [worker|beat] [options]`: what `signoff worker` and `signoff beat` run."""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import Celery
from celery.signals import worker_shutdown

from shared.client.tasks import queue_name, webhook_queue_name
from shared.settings import Settings, load_settings
from worker.app import create_celery
from worker.respawn import respawn


def main(argv: list[str]) -> None:
    settings = load_settings()
    command = argv[0] if argv else "worker"
    extra = argv[1:]
    if command == "worker":
        # the Celery worker runs as a child that is restarted if it dies on its own
        logging.basicConfig(
            level=logging.INFO, format="[%(asctime)s: %(levelname)s/respawn] %(message)s"
        )
        sys.exit(respawn([sys.executable, "-m", "worker", "celery-worker", *extra]))
    app = create_celery(settings)
    if command == "beat":
        # the in-memory scheduler (the default one persists its state with shelve, which
        # pickles), running the sweep in this process so that expiry needs no worker
        scheduler = "worker.beat:SweepingScheduler"
        app.start(["beat", "--loglevel=INFO", "--scheduler", scheduler, *extra])
        return
    if command != "celery-worker":
        raise SystemExit(f"unknown command {command!r}: use worker or beat")
    sys.exit(_run_worker(app, settings, extra))


def _run_worker(app: Celery, settings: Settings, extra: list[str]) -> int:
    """Runs the Celery worker; returns its exit status (1 after an "Unrecoverable error").

    Celery's own entry points drop that status, and the respawning parent needs it: it is
    read from the worker as it shuts down.
    """
    statuses: list[int] = []

    def remember(sender: Any = None, **_: Any) -> None:
        code = getattr(sender, "exitcode", None)
        statuses.append(code if isinstance(code, int) else 0)

    worker_shutdown.connect(remember, weak=False)
    app.worker_main(
        [
            "worker",
            "--pool=threads",
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

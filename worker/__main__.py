"""`python -m worker [worker|beat] [options]`: what `signoff worker` and `signoff beat` run."""

from __future__ import annotations

import logging
import sys

from shared.settings import load_settings
from shared.tasks import queue_name
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
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={settings.worker_concurrency}",
            "--loglevel=INFO",
            "-Q",
            queue_name(settings),
            "--without-gossip",
            "--without-mingle",
            *extra,
        ]
    )


if __name__ == "__main__":
    main(sys.argv[1:])

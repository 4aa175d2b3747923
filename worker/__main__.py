"""`python -m worker [worker|beat] [options]`: what `signoff worker` and `signoff beat` run."""

from __future__ import annotations

import sys

from shared.settings import load_settings
from shared.tasks import queue_name
from worker.app import create_celery


def main(argv: list[str]) -> None:
    settings = load_settings()
    app = create_celery(settings)
    command = argv[0] if argv else "worker"
    extra = argv[1:]
    if command == "beat":
        # the in-memory scheduler (the default one persists its state with shelve, which
        # pickles), running the sweep in this process so that expiry needs no worker
        scheduler = "worker.beat:SweepingScheduler"
        app.start(["beat", "--loglevel=INFO", "--scheduler", scheduler, *extra])
        return
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
